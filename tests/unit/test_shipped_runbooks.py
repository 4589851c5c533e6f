"""Every runbook drctl ships validates against the real action registry."""

from __future__ import annotations

import pytest

from drctl.cli.app import main
from drctl.resources import runbooks_dir

SHIPPED = sorted(p.name for p in runbooks_dir().glob("*.yaml"))


def test_the_promised_runbooks_ship() -> None:
    assert {"failover.yaml", "failback.yaml", "planned-switchover.yaml",
            "drill.yaml", "drill-comeback.yaml"} <= set(SHIPPED)


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_runbook_validates(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["runbook", "validate", str(runbooks_dir() / name)]) == 0, \
        capsys.readouterr().err
