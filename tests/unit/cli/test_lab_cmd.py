"""`drctl lab` (drctl/cli/lab_cmd.py) without a lab says so clearly."""

from __future__ import annotations

import pytest

from drctl.cli.app import main


def test_lab_command_without_lab_is_clear(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lab", "status", "--dir", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "No lab in" in err and "drctl lab up" in err and "Traceback" not in err
