"""What `drctl --version` says of Java (drctl/versions.py), without failing."""

from __future__ import annotations

from pathlib import Path

import pytest

from drctl.cli.app import main


@pytest.mark.parametrize("java_says", [None, "", 'openjdk version "21.0.2" 2024-01-16'])
def test_version_reports_java_without_failing(java_says: str | None, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    # JAVA_HOME decides which java is asked; None: a JAVA_HOME without one.
    if java_says is not None:
        java = tmp_path / "bin" / "java"
        java.parent.mkdir()
        java.write_text(f"#!/bin/sh\necho '{java_says}' >&2\n")
        java.chmod(0o755)
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))
    assert main(["--version"]) == 0
    shown = capsys.readouterr().out.splitlines()[-1]
    expected = {None: "java not found (JAVA_HOME or PATH)",
                "": f"java unknown version ({tmp_path}/bin/java)",
                'openjdk version "21.0.2" 2024-01-16': f"java 21.0.2 ({tmp_path}/bin/java)"}
    assert shown == expected[java_says]
