"""Steps in child processes of their own, and `fault:` steps, without Kafka: the targets are
`sleep` processes driven by shell commands, or the step's own process."""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest

from drctl.reports import render_report
from drctl.retry import wait_for
from drctl.runbook.executor import Executor, RunObserver
from drctl.runbook.faults import (
    STEP_TARGET,
    FaultInjector,
    FaultSignal,
    FaultSpec,
    PlannedFault,
    WindowEntry,
    heal_left_broken,
    plan_faults,
)
from drctl.runbook.journal import Journal, read_journal
from drctl.runbook.loader import RunbookInvalid
from drctl.runbook.result import RunResult, RunStatus, Status
from drctl.runbook.variables import resolve_variables
from drctl.secrets import Redactor
from tests.unit.runbook.support import load, registry_with_test_actions, run


class _Messages(RunObserver):
    def __init__(self) -> None:
        self.lines: list[str] = []

    def message(self, text: str) -> None:
        self.lines.append(text)


def _run(text: str, journal: Path, *, resume: bool = False,
         observer: RunObserver | None = None) -> RunResult:
    registry = registry_with_test_actions()
    runbook = load(text, registry)
    variables = resolve_variables(runbook)
    state = read_journal(journal) if resume else None
    log = Journal(journal, variables.redactor)
    try:
        return Executor(runbook, variables, registry, journal=log,
                        observer=observer).run(resume=state)
    finally:
        log.close()


def _records(journal: Path, kind: str) -> list[dict[str, Any]]:
    return [r for r in map(json.loads, journal.read_text().splitlines()) if r["type"] == kind]


def _sleeper(tmp_path: Path, name: str = "server") -> dict[str, str]:
    """Shell commands that fault and heal a `sleep` process, as a team's would a broker."""
    pid = tmp_path / f"{name}.pid"
    log = tmp_path / f"{name}.log"
    start = f"sleep 300 & echo $! > {pid}; echo started >> {log}"
    os.system(start)
    return {"kill": f"kill -KILL $(cat {pid}); echo killed >> {log}",
            "term": f"kill -TERM $(cat {pid}); echo termed >> {log}",
            "stop": f"kill -STOP $(cat {pid}); echo stopped >> {log}",
            "cont": f"kill -CONT $(cat {pid}); echo continued >> {log}",
            "heal": start,
            # A killed `sleep` may stay a zombie (no init reaps it in a container).
            "running": f"ps -o stat= -p $(cat {pid}) | grep -qv Z"}


def _stop_sleeper(tmp_path: Path, name: str = "server") -> list[str]:
    os.system(f"kill -KILL $(cat {tmp_path / f'{name}.pid'}) 2>/dev/null")
    return (tmp_path / f"{name}.log").read_text().split()


def _commands_yaml(commands: dict[str, str], indent: int) -> str:
    lines = "\n".join(f"{k}: {json.dumps(v)}" for k, v in commands.items())
    return textwrap.indent(lines, " " * indent)


def test_a_child_step_answers_like_an_in_process_one_and_streams_its_progress(
        tmp_path: Path) -> None:
    seen = _Messages()
    result = _run("""
        steps:
          - name: echo
            action: test.echo
            process: child
            with: {value: hello, count: 21}
            outputs: [doubled, value]
          - name: talk
            action: test.hang
            process: child
            with: {seconds: 0}
          - name: fails
            action: test.flaky
            process: child
            with: {succeed_on: 2}
    """, tmp_path / "j.jsonl", observer=seen)
    by_name = {s.name: s for s in result.steps}
    assert by_name["echo"].outputs == {"doubled": 42, "value": "hello"}
    assert by_name["talk"].status == Status.ok
    assert "hanging for 0 s" in seen.lines
    # The child's own error comes back as the step's error.
    assert by_name["fails"].status == Status.failed
    assert "ConnectionError: not yet" in (by_name["fails"].error or "")


def test_a_child_step_that_times_out_is_ended_with_its_process_group() -> None:
    result = run("""
        steps:
          - name: slow
            action: test.hang
            process: child
            with: {seconds: 30}
            timeout: 1s
    """)
    [slow] = result.steps
    assert slow.status == Status.failed
    assert "timed out after 1 s; its process group was ended" in (slow.error or "")


def test_a_child_step_terminated_runs_its_cleanup_and_still_ends_on_sigterm(
        tmp_path: Path) -> None:
    """SIGTERM (a drill's `term` fault, an operator's kill) ends the child's action as Ctrl-C
    would — its `finally` runs: a gap job interrupted on its server, drctl's temporary
    directory removed (two were left per suite run) — and the process still ends on the
    signal, so the runbook reads the step terminated, as before."""
    import signal

    from drctl.runbook.child import call_in_child
    from drctl.runbook.kinds.interface import AttemptFailed

    cleaned = tmp_path / "cleaned"
    pids: list[int] = []
    hanging = threading.Event()

    def notify(line: str) -> None:
        if line.startswith("hanging"):
            hanging.set()

    def terminate() -> None:
        assert hanging.wait(60), "the child never said it was hanging"
        os.kill(pids[0], signal.SIGTERM)

    killer = threading.Thread(target=terminate)
    with pytest.raises(AttemptFailed) as ended:
        call_in_child("test.hang", {"seconds": 60, "cleanup_file": str(cleaned)},
                      registry_factory=registry_with_test_actions().factory, config_path=None,
                      timeout_s=120, grace_s=10, notify=notify,
                      started=lambda pid: (pids.append(pid), killer.start()))
    killer.join()
    assert "ended on SIGTERM" in ended.value.message
    assert cleaned.read_text() == "cleaned up"


def test_process_must_be_in_process_or_child() -> None:
    with pytest.raises(RunbookInvalid, match="'process' must be in-process or child"):
        load("""
            steps:
              - name: a
                action: test.echo
                process: elsewhere
        """)


def test_the_plan_covers_every_signal_and_target_and_the_same_seed_gives_the_same_faults(
        ) -> None:
    window = (WindowEntry("failover", ("secondary", "connect", "step")),
              WindowEntry("failback"), WindowEntry("reprotect", within=(1.0, 5.0)))
    targets = ("primary", "secondary", "connect", "spark-connect", "step")

    def spec(seed: str, count: int = 5) -> FaultSpec:
        return FaultSpec(count, seed, window, targets, tuple(FaultSignal))

    planned = plan_faults(spec("7"), "faults", lambda t, s: True)
    assert [f.id for f in planned] == [f"faults#{i}" for i in range(1, 6)]
    assert {f.target for f in planned} == set(targets)
    assert {f.signal for f in planned} == set(FaultSignal)
    # A target lands only where its window entry takes it; a fault's later moments are the
    # later steps of the window that take it.
    for f in planned:
        steps = [s for s, _ in f.moments]
        assert steps == [e.step for e in window if e.takes(f.target)][-len(steps):]
        assert all(1.0 <= at <= 20.0 for _, at in f.moments)
    assert plan_faults(spec("7"), "faults", lambda t, s: True) == planned
    assert plan_faults(spec("8"), "faults", lambda t, s: True) != planned
    # A target that cannot take a signal gives its turn to the next one.
    no_stop = plan_faults(spec("7", 15), "faults",
                          lambda t, s: not (t == "connect" and s == FaultSignal.stop))
    assert len(no_stop) == 15
    assert not any(f.target == "connect" and f.signal == FaultSignal.stop for f in no_stop)


def test_a_kill_lands_in_its_step_and_the_server_is_healed_before_the_next_step(
        tmp_path: Path) -> None:
    commands = _sleeper(tmp_path)
    journal = tmp_path / "j.jsonl"
    result = _run(f"""
        steps:
          - name: faults
            fault:
              count: 1
              seed: 1
              signals: [kill]
              window: [{{step: work, within: [0.5s, 0.5s]}}]
              restart_after: 0s
              commands:
                server:
{_commands_yaml(commands, 18)}
          - name: work
            pause: 2s
          - name: after
            shell: kill -0 $(cat {tmp_path / 'server.pid'})
    """, journal)
    assert result.status == RunStatus.succeeded, result.reason
    events = _stop_sleeper(tmp_path)
    assert events == ["started", "killed", "started"]
    [fault] = result.faults
    assert fault["landed"] and fault["step"] == "work" and fault["target"] == "server"
    assert fault["signal"] == "kill" and 0.5 <= fault["at_s"] < 1.5
    assert fault["healed"]["how"] == "healed by its heal command"
    assert [r["fault"] for r in _records(journal, "fault-healed")] == ["faults#1"]
    # The heal is journaled before the next step starts.
    kinds = [(r["type"], r.get("step")) for r in map(json.loads,
                                                     journal.read_text().splitlines())]
    assert kinds.index(("fault-healed", None)) < kinds.index(("step-start", "after"))
    report = render_report("runbook-report", "md", run=result.as_dict(Redactor()))
    assert "## Faults" in report and "| `faults#1` | kill | server | `work` |" in report


def test_a_stop_holds_the_target_then_continues_it(tmp_path: Path) -> None:
    commands = _sleeper(tmp_path)
    result = _run(f"""
        steps:
          - name: faults
            fault:
              count: 1
              seed: 1
              signals: [stop]
              stop_for: 0.3s
              window: [{{step: work, within: 0.2s}}]
              commands:
                server:
{_commands_yaml(commands, 18)}
          - name: work
            pause: 1s
    """, tmp_path / "j.jsonl")
    assert result.status == RunStatus.succeeded, result.reason
    assert _stop_sleeper(tmp_path) == ["started", "stopped", "continued"]
    [fault] = result.faults
    assert fault["healed"]["how"] == "continued after 0.3 s"


def test_a_fault_whose_step_ends_first_goes_on_to_the_next_step_or_misses(
        tmp_path: Path) -> None:
    commands = _sleeper(tmp_path)
    result = _run(f"""
        steps:
          - name: faults
            fault:
              count: 2
              seed: 0
              targets: [server]
              signals: [stop]
              stop_for: 0.1s
              within: 0.6s
              window: [short, long]
              commands:
                server:
{_commands_yaml(commands, 18)}
          - name: short
            pause: 0.1s
          - name: long
            pause: 1.5s
          - name: faults_too_late
            fault:
              count: 1
              seed: 3
              window: [{{step: last, within: 5s}}]
              commands:
                server:
{_commands_yaml(commands, 18)}
          - name: last
            pause: 0.1s
    """, tmp_path / "j.jsonl")
    _stop_sleeper(tmp_path)
    assert result.status == RunStatus.succeeded, result.reason
    by_id = {f["fault"]: f for f in result.faults}
    aimed = {f["id"]: f["moments"][0]["step"] for f in result.steps[0].faults or []}
    assert sorted(aimed.values()) == ["long", "short"]  # this seed's plan
    for fault_id, step in aimed.items():
        assert by_id[fault_id]["landed"] and by_id[fault_id]["step"] == "long"
        assert by_id[fault_id]["carried"] == (step == "short")
    missed = by_id["faults_too_late#1"]
    assert not missed["landed"]
    assert missed["why"] == "missed its window: last ended before its moment"


def test_a_killed_step_fails_and_the_resume_runs_it_again_landing_only_what_is_left(
        tmp_path: Path) -> None:
    journal = tmp_path / "j.jsonl"
    text = """
        steps:
          - name: faults
            fault:
              count: 2
              seed: 11
              targets: [step]
              signals: [kill, stop]
              stop_for: 0.2s
              window: [{step: work, within: [0.4s, 1.5s]}]
          - name: work
            action: test.hang
            process: child
            with: {seconds: 2}
          - name: after
            action: test.echo
    """
    planned = {f["id"]: f for f in _run(text, tmp_path / "plan.jsonl").steps[0].faults or []}
    kill = next(f for f in planned.values() if f["signal"] == "kill")
    stop = next(f for f in planned.values() if f["signal"] == "stop")
    first = _run(text, journal)
    work = first.steps[1]
    landed = {f["fault"]: f for f in first.faults if f.get("landed")}
    if kill["moments"][0]["at_s"] < stop["moments"][0]["at_s"]:
        # The kill came first: the stop waits for the step's next run.
        assert set(landed) == {kill["id"]}
    assert work.status == Status.failed
    assert "ended on SIGKILL" in (work.error or "")
    assert first.steps[2].status == Status.not_run

    again = _run(text, journal, resume=True)
    assert again.status == RunStatus.succeeded, again.reason
    assert again.steps[0].resumed and again.steps[1].status == Status.ok
    # Each fault landed once, over both runs.
    assert sorted(r["fault"] for r in _records(journal, "fault") if r["landed"]) == \
        sorted(planned)
    assert {f["fault"] for f in again.faults} == set(planned)


def _state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def test_a_step_a_fault_killed_takes_no_later_fault_until_its_next_run() -> None:
    """Issue 57: a kill and a stop aimed at one step, 0.4 s apart. The kill lands; the killed
    process is a zombie until the executor reaps it — on a loaded machine, later than the
    stop's moment — and a zombie still takes a signal: the stop "landed" on a dead step.
    It waits for the step's next run. The clock is the test's; the process never reaped
    here is the zombie the loaded machine made."""
    now = [0.0]
    records: list[dict[str, Any]] = []

    def sleep(_: float) -> None:
        if threading.current_thread().name == "fault-injector":
            injector._closed.wait()  # its ticker ticks once: the test ticks from then on

    injector = FaultInjector(record=records.append, clock=lambda: now[0], sleep=sleep)
    kill = PlannedFault("f#1", FaultSignal.kill, STEP_TARGET, (("work", 0.5),), 0.1)
    stop = PlannedFault("f#2", FaultSignal.stop, STEP_TARGET, (("work", 0.9),), 0.1)
    step = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        injector.arm([kill, stop], {}, restart_after_s=0)
        injector.step_started("work")
        injector.child("work", step.pid)
        now[0] = 0.6
        injector._tick()
        for landed in injector._landed["work"]:
            landed.thread.join(30)
        # Killed, not reaped (SIGKILL is delivered asynchronously): a zombie, which still
        # takes a signal.
        assert wait_for(lambda: _state(step.pid) == "Z" or None, deadline_s=30,
                        interval_s=0.01)
        now[0] = 1.0
        injector._tick()
        assert [(r["fault"], r["landed"]) for r in records if r["type"] == "fault"] == \
            [("f#1", True)]
        injector.step_ended("work", completed=False)
        assert injector.armed == [stop]  # for the step's next run
    finally:
        injector.close()
        step.kill()
        step.wait(30)


def test_a_fault_window_names_later_steps_and_known_signals() -> None:
    with pytest.raises(RunbookInvalid) as err:
        load("""
            steps:
              - name: early
                pause: 1s
              - name: faults
                fault:
                  count: 1
                  signals: [kill, nap]
                  window: [early, {step: late, nope: 1}]
              - name: late
                pause: 1s
        """)
    text = str(err.value)
    assert "'early' is not a step after this one" in text
    assert "'nap' is not one of kill, stop, term" in text
    assert "unknown key 'nope'" in text


def test_a_plan_shows_the_faults_without_landing_any(tmp_path: Path) -> None:
    commands = _sleeper(tmp_path)
    result = run(f"""
        steps:
          - name: faults
            fault:
              count: 3
              seed: 5
              window: [work]
              commands:
                server:
{_commands_yaml(commands, 18)}
          - name: work
            pause: 1s
    """, dry_run=True)
    events = _stop_sleeper(tmp_path)
    assert events == ["started"]
    [faults, _] = result.steps
    assert faults.status == Status.ok and len(faults.faults or []) == 3
    assert (faults.detail or "").startswith("3 fault(s): ")
    assert result.faults == []


def test_unknown_targets_are_named() -> None:
    result = run("""
        steps:
          - name: faults
            fault:
              count: 1
              window: [work]
              targets: [broker-9]
          - name: work
            pause: 0.1s
    """, **{"time_scale": 0.0})
    [faults, _] = result.steps
    assert faults.status == Status.failed
    assert "no target named broker-9" in (faults.error or "")



def test_what_a_fault_left_broken_is_healed_before_a_run_again(tmp_path: Path) -> None:
    """A server whose heal failed (or never ran: the run ended first) is started again before
    the campaign resumes; one seen back, or the step itself, is left alone."""
    commands = _sleeper(tmp_path)
    os.system(commands["kill"])
    faults = {"f#1": {"landed": True, "target": "server", "healed": {"how": "not healed"}},
              "f#2": {"landed": True, "target": "step"},
              "f#3": {"landed": False, "target": "server"}}
    assert heal_left_broken(faults, [{"commands": {"server": commands}}]) == ["server"]
    assert os.system(commands["running"]) == 0
    # Back: nothing to do.
    assert heal_left_broken(faults, [{"commands": {"server": commands}}]) == []
    assert _stop_sleeper(tmp_path) == ["started", "killed", "started"]
