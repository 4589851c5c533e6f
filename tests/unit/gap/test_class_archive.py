"""The gap job's class-data-sharing archive (gap/class_archive.py): recorded once, then
mapped; a recording cut short or an archive of another JDK is not kept."""

from __future__ import annotations

from pathlib import Path

import pytest

from drctl.gap.class_archive import ENV_SWITCH, class_archive


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("DRCTL_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv(ENV_SWITCH, raising=False)
    return tmp_path


def test_the_first_job_records_the_archive_and_later_jobs_map_it(_cache: Path) -> None:
    first = class_archive()
    assert first is not None and first.recording is not None
    assert first.java_options()[0] == f"-XX:ArchiveClassesAtExit={first.recording}"
    first.recording.write_bytes(b"\0" * (2 << 20))  # what the JVM writes when it exits
    assert first.keep() and first.path.is_file() and not first.recording.exists()
    later = class_archive()
    assert later is not None and later.recording is None
    assert later.java_options()[0] == f"-XX:SharedArchiveFile={first.path}"
    assert "-Xlog:cds=off" in later.java_options()


def test_a_recording_cut_short_or_a_failed_job_leaves_no_archive(_cache: Path) -> None:
    first = class_archive()
    assert first is not None and first.recording is not None
    first.recording.write_bytes(b"partial")
    assert not first.keep() and not first.path.exists() and not first.recording.exists()
    failed = class_archive()
    assert failed is not None and failed.recording is not None
    failed.recording.write_bytes(b"\0" * (2 << 20))
    failed.discard()  # the job failed: nothing kept
    again = class_archive()
    assert again is not None and again.recording is not None


def test_archives_of_another_jdk_are_removed_and_the_switch_turns_it_off(
        _cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _cache / "spark-class-archive"
    root.mkdir()
    old = root / "0123456789abcdef.jsa"
    old.write_bytes(b"old")
    assert class_archive() is not None
    assert not old.exists()
    monkeypatch.setenv(ENV_SWITCH, "0")
    assert class_archive() is None
