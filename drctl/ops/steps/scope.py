"""Incident scope (docs/design.md §6): an incident covers the whole flow or one application —
a set of topics and the groups that read them — and changes nothing outside it.

Decided here, in one place: the part of the flow an application's incident stops and restarts
(`FlowPart`, resolved from its marker); the groups that read topics on both sides of a scope's
edge, named before anything moves; and the open incident a command works on. How incidents of
several scopes meet is ops/steps/side_by_side.py's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from drctl.config import Scope
from drctl.context import OpsContext
from drctl.errors import UsageError
from drctl.kafka.topics import TP
from drctl.replication.base import FlowPart
from drctl.state import FailoverMarker


def marker_groups(marker: FailoverMarker) -> list[str]:
    """The groups an incident moved (or, for an application that names them, covers)."""
    return sorted(marker.groups)


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
