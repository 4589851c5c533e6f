"""The lab's schema registries (`drctl lab up --schema-registry`): one Apicurio Registry 2.4.2
per cluster on loopback, serving Confluent's API under /apis/ccompat/v7 — what Confluent's
serializers and drctl's parity check speak.

Confluent's registry is not on Maven Central, Apicurio is: the registry is built once with
Maven from the pom shipped in this package (registry-pom.xml) and cached under the user
cache dir like the Kafka jars. Storage is H2 in memory, so a registry that restarts is empty
(`empty`: a DR registry that never got the source's schemas). Apicurio's own export and
import (`export_registry`, `import_registry`) copy a registry with its ids into an empty one.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import urllib.request
from collections.abc import Callable, Mapping
from importlib import resources
from pathlib import Path
from typing import Any

from drctl.errors import LabError
from drctl.lab.jars import require_java
from drctl.lab.processes import ManagedProcess, port_in_use, wait_until
from drctl.progress import Notify
from drctl.resources import cache_dir, cache_lock

APICURIO_VERSION = "2.4.2.Final"
CCOMPAT_PATH = "/apis/ccompat/v7"
CLUSTERS = ("primary", "secondary")
DEFAULT_PORT = 18085  # primary's; secondary's is the next
REGISTRY_HEAP = os.environ.get("DRCTL_LAB_REGISTRY_HEAP", "192m")
# Measured: about 245 MB resident each; C1 only and SerialGC, like the lab's other JVMs.
_JVM = ["-Xms32m", f"-Xmx{REGISTRY_HEAP}", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
        "-XX:ReservedCodeCacheSize=64m", "-Xss512k", "-Djava.awt.headless=true"]


def registry_ports(port: int) -> dict[str, int]:
    """Each cluster's registry port from the primary's (`--registry-port`)."""
    return {cluster: port + i for i, cluster in enumerate(CLUSTERS)}


def registry_url(port: int) -> str:
    return f"http://127.0.0.1:{port}{CCOMPAT_PATH}"


def resolve_registry(log_dir: Path | None = None) -> Path:
    """The registry's runner jar (its lib/ beside it): built on first use, then cached."""
    with cache_lock("apicurio-registry"):
        home = cache_dir() / "apicurio-registry" / APICURIO_VERSION
        if not (home / ".complete").exists():
            _build(home, log_dir)
        return _runner(home)


def _runner(home: Path) -> Path:
    found = sorted(home.glob("*-runner.jar"))
    if not found:
        raise LabError(f"The registry cache {home} has no runner jar.",
                       f"Delete {home} and run `drctl lab up --schema-registry` again.")
    return found[0]


def _build(home: Path, log_dir: Path | None) -> None:
    mvn = shutil.which("mvn")
    if not mvn:
        raise LabError("Maven (mvn) was not found; the lab builds its schema registry with it.",
                       "Install Maven 3.8+ (e.g. `apt-get install maven`).")
    home.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".build-", dir=home.parent))
    pom = staging / "pom.xml"
    pom.write_text(resources.files("drctl.lab").joinpath("registry-pom.xml").read_text())
    log = (log_dir or home.parent) / "registry-maven.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    try:
        with log.open("w") as out:
            result = subprocess.run([mvn, "-B", "-q", "-DskipTests", "-f", str(pom), "package"],
                                    stdout=out, stderr=subprocess.STDOUT, timeout=900,
                                    cwd=staging, check=False)
        target = staging / "target"
        if result.returncode != 0 or not list(target.glob("*-runner.jar")):
            raise LabError(f"Maven could not build Apicurio Registry {APICURIO_VERSION}.",
                           f"Read {log}.")
        if home.exists():
            shutil.rmtree(home)
        target.rename(home)  # within the cache's file system: no half-filled directory
        (home / ".complete").write_text(APICURIO_VERSION + "\n")
    except subprocess.TimeoutExpired as exc:
        raise LabError("Building the lab's schema registry with Maven took over 15 minutes.",
                       f"Read {log}.") from exc
    finally:
        shutil.rmtree(staging, ignore_errors=True)


class LabRegistries:
    """The registries of one lab, known by their directories under the lab dir."""

    def __init__(self, lab_dir: Path) -> None:
        self.dir = lab_dir

    def process(self, cluster: str) -> ManagedProcess:
        workdir = self.dir / f"registry-{cluster}"
        # The system property on the command line is unique to this lab and cluster.
        return ManagedProcess(f"registry-{cluster}", workdir,
                              signature=f"-Ddrctl.lab.registry={workdir}")

    def up(self, ports: Mapping[str, int], notify: Notify = lambda _: None) -> None:
        """Start (or keep) a registry per cluster in `ports` and wait until each answers;
        with no ports, stop any that run."""
        if not ports:
            self.down()
            return
        for cluster, port in ports.items():
            if not self.process(cluster).is_running() and port_in_use(port):
                raise LabError(f"Port {port} on 127.0.0.1 (for {cluster}'s schema registry) is "
                               "in use by another process.",
                               "Stop that process or choose another --registry-port.")
        notify(f"Resolving Apicurio Registry {APICURIO_VERSION} (the first run builds it "
               "with Maven)")
        jar = resolve_registry(self.dir)
        for cluster, port in ports.items():
            self._start(cluster, port, jar)
        for cluster, port in ports.items():
            notify(f"Waiting for {cluster}'s schema registry on {registry_url(port)}")
            self._wait(cluster, port)

    def _start(self, cluster: str, port: int, jar: Path) -> None:
        proc = self.process(cluster)
        if proc.is_running():
            return
        proc.workdir.mkdir(parents=True, exist_ok=True)
        proc.start([require_java(), *_JVM, f"-Ddrctl.lab.registry={proc.workdir}",
                    "-Dquarkus.http.host=127.0.0.1", f"-Dquarkus.http.port={port}",
                    "-Dquarkus.log.file.enable=true", f"-Dquarkus.log.file.path={proc.log_file}",
                    "-Dquarkus.log.console.enable=false", "-jar", str(jar)])

    def _wait(self, cluster: str, port: int) -> None:
        proc = self.process(cluster)
        wait_until(lambda: _answers(port), deadline_s=120,
                   what=f"{cluster}'s schema registry", log_file=proc.log_file,
                   alive=proc.is_running)

    def empty(self, cluster: str, port: int) -> None:
        """Restart `cluster`'s registry: in memory, it comes back with nothing registered."""
        self.process(cluster).stop()
        self._start(cluster, port, resolve_registry(self.dir))
        self._wait(cluster, port)

    def down(self) -> list[str]:
        stopped = []
        for cluster in CLUSTERS:
            proc = self.process(cluster)
            if proc.is_running():
                proc.stop()
                stopped.append(proc.name)
            proc.pid_file.unlink(missing_ok=True)
        return stopped

    def rows(self, ports: Mapping[str, int]) -> list[dict[str, Any]]:
        """`lab status`'s process rows."""
        return [{"name": (proc := self.process(cluster)).name,
                 "pid": proc.pid() if proc.is_running() else None,
                 "running": proc.is_running(), "port": port, "rss_bytes": proc.rss_bytes(),
                 "log": str(proc.log_file)} for cluster, port in ports.items()]


def _answers(port: int) -> bool:
    with urllib.request.urlopen(registry_url(port) + "/subjects", timeout=5) as resp:
        return bool(resp.status == 200)


def export_registry(port: int) -> bytes:
    """Apicurio's export of everything a registry holds, ids included (a zip)."""
    root = f"http://127.0.0.1:{port}"
    with urllib.request.urlopen(root + "/apis/registry/v2/admin/export", timeout=60) as resp:
        data: bytes = resp.read()
        return data


def import_registry(port: int, export: bytes) -> None:
    """Import an export into a registry: into an empty one the ids are kept (into one that
    has an id already, Apicurio silently drops what would take it)."""
    req = urllib.request.Request(f"http://127.0.0.1:{port}/apis/registry/v2/admin/import",
                                 data=export, method="POST",
                                 headers={"Content-Type": "application/zip"})
    with urllib.request.urlopen(req, timeout=60):
        pass


def copy_registry(ports: Mapping[str, int], source: str, target: str,
                  lab_dir: Path) -> dict[str, Any]:
    """`source`'s registry exported and imported into `target`'s, ids kept: the fix a
    drill applies before it checks parity."""
    missing = [c for c in (source, target) if c not in ports]
    if missing:
        raise LabError(f"The lab in {lab_dir} runs no schema registry for "
                       f"{' and '.join(missing)}.", "Run `drctl lab up --schema-registry` first.")
    export = export_registry(ports[source])
    import_registry(ports[target], export)
    return {"source": source, "target": target, "bytes": len(export)}


# The record every `lab load --schema-registry` value is: the plain workload text, in Avro.
LOAD_SCHEMA = ('{"type": "record", "name": "LoadRecord", "namespace": "drctl.lab", '
               '"fields": [{"name": "text", "type": "string"}]}')


def lab_values(ports: Mapping[str, int], cluster: str,
               lab_dir: Path) -> Callable[[str, bytes], bytes]:
    """`lab load --schema-registry`'s encoder for `cluster`'s records."""
    port = ports.get(cluster)
    if port is None:
        raise LabError(f"The lab in {lab_dir} runs no schema registry for {cluster}.",
                       "Run `drctl lab up --schema-registry` first.")
    return avro_values(registry_url(port))


def avro_values(url: str) -> Callable[[str, bytes], bytes]:
    """An encoder of the workload's values as Avro with Confluent's serializer: registers
    `<topic>-value` on the registry at `url` (once per topic) and writes its id."""
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    serializer = AvroSerializer(SchemaRegistryClient({"url": url}), LOAD_SCHEMA)

    def encode(topic: str, value: bytes) -> bytes:
        data: bytes = serializer({"text": value.decode()},
                                 SerializationContext(topic, MessageField.VALUE))
        return data

    return encode
