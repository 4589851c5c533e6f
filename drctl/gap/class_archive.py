"""A class-data-sharing archive for the gap job's driver JVM (JDK 13+ dynamic CDS).

Before a Spark job reads its first record the driver JVM loads and verifies some twenty
thousand classes from PySpark's jars: seconds of a small job's time (a tail-scope comparison
is mostly this). The first job on a machine records those classes when its JVM exits
(`-XX:ArchiveClassesAtExit`; that run is slower); later jobs map the archive
(`-XX:SharedArchiveFile`) and start several seconds sooner. The archive is keyed by the JDK
and PySpark's jars (and where they are); a JVM that finds it does not fit ignores it
silently, so the worst case is the start time without it. DRCTL_SPARK_CLASS_ARCHIVE=0 turns
it off.

The lab's Kafka JVMs keep archives the same way (`archive_in`, drctl/lab/jars.py): a family of
archives per folder, one kept per family.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from drctl.resources import cache_dir

ENV_SWITCH = "DRCTL_SPARK_CLASS_ARCHIVE"
# The other half of a short JVM start: compile with C1 only. A JVM whose work is small (a small
# gap job, a server of many small jobs, the lab's daemons) is mostly warming up, which C1
# shortens by seconds; C2's faster code pays only on large work.
QUICK_JIT = "-XX:TieredStopAtLevel=1"
_SUFFIX = ".jsa"
_RECORDING = ".recording"
_QUIET = ["-Xlog:cds=off", "-Xlog:cds+dynamic=off"]  # a stale archive is not news
_MIN_BYTES = 1 << 20  # smaller: a recording cut short
_RECORD_OPTION = "-XX:ArchiveClassesAtExit="


@dataclass(frozen=True)
class ClassArchive:
    path: Path  # the archive later jobs map
    recording: Path | None = None  # where this job's JVM records it (None: it maps `path`)

    def java_options(self) -> list[str]:
        if self.recording is None:
            return [f"-XX:SharedArchiveFile={self.path}", *_QUIET]
        return [f"-XX:ArchiveClassesAtExit={self.recording}", *_QUIET]

    def keep(self) -> bool:
        """After a job that succeeded and whose JVM has exited: the recording becomes the
        archive. True when one was kept."""
        if self.recording is None or not self.recording.is_file():
            return False
        if self.recording.stat().st_size < _MIN_BYTES or self.path.is_file():
            # Cut short; or another JVM's recording was kept first (JVMs that map it now
            # keep mapping it: it is not replaced under them).
            self.discard()
            return False
        os.replace(self.recording, self.path)
        return True

    def discard(self) -> None:
        if self.recording is not None:
            self.recording.unlink(missing_ok=True)


def class_archive() -> ClassArchive | None:
    """The archive for this machine's JDK and PySpark, or the place to record it; None when
    turned off or no JDK is found."""
    if switched_off(ENV_SWITCH):
        return None
    key = _key()
    if key is None:
        return None
    return archive_in(cache_dir() / "spark-class-archive", key)


def switched_off(variable: str) -> bool:
    return os.environ.get(variable, "1").strip().lower() in ("0", "false", "no", "off")


def archive_in(root: Path, key: str, family: str = "") -> ClassArchive:
    """The archive `key` in `root`, or the place to record it. Archives in `root` whose key
    starts with `family` but is another are of no use any more (another JDK, other jars)."""
    path = root / f"{key}{_SUFFIX}"
    if path.is_file():
        return ClassArchive(path)
    root.mkdir(parents=True, exist_ok=True)
    _forget_others(root, keep=path, family=family)
    # Unique: JVMs started at once (a lab's two brokers) each record their own.
    return ClassArchive(path, root / f"{key}.{os.getpid()}-{uuid.uuid4().hex[:8]}{_RECORDING}")


def recorded_by(cmd: Sequence[str]) -> ClassArchive | None:
    """The archive a JVM started with `cmd` records when it exits (None: it records none), to
    `keep` once it exited normally."""
    for arg in cmd:
        if arg.startswith(_RECORD_OPTION):
            recording = Path(arg.removeprefix(_RECORD_OPTION))
            key = recording.name.split(".", 1)[0]
            return ClassArchive(recording.with_name(f"{key}{_SUFFIX}"), recording)
    return None


def java_key(java: str | Path) -> str:
    """What identifies a JDK for an archive: the JVM checks the archive against its own build
    and ignores one of another."""
    found = Path(java).resolve()
    stat = found.stat()
    return f"{found}\0{stat.st_size}\0{stat.st_mtime_ns}"


def _java() -> Path | None:
    """The java PySpark starts: $JAVA_HOME/bin/java, else the one on PATH."""
    home = os.environ.get("JAVA_HOME")
    found = Path(home) / "bin" / "java" if home else None
    if found is None or not found.is_file():
        which = shutil.which("java")
        found = Path(which) if which else None
    return found.resolve() if found is not None else None


def _key() -> str | None:
    import pyspark

    java = _java()
    if java is None:
        return None
    jars = Path(pyspark.__file__).resolve().parent / "jars"
    digest = hashlib.sha256()
    # The JVM checks the archive against the classpath it was recorded with: another
    # installation of the same PySpark (another virtualenv) needs its own.
    digest.update(f"{java_key(java)}\0{pyspark.__version__}\0{jars}".encode())
    for jar in sorted(jars.glob("*.jar")):
        digest.update(f"\0{jar.name}\0{jar.stat().st_size}".encode())
    return digest.hexdigest()[:16]


def _forget_others(root: Path, keep: Path, family: str = "") -> None:
    """Archives of the family for another JDK or other jars are of no use (Spark's: about
    200 MB each); recordings a day old were cut short."""
    day_ago = time.time() - 86_400
    for entry in root.iterdir():
        stale = entry.suffix == _SUFFIX and entry != keep and entry.name.startswith(family)
        abandoned = entry.name.endswith(_RECORDING) and entry.stat().st_mtime < day_ago
        if stale or abandoned:
            entry.unlink(missing_ok=True)
