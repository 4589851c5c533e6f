"""Strimzi's own CustomResourceDefinitions for the Strimzi lab, made as Strimzi's build makes
them: `io.strimzi:crd-generator` run over the model classes of `io.strimzi:api`, both from
Maven Central, with the arguments of Strimzi's `api/pom.xml`. The files are byte-identical to
the `packaging/install/cluster-operator/04*-Crd-*.yaml` of that Strimzi release, and kept in
drctl's cache by Strimzi version.

`kafka.strimzi.io/v1` comes from Strimzi 1.x (whose classes need Java 21+), `v1beta2` from
Strimzi 0.45 (the last release serving it as its storage version; Java 17).
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import IO

from drctl.errors import LabError
from drctl.lab.jars import find_java, java_major
from drctl.resources import cache_dir, cache_lock


@dataclass(frozen=True)
class CrdRelease:
    api_version: str  # kafka.strimzi.io/<api_version>
    strimzi: str  # the Strimzi release whose generator and model make it
    java: int  # the oldest Java its classes run on


RELEASES = {"v1": CrdRelease("v1", "1.2.0", 21), "v1beta2": CrdRelease("v1beta2", "0.45.0", 17)}
# Model class -> the file name Strimzi's packaging gives it.
KINDS = {
    "KafkaMirrorMaker2": ("io.strimzi.api.kafka.model.mirrormaker2.KafkaMirrorMaker2",
                          "048-Crd-kafkamirrormaker2.yaml"),
    "KafkaConnector": ("io.strimzi.api.kafka.model.connector.KafkaConnector",
                       "047-Crd-kafkaconnector.yaml"),
}


def java_at_least(major: int) -> str:
    """A `java` of at least `major`: $JAVA_HOME's or PATH's, else one under /usr/lib/jvm."""
    candidates = [find_java(), *sorted(str(p) for p in Path("/usr/lib/jvm").glob("*/bin/java"))]
    for java in candidates:
        if java and Path(java).exists() and java_major(java) >= major:
            return java
    raise LabError(f"Strimzi's CRD generator for this API version needs Java {major} or newer; "
                   "none was found.",
                   f"Install a JDK {major}+ (e.g. `apt-get install openjdk-{major}-jdk-headless`)"
                   " or set JAVA_HOME to one.")


def strimzi_crds(api_version: str, *, log_dir: Path | None = None) -> dict[str, Path]:
    """Kind -> CRD file of `kafka.strimzi.io/<api_version>` (KafkaMirrorMaker2,
    KafkaConnector), generated on first use."""
    release = RELEASES.get(api_version)
    if release is None:
        raise LabError(f"'{api_version}' is no Strimzi API version the lab serves.",
                       "Use v1 (Strimzi 1.x) or v1beta2 (Strimzi 0.4x).")
    final = cache_dir() / "strimzi-crds" / release.strimzi
    files = {kind: final / name for kind, (_, name) in KINDS.items()}
    if (final / ".complete").exists():
        return files
    with cache_lock("strimzi-crds"):
        if not (final / ".complete").exists():
            _generate(release, final, log_dir or final.parent)
    return files


def _generate(release: CrdRelease, final: Path, log_dir: Path) -> None:
    mvn = shutil.which("mvn")
    if not mvn:
        raise LabError("Maven (mvn) was not found; the Strimzi lab fetches Strimzi's CRD "
                       "generator with it.", "Install Maven 3.8+ (`apt-get install maven`).")
    java = java_at_least(release.java)
    final.parent.mkdir(parents=True, exist_ok=True)
    log_dir.mkdir(parents=True, exist_ok=True)
    log = log_dir / "strimzi-crds.log"
    staging = Path(tempfile.mkdtemp(prefix=".generate-", dir=final.parent))
    try:
        pom = staging / "pom.xml"
        pom.write_text(resources.files("drctl.lab").joinpath("strimzi-crd-pom.xml").read_text())
        out = staging / "out"
        out.mkdir()
        with log.open("w") as handle:
            _run([mvn, "-B", "-q", "-f", str(pom), "dependency:copy-dependencies",
                  f"-DoutputDirectory={staging / 'lib'}",
                  f"-Dstrimzi.version={release.strimzi}", "-Dmdep.includeScope=runtime"],
                 handle, log, f"Resolving Strimzi {release.strimzi}'s CRD generator")
            # The arguments of Strimzi's api/pom.xml (execution generate-crd-co-install-v1).
            _run([java, "-cp", str(staging / "lib" / "*"), "io.strimzi.crdgenerator.CrdGenerator",
                  "--label", "app:strimzi", "--label", "strimzi.io/crd-install:true",
                  "--target-kube", "1.16+", "--crd-api-version", "v1",
                  "--api-versions", release.api_version,
                  "--storage-version", release.api_version, "--yaml",
                  *(f"{cls}={out / name}" for cls, name in KINDS.values())],
                 handle, log, f"Strimzi {release.strimzi}'s CRD generator")
        if final.exists():
            shutil.rmtree(final)
        out.rename(final)
        (final / ".complete").write_text(f"strimzi {release.strimzi}\n")
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _run(cmd: list[str], handle: IO[str], log: Path, what: str) -> None:
    done = subprocess.run(cmd, stdout=handle, stderr=subprocess.STDOUT, timeout=900,
                          check=False)
    if done.returncode != 0:
        raise LabError(f"{what} failed.", f"Read {log}.")
