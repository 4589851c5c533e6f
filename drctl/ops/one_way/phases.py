"""How long a failover, failback or return to protection took, by phase: the one timer of
`ops/` (`PhaseClock`) and the incident's timing across runs (`command_timing`).

Time is measured from the command's start, so detection (noticing the outage, deciding to
fail over) is excluded. A phase lasts until the next one begins: phases never overlap and add
up to the run, waits for the operator included (they are part of the recovery too).

A run records itself in the failover marker (`FailoverMarker.timings`, one entry per run,
replaced in place on every phase change, never appended twice), so a re-run after a crash
states what *its* phases took and still shows the earlier runs; the incident's elapsed time
runs from the first run's start to the end of the run that finished the command. Re-runs of
a command already finished are listed but never counted.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from drctl.timeparse import format_duration

Run = dict[str, Any]  # one run as the marker keeps it (PhaseClock.as_run)


class PhaseClock:
    """One command run's phases, from the command's start."""

    def __init__(self, command: str, *, clock: Callable[[], float] = time.monotonic,
                 wall: Callable[[], float] = time.time) -> None:
        self.command = command
        self._clock = clock
        self._t0 = clock()
        self.started_ms = int(wall() * 1000)
        self.run_id = f"{command}-{self.started_ms}-{secrets.token_hex(2)}"
        self._phases: list[list[Any]] = []  # [name, start_s, seconds or None while running]
        self._end_s: float | None = None
        self.finished = False  # this run finished the command
        self._kept_in: list[Run] | None = None

    def _now_s(self) -> float:
        return self._clock() - self._t0

    def _close_current(self, at_s: float) -> None:
        if self._phases and self._phases[-1][2] is None:
            self._phases[-1][2] = at_s - self._phases[-1][1]

    def phase(self, name: str) -> None:
        """The current phase ends and `name` begins (a phase already running goes on)."""
        if self._end_s is not None:
            raise RuntimeError(f"the {self.command} clock is stopped")
        if self._phases and self._phases[-1][0] == name and self._phases[-1][2] is None:
            return
        at = self._now_s()
        self._close_current(at)
        self._phases.append([name, at, None])
        self._update_kept()

    def stop(self, *, finished: bool = False) -> None:
        """The run ends (idempotent); `finished`: it finished the command."""
        if self._end_s is None:
            self._end_s = self._now_s()
            self._close_current(self._end_s)
        self.finished = self.finished or finished
        self._update_kept()

    @property
    def total_s(self) -> float:
        return self._end_s if self._end_s is not None else self._now_s()

    @property
    def phases_s(self) -> dict[str, float]:
        """Seconds per phase of this run, the running one measured to now."""
        now = self.total_s
        out: dict[str, float] = {}
        for name, start, seconds in self._phases:
            took = (now - start) if seconds is None else seconds
            out[name] = round(out.get(name, 0.0) + took, 3)
        return out

    def as_run(self) -> Run:
        now = self.total_s
        return {"run_id": self.run_id, "command": self.command,
                "started_at": _iso(self.started_ms), "started_ms": self.started_ms,
                "phases": [{"phase": name, "start_s": round(start, 3),
                            "seconds": round((now - start) if seconds is None else seconds, 3),
                            "running": seconds is None and self._end_s is None}
                           for name, start, seconds in self._phases],
                "total_s": round(now, 3), "finished": self.finished,
                "ended": self._end_s is not None}

    def keep_in(self, runs: list[Run]) -> None:
        """Record this run in `runs` (a marker's `timings`), replacing the copy an earlier
        save or a reloaded marker holds; kept up to date on every phase change."""
        self._kept_in = runs
        self._update_kept()

    def _update_kept(self) -> None:
        if self._kept_in is None:
            return
        run = self.as_run()
        for i, earlier in enumerate(self._kept_in):
            if earlier.get("run_id") == self.run_id:
                self._kept_in[i] = run
                return
        self._kept_in.append(run)

    def timing(self, runs: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
        """This run and the earlier ones of the same command in `runs` (command_timing)."""
        return command_timing(runs, self.command, self.as_run())


def command_timing(runs: Sequence[Mapping[str, Any]], command: str,
                   this_run: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The timing of `command` over an incident's runs (a marker's `timings`), plain data:

    - `this_run`: the phases of this run (None when the caller did not run it);
    - `earlier_runs`: the other runs of the command, oldest first;
    - `runs`, `busy_s`: how many runs count, and how long they ran in all — the runs up to
      the first that finished the command (later re-runs of a finished command do not count);
    - `elapsed_s` (and `elapsed`, as people read it): from the first counted run's start to
      the end of the last one (the gap between a crash and its re-run included: the outage
      lasted through it);
    - `finished`: a counted run finished the command (else `elapsed_s` is so far).
    """
    mine = {str(r.get("run_id")): dict(r) for r in runs if r.get("command") == command}
    if this_run is not None:
        mine[str(this_run.get("run_id"))] = dict(this_run)
    ordered = sorted(mine.values(), key=lambda r: int(r.get("started_ms") or 0))
    counted: list[dict[str, Any]] = []
    for run in ordered:
        counted.append(run)
        if run.get("finished"):
            break
    finished = bool(counted) and bool(counted[-1].get("finished"))
    elapsed = None
    if counted:
        first, last = counted[0], counted[-1]
        end_ms = int(last["started_ms"]) + float(last.get("total_s") or 0.0) * 1000
        elapsed = round((end_ms - int(first["started_ms"])) / 1000, 3)
    this_id = None if this_run is None else this_run.get("run_id")
    return {"command": command, "this_run": None if this_run is None else dict(this_run),
            "earlier_runs": [r for r in ordered if r.get("run_id") != this_id],
            "runs": len(counted),
            "busy_s": round(sum(float(r.get("total_s") or 0.0) for r in counted), 3),
            "elapsed_s": elapsed,
            "elapsed": None if elapsed is None else format_duration(elapsed),
            "finished": finished}


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="seconds").replace(
        "+00:00", "Z")


def where_now(state_dir: Path) -> dict[str, Any]:
    """Where the operation running now stands, from the newest open failover marker in the
    local state directory: the incident, the last step it recorded and, when its newest run
    has not ended, the phase it is in (a marker is saved at every step, so the phase is as of
    that save). None for what no open marker says yet (a failover before it recorded one).
    What a drill's fault record says of where it landed."""
    import json

    newest: dict[str, Any] = {}
    for path in (state_dir / "markers").glob("*.json"):
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if data.get("status") == "open" and \
                str(data.get("updated_at")) > str(newest.get("updated_at", "")):
            newest = data
    steps = newest.get("steps") or {}
    last = max(steps.items(), key=lambda kv: str(kv[1].get("at", "")), default=(None, None))[0]
    runs = sorted(newest.get("timings") or [], key=lambda r: int(r.get("started_ms") or 0))
    phase = None
    if runs and runs[-1].get("phases") and not runs[-1].get("ended"):
        phase = f"{runs[-1].get('command')}:{runs[-1]['phases'][-1]['phase']}"
    return {"incident": newest.get("incident"), "marker_step": last, "phase": phase}
