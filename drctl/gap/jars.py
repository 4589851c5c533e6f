"""Spark's Kafka connector for the installed PySpark: config-supplied jars or packages, or jars
fetched once from Maven Central (through the pom shipped here) into drctl's cache.

The exact PySpark version is tried first. When Maven cannot resolve it (a release not yet
published, or a repository that lacks it), the newest release of the same major version below
it is used instead, per artifact, and the caller is told which versions it got.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from drctl.config import SparkSettings
from drctl.errors import DrctlError
from drctl.progress import Notify
from drctl.resources import cache_dir

CONNECTOR = "spark-sql-kafka-0-10_2.13"
TOKEN_PROVIDER = "spark-token-provider-kafka-0-10_2.13"
_JAR = re.compile(r"^(?P<artifact>.+?)-(?P<version>\d+\.\d+[\w.\-]*)\.jar$")



class SparkConnectorMissing(DrctlError):
    """Spark's Kafka connector is not available; the hint says what to run."""


@dataclass(frozen=True)
class Connector:
    """What to put on Spark's classpath for `format("kafka")`."""

    jars: tuple[str, ...] = ()
    packages: tuple[str, ...] = ()
    source: str = "config"  # config | cache | maven
    versions: tuple[tuple[str, str], ...] = ()  # (artifact, version) fetched into the cache

    def describe(self) -> str:
        if self.versions:
            return ", ".join(f"{a} {v}" for a, v in self.versions) + f" ({self.source})"
        return f"{len(self.jars)} jar(s), {len(self.packages)} package(s) from the config"


def pyspark_version() -> str:
    import pyspark

    return str(pyspark.__version__)


def pyspark_jars_dir() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent / "jars"


def connector_root() -> Path:
    return cache_dir() / "spark-kafka"


def pom_path() -> Path:
    return Path(str(resources.files("drctl.gap").joinpath("spark-kafka-pom.xml")))


def fetch_command(version: str, artifact: str = CONNECTOR, out: Path | None = None) -> str:
    """The Maven command line an operator can run by hand."""
    out = out or connector_root() / version
    return (f"mvn -B -f {pom_path()} dependency:copy-dependencies -Dmdep.includeScope=runtime "
            f"-Dconnector.artifact={artifact} -Dconnector.version={version} "
            f"-DoutputDirectory={out}")


def resolve_connector(settings: SparkSettings, *, download: bool = True,
                      notify: Notify = lambda _: None) -> Connector:
    """The connector from the config when it names one, else the cache, else Maven Central."""
    if settings.jars or settings.packages:
        missing = [j for j in settings.jars if not Path(j).exists()]
        if missing:
            raise SparkConnectorMissing(f"spark.jars lists files that do not exist: "
                                   f"{', '.join(missing)}.",
                                   "Fix the paths in the config, or remove spark.jars to let "
                                   "drctl fetch the connector from Maven Central.")
        return Connector(settings.jars, settings.packages, "config")
    version = pyspark_version()
    cached = _cached(version)
    if cached is not None:
        return cached
    if not download:
        raise _missing(version, "it is not in drctl's cache")
    return _download(version, notify)


def _cached(version: str) -> Connector | None:
    root = connector_root() / version
    marker = root / ".complete"
    if not marker.exists():
        return None
    versions = tuple((a, v) for a, v in json.loads(marker.read_text()).items())
    jars = tuple(sorted(str(p) for p in root.glob("*.jar")))
    return Connector(jars, (), "cache", versions)


def _missing(version: str, why: str) -> SparkConnectorMissing:
    return SparkConnectorMissing(
        f"Spark's Kafka connector for PySpark {version} is missing: {why}.",
        f"Install Maven and run `{fetch_command(version)}` (then the same with "
        f"-Dconnector.artifact={TOKEN_PROVIDER}), or list the jars in the config's "
        f"spark.jars, or set spark.packages to "
        f"['org.apache.spark:{CONNECTOR}:{version}'] to let Spark resolve them.")


def _candidates(version: str) -> Iterator[str]:
    """The exact version, then the .0 release of the same minor and of each older minor of the
    same major. Plain versions only: Maven sorts unknown qualifiers such as -preview1 above
    the release, so a version range would pick previews."""
    yield version
    m = re.match(r"^(\d+)\.(\d+)\.(\d+)$", version)
    if not m:
        return
    major, minor, patch = (int(x) for x in m.groups())
    if patch:
        yield f"{major}.{minor}.0"
    for lower in range(minor - 1, -1, -1):
        yield f"{major}.{lower}.0"


def _mvn_copy(mvn: str, artifact: str, spec: str, out: Path, log: Path) -> str | None:
    cmd = [mvn, "-B", "-q", "-f", str(pom_path()), "dependency:copy-dependencies",
           "-Dmdep.includeScope=runtime", f"-Dconnector.artifact={artifact}",
           f"-Dconnector.version={spec}", f"-DoutputDirectory={out}"]
    with log.open("a") as fh:
        fh.write(f"\n$ {' '.join(cmd)}\n")
        fh.flush()
        try:
            done = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT, timeout=600)
        except subprocess.TimeoutExpired:
            return None
    if done.returncode != 0:
        return None
    for jar in out.glob(f"{artifact}-*.jar"):
        m = _JAR.match(jar.name)
        if m and m.group("artifact") == artifact:
            return m.group("version")
    return None


def _resolve_artifact(mvn: str, artifact: str, below: str, staging: Path, log: Path
                      ) -> str | None:
    for spec in _candidates(below):
        out = staging / artifact
        shutil.rmtree(out, ignore_errors=True)
        got = _mvn_copy(mvn, artifact, spec, out, log)
        if got is not None:
            return got
    return None


def _download(version: str, notify: Notify) -> Connector:
    mvn = shutil.which("mvn")
    if not mvn:
        raise _missing(version, "Maven (mvn) was not found to fetch it")
    root = connector_root()
    root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".download-", dir=root))
    log = root / f"maven-{version}.log"
    log.write_text("")
    notify(f"Fetching Spark's Kafka connector for PySpark {version} from Maven Central "
           "(once)")
    try:
        got_connector = _resolve_artifact(mvn, CONNECTOR, version, staging, log)
        if got_connector is None:
            raise _missing(version, f"Maven could not resolve {CONNECTOR} (read {log})")
        got_token = _resolve_artifact(mvn, TOKEN_PROVIDER, got_connector, staging, log)
        if got_token is None:
            raise _missing(version, f"Maven could not resolve {TOKEN_PROVIDER} (read {log})")
        final = root / version
        shutil.rmtree(final, ignore_errors=True)
        final.mkdir()
        # PySpark ships Scala, Hadoop, compression codecs and SLF4J; a second copy in another
        # version would shadow or clash with them.
        provided = {m.group("artifact") for p in pyspark_jars_dir().glob("*.jar")
                    if (m := _JAR.match(p.name))}
        # The connector's own dependency versions win over the token provider's.
        for artifact in (CONNECTOR, TOKEN_PROVIDER):
            for jar in sorted((staging / artifact).glob("*.jar")):
                m = _JAR.match(jar.name)
                if m and m.group("artifact") not in provided:
                    provided.add(m.group("artifact"))
                    shutil.copy2(jar, final / jar.name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    versions = {CONNECTOR: got_connector, TOKEN_PROVIDER: got_token}
    (final / ".complete").write_text(json.dumps(versions))
    if got_connector != version or got_token != version:
        notify(f"PySpark {version}'s own connector is not on Maven Central; using "
               f"{CONNECTOR} {got_connector} and {TOKEN_PROVIDER} {got_token}")
    cached = _cached(version)
    assert cached is not None
    return Connector(cached.jars, (), "maven", cached.versions)
