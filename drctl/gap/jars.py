"""Spark's Kafka connector for the installed PySpark: config-supplied jars or packages, else
the jars drctl kept from an earlier run, else Spark's own package resolution (no Maven on the
failback host).

Spark resolves the connector and its dependencies from Maven Central (or the first of the
config's `spark.jars.repositories`) into an Ivy directory of drctl's cache; after a job that
succeeded, drctl keeps the resolved jars, so later runs start without resolving and work
offline. The exact PySpark version is tried first; when the repository lacks it (a release not
yet published), the newest release of the same major version below it is used, and the caller
is told which.
"""

from __future__ import annotations

import json
import re
import shutil
import urllib.error
import urllib.request
import xml.etree.ElementTree as ET
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from drctl.config import SparkSettings
from drctl.errors import DrctlError
from drctl.progress import Notify
from drctl.resources import cache_dir, cache_lock

GROUP = "org.apache.spark"
CONNECTOR = "spark-sql-kafka-0-10_2.13"
MAVEN_CENTRAL = "https://repo1.maven.org/maven2"
_JAR = re.compile(r"^(?P<artifact>.+?)-(?P<version>\d+\.\d+[\w.\-]*)\.jar$")
# Ivy names what it retrieves <group>_<artifact>-<version>.jar.
_IVY_JAR = re.compile(r"^(?P<group>[^_]+)_(?P<name>.+\.jar)$")


class SparkConnectorMissing(DrctlError):
    """Spark's Kafka connector is not available; the hint says what to run."""


@dataclass(frozen=True)
class Connector:
    """What to put on Spark's classpath for `format("kafka")`."""

    jars: tuple[str, ...] = ()
    packages: tuple[str, ...] = ()
    source: str = "config"  # config | cache | spark-packages | server (Spark Connect's own)
    versions: tuple[tuple[str, str], ...] = ()  # (artifact, version) resolved
    ivy: str | None = None  # Spark's spark.jars.ivy, when Spark resolves the packages

    def describe(self) -> str:
        if self.source == "server":
            return "the Spark Connect server's classpath"
        if self.versions:
            return ", ".join(f"{a} {v}" for a, v in self.versions) + f" ({self.source})"
        return f"{len(self.jars)} jar(s), {len(self.packages)} package(s) from the config"

    def spark_conf(self) -> dict[str, str]:
        return {"spark.jars.ivy": self.ivy} if self.ivy else {}


def pyspark_version() -> str:
    import pyspark

    return str(pyspark.__version__)


def pyspark_jars_dir() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent / "jars"


def connector_root() -> Path:
    return cache_dir() / "spark-kafka"


def resolve_connector(settings: SparkSettings, *, download: bool = True,
                      notify: Notify = lambda _: None) -> Connector:
    """The connector from the config when it names one, else the cache, else Spark's package
    resolution (`download=False` refuses the last)."""
    if settings.jars or settings.packages:
        missing = [j for j in settings.jars if not Path(j).exists()]
        if missing:
            raise SparkConnectorMissing(f"spark.jars lists files that do not exist: "
                                   f"{', '.join(missing)}.",
                                   "Fix the paths in the config, or remove spark.jars to let "
                                   "Spark fetch the connector from Maven Central.")
        return Connector(settings.jars, settings.packages, "config")
    version = pyspark_version()
    cached = _cached(version)
    if cached is not None:
        return cached
    if not download:
        raise _missing(version, "it is not in drctl's cache")
    repository = _repositories(settings.conf)[0]
    published = _published_versions(repository, version)
    chosen = next((v for v in _candidates(version) if v in published), None)
    if chosen is None:
        raise _missing(version, f"{repository} has no {CONNECTOR} release for it "
                                f"(tried {', '.join(_candidates(version))})")
    if chosen != version:
        notify(f"PySpark {version}'s own connector is not in {repository}; using "
               f"{CONNECTOR} {chosen}")
    notify(f"Spark resolves {CONNECTOR} {chosen} from {repository} (once; drctl keeps the jars)")
    return Connector((), (f"{GROUP}:{CONNECTOR}:{chosen}",), "spark-packages",
                     ((CONNECTOR, chosen),), str(_ivy_dir(version)))


@contextmanager
def first_resolution(connector: Connector) -> Iterator[Connector]:
    """Run a job with `connector`; when Spark is to resolve it, one process at a time — and
    the connector another process kept meanwhile is used instead of resolving it again."""
    if connector.source != "spark-packages":
        yield connector
        return
    with cache_lock("spark-kafka"):
        yield _cached(pyspark_version()) or connector


def keep_resolved(connector: Connector) -> None:
    """After a job that ran with `connector`: keep the jars Spark resolved, so the next run
    starts without resolving (and without the network)."""
    if connector.source != "spark-packages" or connector.ivy is None:
        return
    version = pyspark_version()
    resolved = Path(connector.ivy) / "jars"
    final = connector_root() / version
    shutil.rmtree(final, ignore_errors=True)
    final.mkdir(parents=True)
    # PySpark ships Scala, Hadoop, compression codecs and SLF4J; the classpath keeps its own.
    provided = {m.group("artifact") for p in pyspark_jars_dir().glob("*.jar")
                if (m := _JAR.match(p.name))}
    for jar in sorted(resolved.glob("*.jar")):
        named = _IVY_JAR.match(jar.name)
        plain = named.group("name") if named else jar.name
        m = _JAR.match(plain)
        if m is None or m.group("artifact") not in provided:
            shutil.copy2(jar, final / plain)
    (final / ".complete").write_text(json.dumps(dict(connector.versions)))


def _ivy_dir(version: str) -> Path:
    """One Ivy directory per PySpark version: its jars/ then holds exactly one resolution."""
    return connector_root() / f"ivy-{version}"


def _repositories(conf: Mapping[str, str]) -> list[str]:
    given = [r.strip().rstrip("/") for r in conf.get("spark.jars.repositories", "").split(",")
             if r.strip()]
    return given or [MAVEN_CENTRAL]


def _published_versions(repository: str, version: str) -> set[str]:
    url = f"{repository}/{GROUP.replace('.', '/')}/{CONNECTOR}/maven-metadata.xml"
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            root = ET.fromstring(response.read())
    except (urllib.error.URLError, OSError, ET.ParseError) as exc:
        raise _missing(version, f"{url} could not be read ({exc})") from exc
    return {v.text for v in root.iter("version") if v.text}


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
        f"On a host that reaches Maven Central, run the gap analysis once (Spark resolves the "
        f"connector and drctl keeps it in {connector_root() / version}); or list local jars "
        f"(spark-sql-kafka-0-10_2.13, spark-token-provider-kafka-0-10_2.13, kafka-clients, "
        f"commons-pool2) in the config's spark.jars; or set spark.packages and "
        f"spark.conf.spark.jars.repositories to a repository you can reach.")
