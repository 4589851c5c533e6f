"""The shipped DR drill, end to end on a lab of its own — what `make demo` runs."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest

from drctl.cli.app import main
from drctl.lab.lab import Lab, LabPorts
from drctl.resources import runbooks_dir
from tests.conftest import PORT_BASE

pytestmark = [pytest.mark.lab, pytest.mark.spark]


@pytest.fixture
def drill_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    lab = Lab(tmp_path_factory.mktemp("drill") / "lab")
    base = PORT_BASE + 60
    try:
        lab.up(ports=LabPorts(base, base + 2, base + 4))
        yield lab
    finally:
        lab.down()


def test_drill_runbook_passes_every_check(drill_lab: Lab, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    junit = tmp_path / "drill.xml"
    report = tmp_path / "drill.md"
    status = main(["--config", str(drill_lab.config_file), "runbook", "run",
                   str(runbooks_dir() / "drill.yaml"), "--yes", "--junit", str(junit),
                   "--report", str(report)])
    assert status == 0, capsys.readouterr().err[-4000:]
    cases = ET.parse(junit).getroot().iter("testcase")
    names = {c.get("name"): c for c in cases}
    for check in ("gap_found_exactly", "gap_reconciled", "no_group_lost_or_duplicated",
                  "every_group_switched_back", "incident_closed"):
        assert check in names and names[check].find("failure") is None
    text = report.read_text()
    assert "failback" in text and "drill" in text
