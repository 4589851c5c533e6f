"""Every runbook drctl ships validates against the real action registry."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from drctl.cli.app import main
from drctl.errors import ExitStatus
from drctl.resources import runbooks_dir
from drctl.runbook.actions import builtin_registry
from drctl.runbook.loader import load_runbook

SHIPPED = sorted(p.name for p in runbooks_dir().glob("*.yaml"))


def test_the_promised_runbooks_ship() -> None:
    assert {"failover.yaml", "failback.yaml", "planned-switchover.yaml",
            "drill.yaml", "drill-comeback.yaml"} <= set(SHIPPED)


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_runbook_validates(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["runbook", "validate", str(runbooks_dir() / name)]) == 0, \
        capsys.readouterr().err


def test_runbook_list_names_every_shipped_runbook_with_its_description(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["-o", "json", "runbook", "list"]) == 0
    listed = {r["name"]: r for r in json.loads(capsys.readouterr().out)["runbooks"]}
    assert sorted(listed) == sorted(name.removesuffix(".yaml") for name in SHIPPED)
    assert "failback with --check-order" in listed["drill"]["description"]
    assert main(["-q", "runbook", "list"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in listed)
    assert "Read-only health check of the local DR lab" in out


def test_runbook_show_prints_the_shipped_yaml(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["runbook", "show", "failover"]) == 0
    shown = capsys.readouterr().out
    assert yaml.safe_load(shown) == yaml.safe_load((runbooks_dir() / "failover.yaml").read_text())


@pytest.mark.parametrize("command", [["validate"], ["plan"], ["run", "--dry-run"]])
def test_every_runbook_subcommand_takes_a_shipped_name(
        command: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    # A misspelt name is a usage error pointing at the right one, before anything runs.
    assert main(["runbook", *command, "dril"]) == ExitStatus.USAGE
    err = " ".join(capsys.readouterr().err.split())
    assert "did you mean 'drill'?" in err and "drctl runbook list" in err


def test_a_shipped_name_validates_and_a_file_of_that_name_wins(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["-o", "json", "runbook", "validate", "drill"]) == 0
    assert json.loads(capsys.readouterr().out)["path"] == str(runbooks_dir() / "drill.yaml")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "drill").write_text("name: mine\nsteps:\n  - name: hello\n    shell: echo hi\n")
    assert main(["-o", "json", "runbook", "validate", "drill"]) == 0
    assert json.loads(capsys.readouterr().out)["runbook"] == "mine"


def test_shipped_runbooks_validate() -> None:
    shipped = sorted(runbooks_dir().glob("*.yaml"))
    assert any(p.name == "smoke.yaml" for p in shipped)
    for path in shipped:
        runbook = load_runbook(path, builtin_registry())
        assert runbook.steps, path
