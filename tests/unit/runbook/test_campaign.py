"""A campaign without Kafka: rounds of a runbook whose fault kills its child step, healing and
resuming, the scorecard read back from the journals, and a campaign run again going on."""

from __future__ import annotations

import textwrap
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from drctl.errors import ExitStatus, UsageError
from drctl.reports import render_report
from drctl.runbook.actions import ActionContext, Registry
from drctl.runbook.campaign import (
    Campaign,
    CampaignSpec,
    campaign_scorecard,
    exit_status,
    round_summary,
)
from drctl.runbook.executor import Executor, RunObserver
from drctl.runbook.journal import Journal, JournalState
from drctl.runbook.loader import parse_runbook
from drctl.runbook.model import Runbook, Step
from drctl.runbook.variables import Variables, parse_assignments, resolve_variables


def registry() -> Registry:
    """`work` (sleeps, in a child process a fault may kill) and a stand-in for the ledger's
    verdict; a child builds it again from here."""
    reg = Registry(factory="tests.unit.runbook.test_campaign:registry")

    def work(ctx: ActionContext, *, seconds: float = 1.0) -> dict[str, Any]:
        ctx.notify("working")
        time.sleep(seconds)
        return {"done": True}

    def verify(ctx: ActionContext, *, ledger: str = "", lost: int = 0,
               over: int = 0) -> dict[str, Any]:
        verdict = "; ".join([f"{lost} lost"] * bool(lost)
                            + [f"group g read {2 + over} record(s) again, 2 stated by drctl"]
                            * bool(over)) or "ok"
        return {"acked": 10, "lost": lost, "twice": 0, "groups_lost": 0, "redelivered": 2 + over,
                "redelivered_over": over, "ok": verdict == "ok", "verdict": verdict,
                "sides": [], "groups": []}

    reg.register("test.work", work)
    reg.register("ledger.verify", verify, read_only=True)
    return reg


RUNBOOK = """
    inputs:
      faults: {default: 0}
      fault_seed: {default: 1}
      lost: {default: 0}
      over: {default: 0}
    steps:
      - name: faults
        when: "{{ vars.faults | int > 0 }}"
        fault:
          count: "{{ vars.faults }}"
          seed: "{{ vars.fault_seed }}"
          targets: [step]
          signals: [kill]
          window: [{step: work, within: [0.3s, 0.6s]}]
      - name: work
        action: test.work
        process: child
        with: {seconds: 1.5}
      - name: counted
        action: ledger.verify
        with: {ledger: "{{ run.id }}", lost: "{{ vars.lost }}", over: "{{ vars.over }}"}
        outputs: [acked, lost, twice, groups_lost, redelivered, redelivered_over, ok, verdict,
                  sides, groups]
      - name: nothing_lost
        check:
          value: "{{ steps.counted.outputs.lost }}"
          equals: 0
"""


class _Harness:
    def __init__(self, report_dir: Path, *, rounds: int = 2, faults: int = 1,
                 assignments: Sequence[str] = ()) -> None:
        self.spec = CampaignSpec("test.yaml", rounds=rounds, faults=faults, seed=7, reruns=3,
                                 report_dir=report_dir, assignments=tuple(assignments))
        self.runs = 0
        self.healed: list[JournalState] = []
        self.lines: list[str] = []

    def load(self, assignments: Sequence[str]) -> tuple[Runbook, Variables]:
        runbook = parse_runbook(textwrap.dedent(RUNBOOK).lstrip(), Path("test.yaml"),
                                registry(), frozenset(parse_assignments(list(assignments))))
        return runbook, resolve_variables(runbook, assignments=list(assignments))

    def executor(self, runbook: Runbook, variables: Variables, journal: Journal) -> Executor:
        self.runs += 1
        return Executor(runbook, variables, registry(), journal=journal,
                        observer=self.observer)

    observer: RunObserver | None = None

    def heal(self, state: JournalState) -> list[str]:
        self.healed.append(state)
        return []

    def run(self) -> dict[str, Any]:
        return Campaign(self.spec, load=self.load, executor=self.executor, heal=self.heal,
                        notify=self.lines.append).run()


def test_rounds_under_faults_are_healed_resumed_and_scored(tmp_path: Path) -> None:
    harness = _Harness(tmp_path / "c")
    card = harness.run()
    assert card["ok"] and card["rounds"] == 2 and card["passed"] == 2, card["failed"]
    # Each round's one fault killed its step; the resume ran it again (after healing).
    assert card["faults"]["landed"] == 2
    assert card["faults"]["by_kind"] == [{"signal": "kill", "target": "step", "landed": 2}]
    for fault in card["faults"]["list"]:
        assert fault["step"] == "work" and 0.3 <= fault["at_s"] < 1.5
        # The step's last progress line then (none yet when the fault came before it).
        assert fault["progress"] in (None, "working")
    assert card["reruns"]["total"] == 2 and harness.runs == 4 and len(harness.healed) == 2
    [by_step] = card["reruns"]["by_step"]
    assert by_step["step"] == "work" and by_step["reruns"] == 2
    assert by_step["time_to_recover_s"]["max"] >= 0
    assert [r["seed"] for r in card["ledger"]["rounds"]] == [7, 8]
    assert card["ledger"]["acked"] == 20 and card["ledger"]["lost"] == 0
    assert exit_status(card) == ExitStatus.SUCCESS
    text = render_report("drill-campaign", "md", card=card)
    assert "| kill | step | 2 |" in text and "passed" in text.splitlines()[0]
    # The same command again: nothing left to run.
    again = _Harness(tmp_path / "c")
    assert again.run()["rounds"] == 2 and again.runs == 0
    assert "2 round(s) done" in again.lines[0]


def test_a_round_whose_check_does_not_hold_stops_the_campaign_naming_its_seed(
        tmp_path: Path) -> None:
    harness = _Harness(tmp_path / "c", rounds=3, faults=0, assignments=["lost=1"])
    card = harness.run()
    assert not card["ok"] and card["rounds"] == 1 and harness.runs == 1  # never re-run
    [failed] = card["failed"]
    assert failed["seed"] == 7 and failed["status"] == "check-failed"
    assert failed["reproduce"] == \
        "drctl runbook run test.yaml --var lost=1 --faults 0 --seed 7 --rounds 1"
    assert exit_status(card) == ExitStatus.CHECK_FAILED
    assert any("Reproduce it: drctl runbook run test.yaml" in line for line in harness.lines)


def test_the_reproduce_line_carries_every_input_that_decides_the_plan(tmp_path: Path) -> None:
    """Issue 58, finding 9: the 'Reproduce:' line left out --config, --var and --vars-file, so
    with a staging vars file the same seed planned other faults."""
    spec = CampaignSpec("staging drill.yaml", rounds=3, faults=3, seed=5, reruns=1,
                        report_dir=tmp_path, assignments=("records=500", "note=a b"),
                        var_files=("staging-faults.yaml",), config="staging.yaml")
    assert spec.reproduce(2) == (
        "drctl --config staging.yaml runbook run 'staging drill.yaml' --var records=500 "
        "--var 'note=a b' --vars-file staging-faults.yaml --faults 3 --seed 6 --rounds 1")


def test_a_round_whose_ledger_does_not_pass_fails_though_its_checks_held(
        tmp_path: Path) -> None:
    """Re-deliveries beyond what drctl stated (or nothing acknowledged) fail the round and
    the campaign, also under a runbook whose own checks look at lost records only."""
    harness = _Harness(tmp_path / "c", rounds=2, faults=0, assignments=["over=3"])
    card = harness.run()
    assert not card["ok"] and card["rounds"] == 1
    [failed] = card["failed"]
    assert failed["status"] == "check-failed" and failed["reason"] == (
        "the ledger does not pass: group g read 5 record(s) again, 2 stated by drctl")
    assert card["ledger"]["redelivered_over"] == 3
    assert exit_status(card) == ExitStatus.CHECK_FAILED
    text = render_report("drill-campaign", "md", card=card)
    assert "| re-delivered beyond what drctl stated | **3** |" in text


def test_a_report_dir_holds_one_campaign(tmp_path: Path) -> None:
    _Harness(tmp_path / "c", rounds=1, faults=0).run()
    with pytest.raises(UsageError, match="holds another campaign"):
        _Harness(tmp_path / "c", rounds=2, faults=0).run()


class _CtrlC(RunObserver):
    def step_started(self, step: Step) -> None:
        if step.name == "work":
            raise KeyboardInterrupt


def test_an_interrupted_campaign_goes_on_with_its_round_when_run_again(
        tmp_path: Path) -> None:
    harness = _Harness(tmp_path / "c", rounds=1, faults=0)
    harness.observer = _CtrlC()
    card = harness.run()
    assert card["interrupted"] == 1 and card["rounds"] == 0
    assert exit_status(card) == ExitStatus.INTERRUPTED
    again = _Harness(tmp_path / "c", rounds=1, faults=0)
    card = again.run()
    assert card["ok"] and card["rounds"] == 1 and again.runs == 1
    assert any("going on with" in line for line in again.lines)


def test_an_operation_run_again_by_a_later_step_is_one_operation_of_its_round(
        tmp_path: Path) -> None:
    """Issue 53, the suite's kept rounds (seed 17, step failover: Connect SIGTERMed, the stop
    left pending): the drill's failover_confirms_the_stop runs failover again on the same
    incident, and the round counted two failovers — the RTO per phase had 3 failovers over
    2 rounds. The later run finished the operation: it is the round's one failover."""
    import json

    def card(incident: str, preflight: float) -> dict[str, Any]:
        return {"operation": "failover", "incident": incident,
                "timing": {"this_run": {"phases": [{"phase": "preflight",
                                                    "seconds": preflight}],
                                        "total_s": preflight},
                           "elapsed_s": preflight, "runs": 1}}

    def step(name: str, scorecard: dict[str, Any]) -> list[dict[str, Any]]:
        return [{"time": "2026-01-01T00:00:01+00:00", "type": "step-start", "step": name,
                 "kind": "action", "inputs": {"action": "failover"}},
                {"time": "2026-01-01T00:00:02+00:00", "type": "step-end", "step": name,
                 "status": "ok", "scorecard": scorecard}]

    journal = tmp_path / "round-01.jsonl"
    records = [{"time": "2026-01-01T00:00:00+00:00", "type": "run"},
               *step("failover", card("fo-1", 11.0)),
               *step("failover_confirms_the_stop", card("fo-1", 10.0)),
               *step("another_incidents_failover", card("fo-2", 9.0))]
    journal.write_text("".join(json.dumps(r) + "\n" for r in records))
    summary = round_summary(journal)
    assert set(summary["operations"]) == {"failover_confirms_the_stop",
                                          "another_incidents_failover"}
    assert summary["operations"]["failover_confirms_the_stop"]["phases_s"] == \
        {"preflight": 10.0}
    spec = CampaignSpec("test.yaml", rounds=1, faults=1, seed=7, reruns=3,
                        report_dir=tmp_path, assignments=())
    rto = campaign_scorecard(spec, [{**summary, "round": 1, "seed": 7, "passed": True,
                                     "status": "succeeded", "reason": None,
                                     "reproduce": ""}])["rto"]
    [failover] = rto
    assert failover["phases"] == [{"phase": "preflight", "n": 2, "median": 9.5, "max": 10.0,
                                   "min": 9.0}]
