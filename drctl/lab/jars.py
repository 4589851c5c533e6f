"""Where the lab's Kafka jars come from: an existing install (`KAFKA_HOME`) or Maven Central
through the pom shipped in this package, cached under the user cache dir."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from drctl.errors import LabError
from drctl.kafka_release import kafka_release
from drctl.resources import cache_dir, cache_lock

# 4.4.0 is on Maven Central for kafka_2.13 and kafka-clients only (connect-runtime, connect-mirror
# and kafka-tools are missing), so the newest complete 4.x release is the default.
DEFAULT_KAFKA_VERSION = "4.3.1"
KAFKA_JAR = re.compile(r"^kafka_2\.13-(\d+\.\d+\.\d+)\.jar$")



@dataclass(frozen=True)
class KafkaDistribution:
    version: str
    lib_dir: Path
    source: str  # "maven" or "KAFKA_HOME"

    @property
    def major(self) -> int:
        release = kafka_release(self.version)
        if release is None:
            raise LabError(f"Kafka {self.version} is no Apache Kafka release drctl can read.",
                           "Use an Apache Kafka release (e.g. 4.3.1, 3.9.x).")
        return release.major

    @property
    def classpath(self) -> str:
        return str(self.lib_dir / "*")


def _version_in(lib_dir: Path) -> str | None:
    for jar in lib_dir.glob("kafka_2.13-*.jar"):
        m = KAFKA_JAR.match(jar.name)
        if m:
            return m.group(1)
    return None


def _maven_version_spec(requested: str) -> str:
    """'3.9.x' or '3.9' -> a Maven range for the newest patch; an exact version stays as is."""
    m = re.fullmatch(r"(\d+)\.(\d+)(?:\.x)?", requested)
    if m:
        major, minor = int(m.group(1)), int(m.group(2))
        return f"[{major}.{minor}.0,{major}.{minor + 1}.0)"
    if not re.fullmatch(r"\d+\.\d+\.\d+", requested):
        raise LabError(f"'{requested}' is not a Kafka version.",
                       "Use e.g. 4.3.1, 3.9.x or 3.9.1.")
    return requested


def find_java() -> str | None:
    """The `java` of $JAVA_HOME, else the one on PATH; None when there is none."""
    java_home = os.environ.get("JAVA_HOME")
    java = str(Path(java_home) / "bin" / "java") if java_home else shutil.which("java")
    return java if java and Path(java).exists() else None


def require_java() -> str:
    java = find_java()
    if java is None:
        raise LabError("Java was not found (the lab needs Java 17 or newer).",
                       "Install a JDK 17 (e.g. `apt-get install openjdk-17-jdk-headless`) "
                       "or set JAVA_HOME.")
    return java


def java_version(java: str, timeout_s: float = 30) -> str | None:
    """What `java -version` says, e.g. "17.0.15" (None if it does not say)."""
    out = subprocess.run([java, "-version"], capture_output=True, text=True,
                         timeout=timeout_s, check=False)
    m = re.search(r'version "([^"]+)"', out.stderr + out.stdout)
    return m.group(1) if m else None


def java_major(java: str) -> int:
    m = re.match(r"(\d+)(?:\.(\d+))?", java_version(java) or "")
    if not m:
        return 0
    major = int(m.group(1))
    return int(m.group(2) or 0) if major == 1 else major  # "1.8.0_402" is Java 8


def resolve_kafka(requested: str | None = None, *,
                  log_dir: Path | None = None) -> KafkaDistribution:
    """Find or download the jars; never returns a half-filled directory."""
    kafka_home = os.environ.get("KAFKA_HOME")
    if kafka_home and requested is None:
        lib = Path(kafka_home) / "libs"
        version = _version_in(lib)
        if version is None:
            raise LabError(f"KAFKA_HOME={kafka_home} has no libs/kafka_2.13-*.jar.",
                           "Point KAFKA_HOME at an unpacked Apache Kafka release, or unset it.")
        return KafkaDistribution(version, lib, "KAFKA_HOME")

    requested = requested or DEFAULT_KAFKA_VERSION
    with cache_lock("kafka"):
        return _resolve_cached(requested, log_dir)


def _resolve_cached(requested: str, log_dir: Path | None) -> KafkaDistribution:
    spec = _maven_version_spec(requested)
    root = cache_dir() / "kafka"
    cached: Path | None = None
    if spec == requested:
        if (root / requested / ".complete").exists():
            cached = root / requested
    else:
        prefix = requested.removesuffix(".x")
        candidates = sorted(
            (p for p in root.glob(f"{prefix}.*") if (p / ".complete").exists()),
            key=lambda p: [int(x) for x in p.name.split(".")],
        ) if root.exists() else []
        if candidates:
            cached = candidates[-1]
    if cached is None:
        return _download(spec, root, log_dir)
    if _missing_artifacts(cached):
        _top_up(cached, log_dir or root)
    return KafkaDistribution(cached.name, cached, "maven")


def _pom_text() -> str:
    return resources.files("drctl.lab").joinpath("kafka-pom.xml").read_text()


def _missing_artifacts(lib_dir: Path) -> list[str]:
    """The pom's Kafka artifacts with no jar in `lib_dir` (a cache filled by an older pom)."""
    wanted = re.findall(r"<artifactId>([^<]+)</artifactId><version>\$\{kafka\.version\}",
                        _pom_text())
    jars = [p.name for p in lib_dir.glob("*.jar")]
    return [a for a in wanted if not any(re.match(rf"{re.escape(a)}-\d", j) for j in jars)]


def _top_up(lib_dir: Path, log_dir: Path) -> None:
    """Add what the pom gained since `lib_dir` was filled, never replacing a jar: running
    labs of other processes have them on their classpath."""
    # The spec it was filled from: a 3.9.x range resolves each artifact's newest 3.9 release.
    spec = (lib_dir / ".complete").read_text().strip() or lib_dir.name
    staged = _download(spec, lib_dir.parent, log_dir, install=False)
    try:
        for jar in staged.lib_dir.glob("*.jar"):
            if not (lib_dir / jar.name).exists():
                # Rename within the cache's file system: a reader sees no half-copied jar.
                partial = lib_dir / f".{jar.name}.partial"
                shutil.copyfile(jar, partial)
                partial.rename(lib_dir / jar.name)
    finally:
        shutil.rmtree(staged.lib_dir.parent, ignore_errors=True)
    missing = _missing_artifacts(lib_dir)
    if missing:
        raise LabError(f"Maven did not resolve {', '.join(missing)} for Kafka {spec}.",
                       f"Read {log_dir / 'maven.log'}.")


def _download(spec: str, root: Path, log_dir: Path | None, *,
              install: bool = True) -> KafkaDistribution:
    """Resolve the pom's jars for `spec` into `root/<version>`; with `install` False, leave
    them in a staging dir under `root` (the caller removes its parent)."""
    mvn = shutil.which("mvn")
    if not mvn:
        raise LabError("Maven (mvn) was not found; the lab downloads Kafka's jars with it.",
                       "Install Maven 3.8+ (e.g. `apt-get install maven`), or set KAFKA_HOME "
                       "to an unpacked Kafka release.")
    root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".download-", dir=root))
    pom = staging / "pom.xml"
    pom.write_text(_pom_text())
    log = (log_dir or root) / "maven.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    major = int(re.sub(r"^\[", "", spec).split(".")[0])
    cmd = [mvn, "-B", "-q", "-f", str(pom), "dependency:copy-dependencies",
           f"-DoutputDirectory={staging / 'lib'}", f"-Dkafka.version={spec}",
           "-Dmdep.includeScope=runtime"]
    if major < 4:
        cmd.append("-Dkafka.reload4j=true")
    with log.open("w") as out:
        try:
            result = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, timeout=900)
        except subprocess.TimeoutExpired as exc:
            shutil.rmtree(staging, ignore_errors=True)
            raise LabError(f"Downloading Kafka {spec} with Maven took over 15 minutes.",
                           f"Read {log}.") from exc
    version = _version_in(staging / "lib") if result.returncode == 0 else None
    if version is None:
        shutil.rmtree(staging, ignore_errors=True)
        raise LabError(f"Maven could not resolve Kafka {spec} from Maven Central.",
                       f"Read {log}; check the version exists (e.g. 4.3.1, 3.9.x).")
    if not install:
        return KafkaDistribution(version, staging / "lib", "maven")
    final = root / version
    if final.exists():
        shutil.rmtree(final)
    (staging / "lib").rename(final)
    shutil.rmtree(staging, ignore_errors=True)
    (final / ".complete").write_text(spec + "\n")
    return KafkaDistribution(version, final, "maven")
