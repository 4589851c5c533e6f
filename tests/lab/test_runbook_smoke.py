"""Runbooks against the real lab: the shipped smoke runbook, and a rollback that heals."""

from __future__ import annotations

import json
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from drctl.errors import ExitStatus
from drctl.lab.lab import wait_for_lab
from drctl.resources import runbooks_dir
from tests.conftest import RunningLab
from tests.json_schemas import validate_output
from tests.unit.runbook.support import drctl, write

pytestmark = pytest.mark.lab

# Other tests share the session's lab. Transaction markers occupy offsets MirrorMaker 2 never
# copies, so after a transactional workload a caught-up flow can still look a few records
# "behind" (see drctl.kafka.lag); allow for that much.
MARKER_SLACK = ["--var", "max_behind=25"]


def settle(running: RunningLab, deadline_s: float = 90) -> None:
    """Wait until replication has caught up (a plan evaluates each check once)."""
    end = time.monotonic() + deadline_s
    while sum(r["behind"] for r in running.lab.status()["replication_lag"]) > 25:
        assert time.monotonic() < end, "replication did not catch up"
        time.sleep(1)


def test_smoke_runbook_passes_on_a_healthy_lab(lab: RunningLab, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    smoke = runbooks_dir() / "smoke.yaml"
    junit = tmp_path / "smoke.xml"
    status = drctl("--config", str(lab.config_file), "runbook", "run", str(smoke),
                   "--journal", str(tmp_path / "smoke.jsonl"), "--junit", str(junit),
                   "-o", "json", *MARKER_SLACK)
    out = capsys.readouterr().out
    assert status == ExitStatus.SUCCESS, out
    data = json.loads(out)
    validate_output(["runbook", "run"], data)
    steps = {s["name"]: s for s in data["steps"]}
    assert all(s["status"] == "ok" for s in steps.values()), steps
    assert steps["clusters_reachable"]["outputs"]["reachable"] == ["primary", "secondary"]
    assert steps["lab_status"]["outputs"]["not_running"] == []
    assert steps["same_kafka_version"]["inputs"]["equals"] == lab.state.kafka_version
    assert steps["lab_status"]["inputs"]["with"]["dir"] == str(lab.lab.dir)
    cases = ET.parse(junit).getroot().findall("testcase")
    assert len(cases) == 7 and not any(c.find("failure") is not None or
                                       c.find("error") is not None for c in cases)


def test_smoke_plan_runs_only_its_checks(lab: RunningLab,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    smoke = runbooks_dir() / "smoke.yaml"
    settle(lab)
    assert drctl("--config", str(lab.config_file), "runbook", "plan", str(smoke),
                 "-o", "json", *MARKER_SLACK) == ExitStatus.SUCCESS
    plan = json.loads(capsys.readouterr().out)
    validate_output(["runbook", "plan"], plan)
    steps = {s["name"]: s["status"] for s in plan["steps"]}
    assert steps == {"clusters_reachable": "planned", "lab_status": "planned",
                     "all_processes_running": "deferred", "connectors_running": "ok",
                     "replication_caught_up": "ok", "lab_files": "planned",
                     "same_kafka_version": "deferred"}


def test_a_failed_check_rolls_back_a_real_outage(lab: RunningLab, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DRCTL_RUNBOOK_TIME_SCALE", "0.2")
    drill = write(tmp_path / "outage.yaml", """
        inputs:
          lab_dir: "{{ config.path | dirname }}"
        steps:
          - name: lose_replication
            action: lab.fail
            with: {what: replication, dir: "{{ vars.lab_dir }}"}
            undo: heal_replication
          - name: connect_is_down
            check:
              action: lab.status
              with: {dir: "{{ vars.lab_dir }}"}
              value: "{{ result.not_running }}"
              equals: [connect]
            retry: 5
          - name: impossible
            check: {value: 1, equals: 2}
            on_failure: rollback
          - name: never
            shell: echo never
        rollback:
          - name: heal_replication
            action: lab.heal
            with: {what: replication, dir: "{{ vars.lab_dir }}"}
            retry: 3
    """)
    journal = tmp_path / "outage.jsonl"
    try:
        status = drctl("--config", str(lab.config_file), "runbook", "run", str(drill),
                       "--journal", str(journal))
    finally:
        # Whatever happened, leave the session's lab healthy for the next tests.
        lab.lab.heal("replication")
        wait_for_lab(lab.lab, deadline_s=120)
    assert status == ExitStatus.CHECK_FAILED
    ends = [json.loads(line) for line in journal.read_text().splitlines()
            if '"step-end"' in line]
    assert [(r["step"], r["phase"], r["status"]) for r in ends] == [
        ("lose_replication", "main", "ok"), ("connect_is_down", "main", "ok"),
        ("impossible", "main", "check-failed"), ("heal_replication", "rollback", "ok")]
    assert ends[-1]["outputs"] == {}
