"""The lab's class-data-sharing archives (KafkaDistribution.class_archive, gap/class_archive.py):
one per kind of JVM and set of jars, recorded by the first JVM of its kind that shuts down
normally (`lab down`), mapped by every later one; a JVM killed keeps none."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from drctl.gap.class_archive import recorded_by
from drctl.lab.jars import CLASS_ARCHIVE_SWITCH, KafkaDistribution
from drctl.lab.lab import Lab, LabPorts, LabState
from drctl.lab.processes import ManagedProcess, wait_until


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("DRCTL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv(CLASS_ARCHIVE_SWITCH, raising=False)
    return tmp_path / "cache"


def _dist(tmp_path: Path, version: str) -> KafkaDistribution:
    lib = tmp_path / version
    lib.mkdir()
    for name in ("kafka_2.13", "kafka-clients", "connect-runtime"):
        (lib / f"{name}-{version}.jar").write_bytes(b"jar")
    return KafkaDistribution(version, lib, "maven")


def _java(tmp_path: Path) -> str:
    java = tmp_path / "java"
    java.write_bytes(b"a JDK")
    return str(java)


def test_each_kind_of_jvm_on_each_kafka_records_its_own_archive_then_maps_it(
        tmp_path: Path) -> None:
    java, dist = _java(tmp_path), _dist(tmp_path, "4.3.1")
    broker = dist.class_archive(java, "broker")
    assert broker is not None and broker.recording is not None
    assert broker.java_options()[0] == f"-XX:ArchiveClassesAtExit={broker.recording}"
    # Two brokers of a lab start at once: each records to a file of its own.
    other = dist.class_archive(java, "broker")
    assert other is not None and other.recording not in (None, broker.recording)
    broker.recording.write_bytes(b"\0" * (2 << 20))  # what the JVM writes as it exits
    assert broker.keep()
    other.recording.write_bytes(b"\0" * (2 << 20))
    assert not other.keep() and not other.recording.exists()  # the first one kept stays
    mapped = dist.class_archive(java, "broker")
    assert mapped is not None and mapped.recording is None
    assert mapped.java_options()[0] == f"-XX:SharedArchiveFile={broker.path}"
    # Connect loads other classes, and Kafka 3.9's jars are others: archives of their own.
    connect = dist.class_archive(java, "connect")
    assert connect is not None and connect.recording is not None
    old = _dist(tmp_path, "3.9.2").class_archive(java, "broker")
    assert old is not None and old.recording is not None and old.path != broker.path


def test_a_jar_added_to_the_distribution_records_anew_and_drops_the_old_archive(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    java, dist = _java(tmp_path), _dist(tmp_path, "4.3.1")
    for role in ("broker", "connect"):
        first = dist.class_archive(java, role)
        assert first is not None and first.recording is not None
        first.recording.write_bytes(b"\0" * (2 << 20))
        assert first.keep()
    kept = {role: dist.class_archive(java, role) for role in ("broker", "connect")}
    (dist.lib_dir / "kafka-tools-4.3.1.jar").write_bytes(b"jar")  # jars._top_up
    again = dist.class_archive(java, "broker")
    assert again is not None and again.recording is not None
    old_broker, old_connect = kept["broker"], kept["connect"]
    assert old_broker is not None and not old_broker.path.exists()
    assert old_connect is not None and old_connect.path.exists()  # its own turn drops it
    monkeypatch.setenv(CLASS_ARCHIVE_SWITCH, "0")
    assert dist.class_archive(java, "broker") is None


# A stand-in for a lab JVM started with -XX:ArchiveClassesAtExit: on SIGTERM it writes its
# recording and exits, as the JVM does once its shutdown is done.
_JVM = textwrap.dedent("""
    import pathlib, signal, sys, time
    recording = next(a.split("=", 1)[1] for a in sys.argv
                     if a.startswith("-XX:ArchiveClassesAtExit="))
    def shut_down(*_):
        pathlib.Path(recording).write_bytes(b"\\0" * (2 << 20))
        sys.exit(0)
    signal.signal(signal.SIGTERM, shut_down)
    print("up", flush=True)
    while True:
        time.sleep(0.05)
""")


def _start(lab: Lab, component: str, java: str, dist: KafkaDistribution) -> None:
    archive = dist.class_archive(java, "connect" if component == "connect" else "broker")
    assert archive is not None
    proc = lab.process(component)
    proc.start([sys.executable, "-c", _JVM, *archive.java_options(), str(lab.dir / component)])
    wait_until(lambda: "up" in proc.console_file.read_text(), deadline_s=30, what=component,
               log_file=None)


def test_lab_down_keeps_what_a_jvm_recorded_and_a_killed_one_records_nothing(
        tmp_path: Path) -> None:
    java, dist = _java(tmp_path), _dist(tmp_path, "4.3.1")
    lab = Lab(tmp_path / "lab")
    lab.save_state(LabState(LabPorts(), dist.version, str(dist.lib_dir), "maven", True))
    _start(lab, "connect", java, dist)
    _start(lab, "primary", java, dist)
    lab.fail("primary")  # SIGKILL: nothing is written
    assert sorted(lab.down()) == ["connect"]
    connect = dist.class_archive(java, "connect")
    assert connect is not None and connect.recording is None and connect.path.is_file()
    broker = dist.class_archive(java, "broker")
    assert broker is not None and broker.recording is not None  # still to be recorded
    assert not list(broker.path.parent.glob("*.recording"))


def test_stop_says_whether_the_process_ended_on_sigterm(tmp_path: Path) -> None:
    stubborn = ManagedProcess("stubborn", tmp_path / "stubborn", signature=str(tmp_path))
    stubborn.start([sys.executable, "-c",
                    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                    "print('deaf', flush=True); time.sleep(60)", str(tmp_path)])
    wait_until(lambda: "deaf" in stubborn.console_file.read_text(), deadline_s=30,
               what="the stubborn process", log_file=None)
    cmd = stubborn.command()
    assert cmd[0] == sys.executable and cmd[-1] == str(tmp_path)
    assert stubborn.stop(grace_s=0.5) is False  # killed: a recording may be half written
    assert not stubborn.is_running() and stubborn.command() == []
    polite = ManagedProcess("polite", tmp_path / "polite", signature=str(tmp_path))
    polite.start([sys.executable, "-c", "import time; time.sleep(60)", str(tmp_path)])
    assert polite.stop() is True
    assert recorded_by(["java", "-Xmx1g"]) is None


def test_a_discarded_lab_kills_its_jvms_save_the_one_recording_an_archive(
        tmp_path: Path) -> None:
    """A test session's lab (its files go next) is killed, not shut down; a JVM recording a
    class archive still exits normally, or the archive is lost."""
    java, dist = _java(tmp_path), _dist(tmp_path, "4.3.1")
    lab = Lab(tmp_path / "lab")
    lab.save_state(LabState(LabPorts(), dist.version, str(dist.lib_dir), "maven", True))
    _start(lab, "connect", java, dist)  # records its archive as it exits
    # A broker mapping the archive and the lab's own Spark Connect server, each of which
    # would say it shut down on SIGTERM.
    primary, server = lab.process("primary"), lab.spark_server(LabPorts()).process()
    for proc in (primary, server):
        proc.start([sys.executable, "-c",
                    "import pathlib, signal, sys, time\n"
                    "def bye(*_):\n"
                    f"    pathlib.Path({str(tmp_path / proc.name)!r}).write_text('done')\n"
                    "    sys.exit(0)\n"
                    "signal.signal(signal.SIGTERM, bye)\n"
                    "print('up', flush=True)\n"
                    "while True: time.sleep(0.05)", proc.signature])
        wait_until(lambda p=proc: "up" in p.console_file.read_text(), deadline_s=30,
                   what=proc.name, log_file=None)
    assert sorted(lab.down(discard=True)) == ["connect", "primary", "spark-connect"]
    for proc in (primary, server):  # killed: no shutdown ran
        assert not proc.is_running() and not (tmp_path / proc.name).exists(), proc.name
    connect = dist.class_archive(java, "connect")
    assert connect is not None and connect.recording is None and connect.path.is_file()
