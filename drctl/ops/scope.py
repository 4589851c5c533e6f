"""Incident scope (docs/design.md §6): an incident covers the whole flow or one application —
a set of topics and the groups that read them — and changes nothing outside it.

Decided here, in one place: which open incidents a new one meets (the same scope continues,
an overlapping one is refused with both named, a whole-flow failover leaves out what open
applications' incidents hold); the part of the flow an application's incident stops and
restarts (`FlowPart`, resolved from its marker); and the groups that read topics on both sides
of a scope's edge, named before anything moves.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from drctl.config import NameFilter, Scope
from drctl.context import OpsContext
from drctl.errors import UsageError
from drctl.kafka.topics import TP
from drctl.replication.base import FlowPart
from drctl.state import FailoverMarker


def marker_groups(marker: FailoverMarker) -> list[str]:
    """The groups an incident moved (or, for an application that names them, covers)."""
    return sorted(marker.groups)


def overlaps(scope: Scope, marker: FailoverMarker) -> list[str]:
    """What of an open incident's topics and groups `scope` covers too (empty: disjoint)."""
    other = marker.covers
    if scope.whole or other.whole:
        return [f"{'it' if other.whole else 'this failover'} covers the whole flow"]
    shared = [f"topic {t}" for t in sorted(marker.topics) if scope.covers_topic(t)]
    if scope.groups_given:
        shared += [f"group {g}" for g in marker_groups(marker) if scope.groups.matches(g)]
    return shared


def scope_among_open(scope: Scope, opened: Sequence[FailoverMarker]
                     ) -> tuple[Scope, list[FailoverMarker]]:
    """The scope a new incident takes among the flow's open ones, and the open ones of the
    same scope (which it may continue). An application's incident that overlaps another open
    one is refused, both named; a whole-flow incident leaves out the topics and groups open
    applications' incidents hold (they return through their own failback)."""
    same = [m for m in opened if m.covers.name == scope.name]
    others = [m for m in opened if m.covers.name != scope.name]
    if scope.whole:
        held = [m for m in others if not m.covers.whole]
        if not held:
            return scope, same
        topics = tuple(re.escape(t) for m in held for t in sorted(m.topics))
        groups = tuple(re.escape(g) for m in held for g in marker_groups(m))
        return Scope(scope.name, NameFilter(scope.topics.include, scope.topics.exclude + topics),
                     NameFilter(scope.groups.include, scope.groups.exclude + groups)), same
    for m in others:
        shared = overlaps(scope, m)
        if shared:
            raise UsageError(
                f"{scope.describe().capitalize()} overlaps open incident {m.incident} "
                f"({m.covers.describe()}, {m.phase}): {', '.join(shared[:5])}.",
                "Scopes of open incidents never overlap: finish that incident first, or "
                "narrow the application's topics and groups.")
    return scope, same


def flow_part(marker: FailoverMarker) -> FlowPart | None:
    """The part of the flow an application's incident stopped (its topics, and its groups
    when the application names them); None for the whole flow."""
    scope = marker.covers
    if scope.whole:
        return None
    groups = tuple(marker_groups(marker)) if scope.groups_given else ()
    return FlowPart(scope.name, tuple(sorted(marker.topics)), groups)


@dataclass(frozen=True)
class Straddler:
    """A group that reads topics on both sides of a scope's edge."""

    group: str
    inside: tuple[str, ...]  # the scope's topics it reads
    outside: tuple[str, ...]  # the flow's topics outside the scope it reads

    def describe(self) -> str:
        return (f"group {self.group} reads {', '.join(self.inside)} (in the scope) and "
                f"{', '.join(self.outside)} (outside it)")

    def as_dict(self) -> dict[str, object]:
        return {"group": self.group, "inside": list(self.inside), "outside": list(self.outside)}


def straddlers(scope: Scope, commits: Mapping[str, Iterable[TP]],
               in_flow: Mapping[str, bool] | None = None) -> list[Straddler]:
    """The groups among `commits` (group -> the partitions it committed on) that read topics
    on both sides of `scope`'s edge: one of the scope's groups reading a topic outside it, or
    another group reading one of its topics. `in_flow` says which topics the flow replicates
    (a topic it does not is on neither side)."""
    if scope.whole:
        return []
    out = []
    for group, tps in sorted(commits.items()):
        topics = sorted({t for t, _ in tps if (in_flow or {}).get(t, True)})
        inside = tuple(t for t in topics if scope.covers_topic(t))
        outside = tuple(t for t in topics if not scope.covers_topic(t))
        member = scope.groups.matches(group) if scope.groups_given else bool(inside)
        if (member and outside) or (not member and inside):
            out.append(Straddler(group, inside, outside))
    return out


def the_open_incident(ctx: OpsContext, incident: str | None, what: str) -> FailoverMarker:
    """`incident`, or the open incident of the command's scope (`--app`), or the flow's one
    open incident; the context takes the incident's scope from then on."""
    rep = ctx.rep
    store = ctx.markers(rep.target)
    if incident or ctx.scope.whole:
        marker = store.the_open_one(rep.source, rep.target, incident, what)
    else:
        mine = [m for m in store.open_markers(rep.source, rep.target)
                if m.covers.name == ctx.scope.name]
        if len(mine) != 1:
            names = ", ".join(f"{m.incident} ({m.phase})" for m in mine)
            raise UsageError(
                f"{len(mine)} open incidents of {ctx.scope.describe()} to {what}"
                + (f": {names}." if mine else "."),
                "Pass --incident ID." if mine else "`drctl status` lists the incidents on "
                                                   "record.")
        marker = mine[0]
    ctx.scope = marker.covers
    return marker
