"""The lab's Kafka jar cache: a cache filled by an older pom is recognised as lacking what the
pom gained since (the secure lab's basic-auth extension), by artifact, whatever the version."""

from __future__ import annotations

from pathlib import Path

from drctl.lab.jars import _missing_artifacts

ALL = ("kafka_2.13", "connect-runtime", "connect-mirror", "connect-mirror-client",
       "connect-basic-auth-extension", "kafka-tools")


def _lib(tmp_path: Path, artifacts: tuple[str, ...], version: str = "3.9.2") -> Path:
    for artifact in artifacts:
        (tmp_path / f"{artifact}-{version}.jar").write_bytes(b"")
    return tmp_path


def test_a_complete_cache_lacks_nothing(tmp_path: Path) -> None:
    assert _missing_artifacts(_lib(tmp_path, ALL)) == []


def test_an_older_cache_lacks_the_basic_auth_extension(tmp_path: Path) -> None:
    lib = _lib(tmp_path, tuple(a for a in ALL if a != "connect-basic-auth-extension"))
    assert _missing_artifacts(lib) == ["connect-basic-auth-extension"]


def test_a_prefix_of_another_artifact_is_not_mistaken_for_it(tmp_path: Path) -> None:
    # connect-mirror-client-*.jar is not connect-mirror; a 3.9.x range may pick 3.9.1 for one.
    lib = _lib(tmp_path, tuple(a for a in ALL if a != "connect-mirror"))
    (tmp_path / "connect-mirror-client-3.9.1.jar").write_bytes(b"")
    assert _missing_artifacts(lib) == ["connect-mirror"]
