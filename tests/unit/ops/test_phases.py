"""The phase clock (ops/one_way/phases.py): phases from the command's start that add up to the run,
kept in the marker once per run, and an incident's timing across a crash and its re-run."""

from __future__ import annotations

from typing import Any

import pytest

from drctl.ops.one_way.phases import PhaseClock, command_timing
from drctl.state import FailoverMarker


class Ticks:
    """A monotonic clock and a wall clock that move only when told."""

    def __init__(self, wall_s: float = 1_700_000_000.0) -> None:
        self.mono = 100.0
        self.wall = wall_s

    def __call__(self) -> float:
        return self.mono

    def wall_clock(self) -> float:
        return self.wall

    def advance(self, seconds: float) -> None:
        self.mono += seconds
        self.wall += seconds


def _clock(ticks: Ticks, command: str = "failover") -> PhaseClock:
    return PhaseClock(command, clock=ticks, wall=ticks.wall_clock)


def test_phases_run_back_to_back_from_the_commands_start() -> None:
    ticks = Ticks()
    clock = _clock(ticks)
    ticks.advance(0.5)  # before the first phase: nothing is lost, it is just not a phase
    clock.phase("preflight")
    ticks.advance(2)
    clock.phase("stop-replication")
    ticks.advance(3)
    clock.phase("stop-replication")  # already running: goes on, no second entry
    ticks.advance(1)
    clock.phase("translate-offsets")
    ticks.advance(4)
    clock.stop(finished=True)
    ticks.advance(60)  # a stopped clock does not move
    run = clock.as_run()
    assert [(p["phase"], p["start_s"], p["seconds"]) for p in run["phases"]] == [
        ("preflight", 0.5, 2.0), ("stop-replication", 2.5, 4.0),
        ("translate-offsets", 6.5, 4.0)]
    assert run["total_s"] == 10.5 and run["finished"] and run["ended"]
    assert clock.phases_s == {"preflight": 2.0, "stop-replication": 4.0,
                              "translate-offsets": 4.0}
    with pytest.raises(RuntimeError):
        clock.phase("report")


def test_a_running_phase_is_measured_to_now_and_marked_running() -> None:
    ticks = Ticks()
    clock = _clock(ticks)
    clock.phase("preflight")
    ticks.advance(3)
    (phase,) = clock.as_run()["phases"]
    assert phase["seconds"] == 3.0 and phase["running"] is True
    assert clock.as_run()["ended"] is False and clock.total_s == 3.0


def test_a_run_is_kept_once_in_the_marker_even_when_the_marker_is_reloaded() -> None:
    ticks = Ticks()
    marker = FailoverMarker.new("a", "b", "mirrormaker2", planned=False)
    clock = _clock(ticks)
    clock.keep_in(marker.timings)
    clock.phase("preflight")
    ticks.advance(2)
    clock.phase("stop-replication")
    assert len(marker.timings) == 1
    # A re-run inside the same command (a cluster dropped) reads the marker back.
    again = FailoverMarker.from_json(marker.to_json())
    clock.keep_in(again.timings)
    ticks.advance(1)
    clock.stop(finished=True)
    assert len(again.timings) == 1
    assert again.timings[0]["total_s"] == 3.0 and again.timings[0]["finished"]


def _run(run_id: str, started_s: float, total_s: float, finished: bool,
         command: str = "failover") -> dict[str, Any]:
    return {"run_id": run_id, "command": command, "started_ms": int(started_s * 1000),
            "phases": [], "total_s": total_s, "finished": finished}


def test_a_rerun_after_a_crash_counts_both_runs_once_and_the_gap_between() -> None:
    crashed = _run("r1", 1000, 30, False)
    rerun = _run("r2", 1600, 20, True)
    later = _run("r3", 9000, 5, True)  # a re-run of a finished failover: listed, not counted
    other = _run("fb", 2000, 99, True, command="failback")
    timing = command_timing([crashed, other, later], "failover", rerun)
    assert timing["this_run"]["run_id"] == "r2"
    assert [r["run_id"] for r in timing["earlier_runs"]] == ["r1", "r3"]
    assert timing["runs"] == 2 and timing["busy_s"] == 50.0
    assert timing["elapsed_s"] == 620.0 and timing["finished"] is True
    # The same run found in the marker and given as this run is one run, not two.
    assert command_timing([crashed, rerun], "failover", rerun)["busy_s"] == 50.0


def test_an_unfinished_command_has_its_time_so_far() -> None:
    timing = command_timing([_run("r1", 1000, 30, False)], "failover")
    assert timing["this_run"] is None and timing["finished"] is False
    assert timing["elapsed_s"] == 30.0
    assert command_timing([], "failback")["elapsed_s"] is None


def test_where_a_fault_landed_is_read_from_the_newest_open_marker(tmp_path) -> None:
    import json

    from drctl.ops.one_way.phases import where_now

    markers = tmp_path / "markers"
    markers.mkdir()
    assert where_now(tmp_path) == {"incident": None, "marker_step": None, "phase": None}

    def write(name: str, status: str, updated: str, ended: bool) -> None:
        (markers / f"{name}.json").write_text(json.dumps({
            "incident": name, "status": status, "updated_at": updated,
            "steps": {"preflight": {"at": "1"}, "failback:gap": {"at": "2"}},
            "timings": [{"command": "failback", "started_ms": 5, "ended": ended,
                         "phases": [{"phase": "preflight"}, {"phase": "gap"}]}]}))

    write("old-closed", "closed", "2026-01-02", True)  # newer, but the incident is over
    write("open", "open", "2026-01-01", False)
    assert where_now(tmp_path) == {"incident": "open", "marker_step": "failback:gap",
                                   "phase": "failback:gap"}
    write("open", "open", "2026-01-01", True)  # its run ended: no phase runs now
    assert where_now(tmp_path)["phase"] is None
