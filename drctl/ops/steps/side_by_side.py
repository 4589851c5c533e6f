"""Incidents side by side (docs/design.md §6): which incidents of one flow may be open at once,
and what a step of one may do to what they share — the forward connectors, their configs, and
the record of open incidents.

How a new failover meets each open incident of the flow (`meet`, `scope_among_open`):

| new failover of | open incident of          | the new failover is                                |
|-----------------|---------------------------|----------------------------------------------------|
| a scope         | the same scope            | its continuation (refused once that one's failback |
|                 |                           | began: finish it, or --new-incident)               |
| an application  | another application,      | opened beside it                                   |
|                 | disjoint                  |                                                    |
| an application  | another application,      | refused, both named                                |
|                 | sharing a topic or group  |                                                    |
| an application  | the whole flow            | refused, both named: the application is inside it  |
|                 |                           | and fails back and returns with it                 |
| the whole flow  | applications              | opened for the rest of the flow: their topics and  |
|                 |                           | groups left out, they return through their own     |

What a step may do while other incidents are open:
- An application's incident writes entries into the forward connectors' lists and records
  them (`ListEdit`) before writing; its return takes out exactly those, keeping any another
  open incident needs (`others_edits`). A new incident that supersedes one keeps its entries
  and adds those its application's topics take now (`leave_out`, `left_out`).
- A whole-flow incident stops every forward connector at its failover and holds them stopped
  until its return resumes them (`forward_holder`): no other incident's step resumes them
  meanwhile. An application's return inside it sets its start, takes its entries out and
  waits; the whole flow's return checks their cut-overs as its own, resumes the connectors
  and finishes the returns that waited (`waiting_for`).
- Resuming the forward flow with names kept never meets a reverse flow copying the same
  topics: an open incident whose reverse flow may run must still be left out (`cycles`).
- A step that stops a shared connector for a moment resumes it (replication/connect.py
  `paused`); a crash in between is repaired by the next step under the flow's lock
  (ops/flow_lock.py).
- Each incident has its own reverse connector; no step retires another's.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from enum import StrEnum

from drctl.config import NameFilter, Scope
from drctl.context import OpsContext
from drctl.errors import CheckFailed, Unreachable, UsageError
from drctl.flow_lock import Hold
from drctl.ops.steps.scope import flow_part, marker_groups
from drctl.replication.base import Confirm, FlowPart, FlowState, StopOutcome
from drctl.replication.edits import ListEdit, merge_edits
from drctl.state import FailoverMarker

# The reprotect step an application's return records as waiting while a whole-flow incident
# holds the forward flow stopped (status "waiting", result {"held_by": incident}).
RESUMED_STEP = "reprotect:forward-resumed"
WAITING = "waiting"


@dataclass(frozen=True)
class Verdict:
    """A new failover meeting one open incident: how, and why (said when it is refused)."""

    meeting: Meeting
    why: str = ""


class Meeting(StrEnum):
    """How a new failover meets one open incident (the table in the module docstring)."""

    CONTINUES = "continues it"
    BESIDE = "opens beside it"
    NARROWED = "leaves its topics and groups out"
    REFUSED = "is refused"


def overlaps(scope: Scope, marker: FailoverMarker) -> list[str]:
    """What of an open incident's topics and groups `scope` covers too (empty: disjoint)."""
    other = marker.covers
    if scope.whole or other.whole:
        return [f"{'it' if other.whole else 'this failover'} covers the whole flow"]
    shared = [f"topic {t}" for t in sorted(marker.topics) if scope.covers_topic(t)]
    if scope.groups_given:
        shared += [f"group {g}" for g in marker_groups(marker) if scope.groups.matches(g)]
    return shared


def meet(scope: Scope, other: FailoverMarker) -> Verdict:
    """How a new failover of `scope` meets open incident `other`."""
    if other.covers.name == scope.name:
        return Verdict(Meeting.CONTINUES)
    if scope.whole:
        return Verdict(Meeting.NARROWED, "it returns through its own failback and return")
    if other.covers.whole:
        return Verdict(Meeting.REFUSED, f"{scope.describe()} is inside it: it fails back and "
                                        "returns with it")
    shared = overlaps(scope, other)
    if shared:
        return Verdict(Meeting.REFUSED, "both cover " + ", ".join(shared[:5]))
    return Verdict(Meeting.BESIDE)


def scope_among_open(scope: Scope, opened: Sequence[FailoverMarker]
                     ) -> tuple[Scope, list[FailoverMarker]]:
    """The scope a new incident takes among the flow's open ones, and the open ones of the
    same scope (which it may continue). A refusal names both incidents (exit 2)."""
    same: list[FailoverMarker] = []
    held: list[FailoverMarker] = []
    for m in opened:
        verdict = meet(scope, m)
        if verdict.meeting is Meeting.CONTINUES:
            same.append(m)
        elif verdict.meeting is Meeting.NARROWED:
            held.append(m)
        elif verdict.meeting is Meeting.REFUSED:
            raise UsageError(
                f"{scope.describe().capitalize()} cannot fail over beside open incident "
                f"{m.incident} ({m.covers.describe()}, {m.phase}): {verdict.why}.",
                "Scopes of open incidents never overlap: finish that incident first "
                f"(`{m.phase.next_command} --incident {m.incident}`)"
                + ("." if m.covers.whole else ", or narrow the application's topics and "
                                              "groups."))
    if not held:
        return scope, same
    topics = tuple(re.escape(t) for m in held for t in sorted(m.topics))
    groups = tuple(re.escape(g) for m in held for g in marker_groups(m))
    return Scope(scope.name, NameFilter(scope.topics.include, scope.topics.exclude + topics),
                 NameFilter(scope.groups.include, scope.groups.exclude + groups)), same


def holds_forward(marker: FailoverMarker) -> bool:
    """An open whole-flow incident holds every forward connector stopped, from its failover
    until its return resumes them."""
    return marker.status == "open" and marker.covers.whole and not marker.done(RESUMED_STEP)


def forward_holder(opened: Sequence[FailoverMarker],
                   but: FailoverMarker | None = None) -> FailoverMarker | None:
    """The open incident other than `but` that holds the forward flow stopped, if any."""
    return next((m for m in opened if holds_forward(m)
                 and (but is None or m.incident != but.incident)), None)


def waiting_for(marker: FailoverMarker) -> str | None:
    """The incident an application's return waits for (its forward flow held stopped)."""
    rec = marker.steps.get(RESUMED_STEP)
    if rec is None or rec.status != WAITING:
        return None
    return str(rec.result.get("held_by") or "") or None


def edits_of(marker: FailoverMarker) -> list[ListEdit]:
    """The entries an incident recorded writing into the forward connectors."""
    return [ListEdit.from_dict(e) for e in marker.edits]


def others_edits(opened: Sequence[FailoverMarker], but: FailoverMarker) -> list[ListEdit]:
    """What every other open incident wrote into the forward connectors."""
    return [e for m in opened if m.incident != but.incident for e in edits_of(m)]


def legacy_edits(ctx: OpsContext, marker: FailoverMarker) -> list[ListEdit]:
    """An application's incident opened by a drctl that did not record its entries: those
    its scope implies, as it wrote them then (every one taken out at the return)."""
    part = flow_part(marker)
    if part is None or marker.edits or not marker.done("stop-replication"):
        return []
    return [ListEdit(name, key, tuple(entries), tuple(entries))
            for name, keys in ctx.require_kind().exclusions(ctx.rep, part).items()
            for key, entries in keys.items()]


def recorded_edits(ctx: OpsContext, marker: FailoverMarker) -> list[ListEdit]:
    return edits_of(marker) or legacy_edits(ctx, marker)


def leave_out(ctx: OpsContext, marker: FailoverMarker, part: FlowPart,
              opened: Sequence[FailoverMarker], confirm: Confirm | None = None
              ) -> StopOutcome:
    """An application's stop: the entries it recorded (on a re-run its own; a new incident
    those of the one it superseded) kept, with those its part's topics and groups take now
    planned against the connectors — a topic the application gained since is left out too —
    recorded in its marker, then written: the rest of the flow pauses for seconds per
    connector. By hand when drctl cannot write them."""
    rep, kind = ctx.rep, ctx.require_kind()
    recorded = edits_of(marker)
    try:
        planned = kind.plan_leave_out(rep, part, others_edits(opened, marker))
    except Unreachable:
        if not recorded:
            raise
        planned = []  # Connect is silent: what was recorded is written once it answers
    if planned is None and not recorded:
        return kind.stop_forward(rep, confirm=confirm, part=part)
    edits = merge_edits(recorded, planned or [])
    if edits != recorded:
        marker.edits = [e.as_dict() for e in edits]
        ctx.store.save(marker)  # recorded before written: a crash in between is re-applied
    connectors = sorted({e.connector for e in edits})
    try:
        kind.write_edits(rep, edits, notify=ctx.notify)
    except Unreachable:
        return StopOutcome("pending", connectors,
                           f"Kafka Connect at {rep.connect.url} is unreachable")
    return StopOutcome("stopped", connectors, f"{part.name} left out ("
                       + "; ".join(e.describe() for e in edits) + ")")


def take_back(ctx: OpsContext, marker: FailoverMarker,
              opened: Sequence[FailoverMarker]) -> list[str]:
    """An application's return: exactly the entries it wrote taken out of the connectors,
    but those another open incident needs; each connector left running or stopped as it
    was. The connectors changed."""
    edits = recorded_edits(ctx, marker)
    if not edits:
        return []
    part = flow_part(marker)
    ctx.notify(f"Taking {part.name if part else marker.incident} back into "
               + ", ".join(sorted({e.connector for e in edits})))
    return ctx.require_kind().write_edits(ctx.rep, edits, undo=True,
                                          others=others_edits(opened, marker),
                                          notify=ctx.notify)


def cycles(ctx: OpsContext, opened: Sequence[FailoverMarker],
           but: FailoverMarker) -> list[FailoverMarker]:
    """With names kept: the other open incidents whose reverse flow may copy while their
    part is no longer left out of the forward flow — resuming it would form a cycle."""
    if not ctx.rep.names_kept:
        return []
    return [m for m in opened if m.incident != but.incident and reverse_may_run(m)
            and not m.covers.whole and left_out(ctx, m) is False]


def left_out(ctx: OpsContext, marker: FailoverMarker) -> bool | None:
    """Whether an application's part is left out of the forward connectors now: every entry
    it recorded there, and each of its topics among them (None: cannot be told)."""
    return ctx.require_kind().edits_hold(ctx.rep, recorded_edits(ctx, marker),
                                         flow_part(marker))


def reverse_may_run(marker: FailoverMarker) -> bool:
    """From its failback until its return retired it, an incident's reverse flow may copy."""
    return marker.failback_started and not marker.done("reprotect:reverse-retired")


def resume_when_free(ctx: OpsContext, marker: FailoverMarker,
                     opened: Sequence[FailoverMarker],
                     confirm: Confirm | None = None) -> FlowState | FailoverMarker:
    """The forward flow resumed — unless another open incident holds it stopped: then that
    incident, which resumes it at its own return. Refused (exit 3, both named) when an open
    incident's reverse flow would form a cycle with it."""
    holder = forward_holder(opened, but=marker)
    if holder is not None:
        return holder
    looping = cycles(ctx, opened, marker)
    if looping:
        names = ", ".join(f"{m.incident} ({m.covers.describe()}, {m.phase})" for m in looping)
        raise CheckFailed(
            f"Resuming forward replication for incident {marker.incident} would copy what the "
            f"reverse flow of {names} copies back: with topic names kept the two form a cycle "
            "(its topics are no longer left out of the forward connectors).",
            "Run `drctl failover --incident ID` for that incident: it leaves its topics out "
            "again; then run this command again.")
    return ctx.require_kind().resume_forward(ctx.rep, ctx.notify, confirm, flow_part(marker))


@contextmanager
def flow_locked(ctx: OpsContext, what: str) -> Iterator[Hold]:
    """The flow's lock around a step; first, what an earlier holder left stopped (it died
    between a stop and its resume, or its resume failed) runs again — unless an open
    whole-flow incident holds the forward flow stopped, which resumes it itself."""
    with ctx.flow_lock(what).held() as hold:
        if hold.left:
            holder = forward_holder(ctx.store.open_markers(ctx.rep.source, ctx.rep.target))
            if holder is None:
                ctx.notify(f"{', '.join(hold.left)} stayed stopped after "
                           + (hold.taken_from.describe() if hold.taken_from else
                              "an earlier step") + " stopped it for a moment: resuming it")
                ctx.require_kind().resume_components(ctx.rep, hold.left, ctx.notify)
            hold.cleared()
        yield hold


def copying(ctx: OpsContext) -> list[str]:
    """The forward connectors that copy now: what a step that pauses them must resume."""
    return list(ctx.require_kind().forward_state(ctx.rep).copying)
