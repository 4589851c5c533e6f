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


@pytest.fixture(scope="module")
def drill_lab(tmp_path_factory: pytest.TempPathFactory, spark_remote: str) -> Iterator[Lab]:
    lab = Lab(tmp_path_factory.mktemp("drill") / "lab")
    base = PORT_BASE + 60
    try:
        lab.up(ports=LabPorts(base, base + 2, base + 4), spark_connect=spark_remote)
        yield lab
    finally:
        lab.down()


def test_drill_runbook_passes_every_check(drill_lab: Lab, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    junit = tmp_path / "drill.xml"
    status = main(["--config", str(drill_lab.config_file), "runbook", "run",
                   str(runbooks_dir() / "drill.yaml"), "--yes", "--junit", str(junit),
                   "--report-dir", str(tmp_path / "reports")])
    assert status == 0, capsys.readouterr().err[-4000:]
    (report,) = (tmp_path / "reports").glob("drill-*.md")  # beside .html and .json
    cases = ET.parse(junit).getroot().iter("testcase")
    names = {c.get("name"): c for c in cases}
    for check in ("gap_found_exactly", "gap_reconciled", "no_group_lost_or_duplicated",
                  "every_group_switched_back", "incident_closed"):
        assert check in names and names[check].find("failure") is None
    text = report.read_text()
    assert "failback" in text and "drill" in text
    assert "failover_skipped_nothing" in names
    assert names["failover_skipped_nothing"].find("failure") is None
    # The audit of the failover's positions (from guard's snapshots), one row per group.
    table = text.split("Output `audit_groups`:\n\n", 1)[1].split("\n\n", 1)[0].splitlines()

    def cells(line: str) -> list[str]:
        return [c.strip() for c in line.strip().strip("|").split("|")]
    header = cells(table[0])
    assert header == ["group", "positions", "audited", "redelivered", "skipped",
                      "stated_bound", "from"], table
    rows = {r["group"]: r for r in (dict(zip(header, cells(line), strict=True))
                                    for line in table[2:])}
    assert set(rows) == {"drill-app-a", "drill-app-b", "drill-app-c"}, table
    assert all(r["skipped"] == "0" and r["audited"] == r["positions"] != "0"
               for r in rows.values()), table
    assert any("snapshot" in r["from"] for r in rows.values()), table


def test_comeback_drill_passes_every_check(drill_lab: Lab, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    """The second-fault drill (runbooks/drill-comeback.yaml) on the same lab, restored."""
    client = drill_lab.connect_client(drill_lab.load_state())
    for name in client.connectors():
        if name.startswith("mm2-secondary-primary"):
            client.delete(name)  # the drill's reverse flow
    drill_lab.up(ports=drill_lab.load_state().ports)  # forward replication running again
    junit = tmp_path / "comeback.xml"
    status = main(["--config", str(drill_lab.config_file), "runbook", "run",
                   str(runbooks_dir() / "drill-comeback.yaml"), "--yes", "--junit",
                   str(junit)])
    assert status == 0, capsys.readouterr().err[-4000:]
    names = {c.get("name"): c for c in ET.parse(junit).getroot().iter("testcase")}
    for check in ("stop_is_pending", "stop_confirmed", "every_gap_record_came_late",
                  "nothing_copied_twice", "primary_holds_every_record_once",
                  "incident_closed"):
        assert check in names and names[check].find("failure") is None, check
