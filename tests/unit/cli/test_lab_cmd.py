"""`drctl lab` (drctl/cli/lab_cmd.py) without a lab says so clearly."""

from __future__ import annotations

import pytest

from drctl.cli.app import main


def test_lab_command_without_lab_is_clear(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lab", "status", "--dir", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "No lab in" in err and "drctl lab up" in err and "Traceback" not in err


def test_lab_load_names_its_commit_option_and_every_option_has_help(
        capsys: pytest.CaptureFixture[str]) -> None:
    from drctl.cli.app import main

    assert main(["lab", "load", "-h"]) == 0
    text = capsys.readouterr().out
    assert "--commit GROUP=POSITION" in text and "--group " not in text
    flat = " ".join(text.split())
    assert "--partitions N Partitions of each topic." in flat, flat
    assert "<int range>" not in flat and "<list[str]>" not in flat


def test_an_active_active_lab_never_keeps_names(tmp_path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    from drctl.errors import LabError
    from drctl.lab.lab import ACTIVE_ACTIVE, Lab

    argv = ["lab", "up", "--dir", str(tmp_path / "lab"), "--topology", "active-active"]
    assert main([*argv, "--topic-naming", "kept"]) == 2
    assert "a loop" in " ".join(capsys.readouterr().err.split())
    assert not (tmp_path / "lab").exists()  # nothing started
    with pytest.raises(LabError, match="prefixes topic names"):
        Lab(tmp_path / "lab").up(names_kept=True, topology=ACTIVE_ACTIVE)
