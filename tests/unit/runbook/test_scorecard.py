"""The drill scorecard through a runbook run: an action's `scorecard` reaches its step, the run's
data, the report and the JUnit XML, where each objective set is a test case that fails when missed
(ops/one_way/scorecard.py judges, runbook/result.py gathers, runbook/junit.py writes)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from drctl.config import Objectives
from drctl.ops.one_way.phases import command_timing
from drctl.ops.one_way.scorecard import Verdict, failover_scorecard, judge, operation_scorecard
from drctl.ops.steps.rpo import rpo_from_heartbeat, unknown_rpo
from drctl.reports import render
from drctl.runbook.actions import ActionContext
from drctl.runbook.executor import Executor
from drctl.runbook.journal import Journal, read_journal
from drctl.runbook.junit import write_junit
from drctl.runbook.variables import resolve_variables
from drctl.secrets import Redactor
from tests.unit.runbook.support import load, registry_with_test_actions, run

F = 1_714_564_800_000


def test_an_objective_is_met_missed_not_measured_or_absent() -> None:
    assert judge(60, 59.9) == Verdict.met and judge(60, 60) == Verdict.met
    assert judge(60, 61) == Verdict.missed
    assert judge(60, None) == Verdict.not_measured
    assert judge(None, 5) == Verdict.no_objective


def _timing(elapsed_s: float, finished: bool = True) -> dict[str, Any]:
    run = {"run_id": "r1", "command": "failover", "started_ms": F, "started_at": "t",
           "phases": [{"phase": "preflight", "start_s": 0.0, "seconds": 1.0,
                       "running": False},
                      {"phase": "translate-offsets", "start_s": 1.0,
                       "seconds": elapsed_s - 1.0, "running": False}],
           "total_s": elapsed_s, "finished": finished, "ended": True}
    return command_timing([], "failover", run)


def test_failover_scorecard_judges_rto_and_rpo() -> None:
    card = failover_scorecard("fo-1", Objectives(rpo_s=60, rto_s=900), _timing(120),
                              rpo_from_heartbeat(F - 90_000, F, "p.heartbeats").as_dict())
    rto, rpo = card["objectives"]
    assert (rto["objective"], rto["measured_s"], rto["verdict"]) == ("rto", 120.0, "met")
    assert (rpo["objective"], rpo["measured_s"], rpo["verdict"]) == ("rpo", 90.0, "missed")
    assert "last heard from the source" in rpo["detail"]
    unknown = failover_scorecard("fo-1", Objectives(rpo_s=60), _timing(5, finished=False),
                                 unknown_rpo(F, "nothing readable").as_dict())
    assert [o["verdict"] for o in unknown["objectives"]] == ["no-objective", "not-measured"]


def _drill(objectives: Objectives, rpo_ago_s: float) -> str:
    """A runbook whose `test.failover` action returns a failover's scorecard."""
    return f"""
        name: drill
        steps:
          - name: failover
            action: test.failover
            with: {{rpo_s: {_yaml(objectives.rpo_s)}, rto_s: {_yaml(objectives.rto_s)},
                   ago: {rpo_ago_s}}}
            outputs: [incident]
          - name: failback
            action: test.failback
    """


def _yaml(value: float | None) -> str:
    return "null" if value is None else str(value)


def _registry() -> Any:
    registry = registry_with_test_actions()

    def fake_failover(ctx: ActionContext, *, rpo_s: float | None, rto_s: float | None,
                      ago: float) -> dict[str, Any]:
        rpo = rpo_from_heartbeat(F - int(ago * 1000), F, "primary.heartbeats")
        return {"incident": "fo-1", "scorecard": failover_scorecard(
            "fo-1", Objectives(rpo_s=rpo_s, rto_s=rto_s), _timing(42), rpo.as_dict())}

    def fake_failback(ctx: ActionContext) -> dict[str, Any]:
        return {"scorecard": operation_scorecard("failback", "fo-1", _timing(7))}

    registry.register("test.failover", fake_failover)
    registry.register("test.failback", fake_failback)
    return registry


def _junit_cases(data: dict[str, Any], tmp_path: Path) -> tuple[ET.Element, dict[str, Any]]:
    path = tmp_path / "junit.xml"
    write_junit(data, path)
    suite = ET.parse(path).getroot()
    return suite, {c.get("name"): c for c in suite.iter("testcase")}


@pytest.mark.parametrize("objectives, rpo_ago_s, verdicts", [
    (Objectives(rpo_s=60, rto_s=900), 12, {"RTO <= 15m": "met", "RPO <= 1m": "met"}),
    (Objectives(rpo_s=10, rto_s=30), 12, {"RTO <= 30s": "missed", "RPO <= 10s": "missed"}),
])
def test_junit_has_a_case_per_objective_that_fails_when_missed(
        tmp_path: Path, objectives: Objectives, rpo_ago_s: float,
        verdicts: dict[str, str]) -> None:
    result = run(_drill(objectives, rpo_ago_s), registry=_registry())
    assert result.exit_status == 0  # the run's verdict is its steps'; JUnit scores the drill
    data = result.as_dict(Redactor())
    card = data["scorecard"]
    assert [op["step"] for op in card["operations"]] == ["failover", "failback"]
    assert [o["verdict"] for o in card["objectives"]] == list(verdicts.values())
    suite, cases = _junit_cases(data, tmp_path)
    missed = sum(1 for v in verdicts.values() if v == "missed")
    assert suite.get("tests") == "4" and suite.get("failures") == str(missed)
    for prefix, verdict in verdicts.items():
        (name,) = [n for n in cases if n.startswith(prefix)]
        assert name.endswith("(failover, step failover)")
        failure = cases[name].find("failure")
        if verdict == "missed":
            assert failure is not None and failure.get("type") == "objective-missed"
        else:
            assert failure is None and cases[name].find("skipped") is None


def test_no_objective_adds_no_case_and_an_unmeasured_one_is_skipped(tmp_path: Path) -> None:
    data = run(_drill(Objectives(), 12), registry=_registry()).as_dict(Redactor())
    suite, cases = _junit_cases(data, tmp_path)
    assert suite.get("tests") == "2" and list(cases) == ["failover", "failback"]
    data["scorecard"]["objectives"][1].update(verdict="not-measured", measured=None)
    suite, cases = _junit_cases(data, tmp_path)
    assert suite.get("skipped") == "1" and suite.get("failures") == "0"
    (rpo,) = [c for n, c in cases.items() if n.startswith("RPO")]
    assert rpo.find("skipped") is not None and rpo.find("failure") is None


def test_the_runbook_report_shows_rto_by_phase_and_the_rpo_against_objectives() -> None:
    data = run(_drill(Objectives(rpo_s=10, rto_s=900), 12),
               registry=_registry()).as_dict(Redactor())
    md = render("runbook-report.md.j2", run=data)
    assert "## Scorecard" in md and "### failover (step `failover`)" in md
    assert "| RTO | 15m | 42s | **met** |" in md and "| RPO | 10s | 12s | **missed** |" in md
    assert "the target last heard from the source at 2024-05-01T11:59:48Z" in md
    assert "| translate-offsets | 1.0 s | 41.0 s |" in md
    assert "### failback (step `failback`)" in md
    plain = run("""
        steps:
          - name: hello
            shell: echo hi
    """)
    assert "Scorecard" not in render("runbook-report.md.j2", run=plain.as_dict(Redactor()))


def test_a_resumed_run_keeps_the_scorecard_of_a_step_done_before(tmp_path: Path) -> None:
    registry = _registry()
    text = _drill(Objectives(rpo_s=60, rto_s=900), 12).replace(
        "          - name: failback\n            action: test.failback\n",
        "          - name: flaky\n            action: test.flaky\n"
        "            with: {succeed_on: 2}\n")
    runbook = load(text, registry)
    path = tmp_path / "j.jsonl"

    def execute(resume: Any = None) -> Any:
        journal = Journal(path, Redactor())
        try:
            return Executor(runbook, resolve_variables(runbook, assignments=[]), registry,
                            journal=journal).run(resume)
        finally:
            journal.close()

    assert execute().status.value == "failed"  # `flaky` fails once; `failover` is done
    resumed = execute(read_journal(path))
    assert resumed.status.value == "succeeded" and resumed.steps[0].resumed
    card = resumed.as_dict(Redactor())["scorecard"]
    assert [o["verdict"] for o in card["objectives"]] == ["met", "met"]
