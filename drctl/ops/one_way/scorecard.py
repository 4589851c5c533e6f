"""The drill scorecard: what a failover, failback or return to protection took (RTO by phase,
ops/one_way/phases.py) and the RPO measured (ops/steps/rpo.py), against the config's `objectives`.

Plain data, carried under `scorecard` by the JSON of those commands and by their runbook
actions' results, from which a runbook run's report and JUnit build the run's scorecard. The RTO
objective is judged against the failover: from the start of its first run to the end of the run that
finished it (ops/one_way/phases.py `command_timing`'s `elapsed_s`); the RPO objective against the
RPO measured at the failover point.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any

from drctl.config import Objectives
from drctl.timeparse import format_duration


class Verdict(StrEnum):
    met = "met"
    missed = "missed"
    not_measured = "not-measured"  # an objective is set, nothing could be measured
    no_objective = "no-objective"


def judge(target_s: float | None, measured_s: float | None) -> Verdict:
    """An objective against what was measured (at most the objective is met)."""
    if target_s is None:
        return Verdict.no_objective
    if measured_s is None:
        return Verdict.not_measured
    return Verdict.met if measured_s <= target_s else Verdict.missed


def objective(name: str, target_s: float | None, measured_s: float | None,
              detail: str) -> dict[str, Any]:
    """One line of the scorecard."""
    verdict = judge(target_s, measured_s)
    return {"objective": name, "target_s": target_s,
            "target": None if target_s is None else format_duration(target_s),
            "measured_s": measured_s,
            "measured": None if measured_s is None else format_duration(measured_s),
            "verdict": verdict.value, "detail": detail}


def failover_scorecard(incident: str, objectives: Objectives, timing: Mapping[str, Any],
                       rpo: Mapping[str, Any] | None) -> dict[str, Any]:
    """A failover's scorecard: its timing and RPO, and both objectives judged."""
    elapsed = timing.get("elapsed_s") if timing.get("finished") else None
    runs = int(timing.get("runs") or 0)
    if elapsed is None:
        rto_detail = "the failover has not finished"
    else:
        rto_detail = (f"failover took {format_duration(elapsed)} from its command's start"
                      + (f" over {runs} runs" if runs > 1 else ""))
    rpo_s = None if not rpo else rpo.get("seconds")
    rpo_detail = rpo["text"] if rpo else "not measured (the failover point was not taken)"
    return {"operation": "failover", "incident": incident, "timing": dict(timing),
            "rpo": None if rpo is None else dict(rpo),
            "objectives": [objective("rto", objectives.rto_s, elapsed, rto_detail),
                           objective("rpo", objectives.rpo_s, rpo_s, rpo_detail)]}


def operation_scorecard(operation: str, incident: str,
                        timing: Mapping[str, Any]) -> dict[str, Any]:
    """The scorecard of a failback or a return to protection: its timing (no objective)."""
    return {"operation": operation, "incident": incident, "timing": dict(timing), "rpo": None,
            "objectives": []}


def describe(scorecard: Mapping[str, Any]) -> list[str]:
    """The scorecard in a few lines, for the operator's terminal (stderr)."""
    lines = []
    timing = scorecard.get("timing") or {}
    this = timing.get("this_run")
    if this and this.get("phases"):
        lines.append(f"This {scorecard['operation']} run took "
                     f"{format_duration(this['total_s'])}: " + ", ".join(
                         f"{p['phase']} {format_duration(p['seconds'])}"
                         for p in this["phases"]))
    earlier = timing.get("earlier_runs") or []
    if earlier and timing.get("elapsed_s") is not None:
        lines.append(f"With {len(earlier)} earlier run(s): "
                     f"{format_duration(timing['elapsed_s'])} since the first run's start, "
                     f"{format_duration(timing['busy_s'])} of it running.")
    rpo = scorecard.get("rpo")
    if rpo:
        lines.append(f"RPO: {rpo['text']}.")
    for o in scorecard.get("objectives", []):
        if o["verdict"] != Verdict.no_objective:
            lines.append(f"Objective {o['objective'].upper()} {o['target']}: "
                         f"{o['verdict'].replace('-', ' ')} ({o['detail']}).")
    return lines
