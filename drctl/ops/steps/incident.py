"""Which incident a failover works on (docs/design.md §6, "Incidents side by side"): the open
incident of its flow it continues, a new one, or a new one that closes the open ones as
superseded (`--new-incident`). Both topologies ask it: a one-way failover of a flow and a
region's failover in an active-active pair (whose incidents are the flow out of the region's).

A failover continues an incident only while it is failing over or failed over, and only one
younger than `--continue-within` without `--incident`: an old open incident is most likely a
new outage, and continuing it would reuse its failover point.
"""

from __future__ import annotations

from drctl.config import ReplicationSettings, Scope
from drctl.errors import UsageError
from drctl.ops.steps.failover_point import FailoverOptions
from drctl.ops.steps.side_by_side import scope_among_open
from drctl.state import FailoverMarker, MarkerStore
from drctl.timeparse import format_duration


def incident_to_continue(store: MarkerStore, rep: ReplicationSettings, opts: FailoverOptions,
                         scope: Scope | None = None
                         ) -> tuple[FailoverMarker, list[FailoverMarker]]:
    """The incident this failover works on, and the open ones `--new-incident` supersedes.

    A failover continues an incident only while it is failing over or failed over: once its
    failback began, a failover of it would reuse a failover point the post-failover writes
    and the reverse flow have long passed. Without `--incident` it continues the flow's open
    incident only when it is the only one and younger than `continue_within_s`; anything
    else is a usage error naming the incidents and what to do."""
    source, target = rep.source, rep.target
    if opts.new_incident and opts.incident:
        raise UsageError("--incident and --new-incident exclude each other.",
                         "Pass --incident ID to continue that incident, or --new-incident "
                         "to open a new one.")
    scope = scope or Scope()
    opened: list[FailoverMarker] = []
    if not opts.incident:
        # Incidents of other scopes are neither continued nor superseded (ops/steps/scope.py).
        scope, opened = scope_among_open(scope, store.open_markers(source, target))
    if opts.new_incident:
        return _new_marker(rep, opts, scope), opened
    if opts.incident:
        marker = store.get(opts.incident)
        if marker.status == "closed":
            raise UsageError(f"Incident {marker.incident} is closed.",
                             "Run failover without --incident to open a new one.")
        _refuse_if_failing_back(marker)
        return marker, []
    if len(opened) > 1:
        names = ", ".join(f"{m.incident} ({m.phase}, opened {m.created_at})" for m in opened)
        raise UsageError(
            f"{len(opened)} open incidents for {source} -> {target}: {names}. drctl cannot "
            "tell which one this failover belongs to.",
            "Pass --incident ID to continue one of them, or --new-incident to close them "
            "all as superseded and open a new one.")
    if not opened:
        return _new_marker(rep, opts, scope), []
    marker = opened[0]
    _refuse_if_failing_back(marker)
    age = marker.age_s()
    if age > opts.continue_within_s:
        raise UsageError(
            f"Incident {marker.incident} ({marker.phase}) was opened {format_duration(age)} "
            f"ago, longer than the {format_duration(opts.continue_within_s)} within which a "
            "failover continues an open incident: this may be a new outage, and continuing "
            "would reuse the old failover point.",
            f"To continue it, pass --incident {marker.incident}; for a new outage, pass "
            "--new-incident (the old incident is closed as superseded).")
    return marker, []


def _new_marker(rep: ReplicationSettings, opts: FailoverOptions, scope: Scope
                ) -> FailoverMarker:
    marker = FailoverMarker.new(rep.source, rep.target, rep.kind, opts.planned)
    if scope != Scope():
        marker.scope = scope.as_dict()
    return marker


def _refuse_if_failing_back(marker: FailoverMarker) -> None:
    if marker.failback_started:
        nxt = marker.phase.next_command
        raise UsageError(
            f"Incident {marker.incident} is {marker.phase}: its failback has started, so a "
            "failover cannot continue it.",
            f"Finish it first (`{nxt}`), or pass --new-incident to close it as superseded "
            "and fail over anew (a new outage).")


