"""A class-data-sharing archive for the gap job's driver JVM (JDK 13+ dynamic CDS).

Before a Spark job reads its first record the driver JVM loads and verifies some twenty
thousand classes from PySpark's jars: seconds of a small job's time (a tail-scope comparison
is mostly this). The first job on a machine records those classes when its JVM exits
(`-XX:ArchiveClassesAtExit`; that run is slower); later jobs map the archive
(`-XX:SharedArchiveFile`) and start several seconds sooner. The archive is keyed by the JDK
and PySpark's jars (and where they are); a JVM that finds it does not fit ignores it
silently, so the worst case is the start time without it. DRCTL_SPARK_CLASS_ARCHIVE=0 turns
it off.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from drctl.resources import cache_dir

ENV_SWITCH = "DRCTL_SPARK_CLASS_ARCHIVE"
_SUFFIX = ".jsa"
_RECORDING = ".recording"
_QUIET = ["-Xlog:cds=off", "-Xlog:cds+dynamic=off"]  # a stale archive is not news
_MIN_BYTES = 1 << 20  # smaller: a recording cut short


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
        if self.recording.stat().st_size < _MIN_BYTES:
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
    if os.environ.get(ENV_SWITCH, "1").strip().lower() in ("0", "false", "no", "off"):
        return None
    key = _key()
    if key is None:
        return None
    root = cache_dir() / "spark-class-archive"
    path = root / f"{key}{_SUFFIX}"
    if path.is_file():
        return ClassArchive(path)
    root.mkdir(parents=True, exist_ok=True)
    _forget_others(root, keep=path)
    return ClassArchive(path, root / f"{key}.{os.getpid()}{_RECORDING}")


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
    stat = java.stat()
    # The JVM checks the archive against the classpath it was recorded with: another
    # installation of the same PySpark (another virtualenv) needs its own.
    digest.update(f"{java}\0{stat.st_size}\0{stat.st_mtime_ns}\0{pyspark.__version__}\0"
                  f"{jars}".encode())
    for jar in sorted(jars.glob("*.jar")):
        digest.update(f"\0{jar.name}\0{jar.stat().st_size}".encode())
    return digest.hexdigest()[:16]


def _forget_others(root: Path, keep: Path) -> None:
    """Archives of another JDK or PySpark are of no use (about 200 MB each); recordings a day
    old were cut short."""
    day_ago = time.time() - 86_400
    for entry in root.iterdir():
        stale = entry.suffix == _SUFFIX and entry != keep
        abandoned = entry.name.endswith(_RECORDING) and entry.stat().st_mtime < day_ago
        if stale or abandoned:
            entry.unlink(missing_ok=True)
