"""Incidents side by side (drctl/ops/steps/side_by_side.py): the combination table a new failover
meets, who holds the forward flow stopped, the returns that wait for it, and the entries other
open incidents wrote (kept at a return)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import pytest

from drctl.config import NameFilter, Scope, adhoc_scope
from drctl.context import OpsContext
from drctl.errors import CheckFailed, UsageError
from drctl.flow_lock import FileLog, LockRecord, replay
from drctl.ops.steps.side_by_side import (
    RESUMED_STEP,
    WAITING,
    Meeting,
    edits_of,
    flow_locked,
    forward_holder,
    holds_forward,
    meet,
    others_edits,
    overlaps,
    resume_when_free,
    scope_among_open,
    waiting_for,
)
from drctl.replication.base import ReplicationKind
from drctl.replication.edits import ListEdit
from drctl.state import MarkerStore
from tests.unit.ops.support import _config
from tests.unit.ops.support import open_incident as _open

BILLING = Scope("billing", NameFilter(("billing\\..*", "invoices")), NameFilter(("billing-.*",)))
ORDERS = Scope("orders", NameFilter(("orders",)))


def test_the_combination_table() -> None:
    billing = _open(BILLING, ["billing.eu", "invoices"], ("billing-app",))
    whole = _open(Scope(), ["orders"])
    greedy = Scope("greedy", NameFilter(("invoices", "orders")))
    rows = [(BILLING, billing, Meeting.CONTINUES),  # the same scope: continued
            (ORDERS, billing, Meeting.BESIDE),  # disjoint applications
            (greedy, billing, Meeting.REFUSED),  # sharing a topic
            (ORDERS, whole, Meeting.REFUSED),  # an application inside an open whole flow
            (Scope(), billing, Meeting.NARROWED),  # the whole flow after an application
            (Scope(), whole, Meeting.CONTINUES)]
    assert [meet(new, other).meeting for new, other, _ in rows] == [want for *_, want in rows]
    assert meet(greedy, billing).why == "both cover topic invoices"
    assert "application orders is inside it" in meet(ORDERS, whole).why
    # Named groups overlap too; a scope without named groups shares only topics.
    named = Scope("named", NameFilter(("other",)), NameFilter(("billing-app",)))
    assert overlaps(named, billing) == ["group billing-app"]


def test_a_refusal_names_both_incidents_and_what_to_run() -> None:
    billing = _open(BILLING, ["billing.eu", "invoices"], ("billing-app",))
    with pytest.raises(UsageError) as caught:
        scope_among_open(Scope("greedy", NameFilter(("invoices",))), [billing])
    assert f"open incident {billing.incident} (application billing" in caught.value.message
    assert f"--incident {billing.incident}" in (caught.value.hint or "")
    whole = _open(Scope(), ["orders"])
    with pytest.raises(UsageError, match=f"{whole.incident} \\(the whole flow"):
        scope_among_open(ORDERS, [whole])
    # Two one-off scopes of other topics: opened side by side, neither continues the other.
    a, b = adhoc_scope(["A-.*"], []), adhoc_scope(["B-.*"], [])
    assert scope_among_open(b, [_open(a, ["A-1"])]) == (b, [])
    with pytest.raises(UsageError, match="both cover topic A-1"):
        scope_among_open(adhoc_scope(["A-1"], []), [_open(a, ["A-1"])])


def test_a_whole_flow_failover_leaves_out_what_open_applications_hold() -> None:
    billing = _open(BILLING, ["billing.eu", "invoices"], ("billing-app",))
    scope, same = scope_among_open(Scope(), [billing])
    assert scope.whole and same == []
    assert not scope.covers_topic("invoices") and not scope.covers_topic("billing.eu")
    assert scope.covers_topic("orders") and scope.covers_topic("billing.us")
    assert not scope.covers_group("billing-app") and scope.covers_group("orders-app")


def test_a_whole_flow_incident_holds_the_forward_flow_until_its_return_resumes_it() -> None:
    billing = _open(BILLING, ["invoices"])
    whole = _open(Scope(), ["orders"])
    assert holds_forward(whole) and not holds_forward(billing)
    assert forward_holder([billing, whole], but=billing) is whole
    assert forward_holder([billing, whole], but=whole) is None
    # Its return resumed the flow: no longer held, though the incident is still open.
    whole.record("reprotect:forward-start", {})
    assert forward_holder([billing, whole]) is whole
    whole.record(RESUMED_STEP, {})
    assert forward_holder([billing, whole]) is None
    closed = _open(Scope(), ["orders"])
    closed.status = "closed"
    assert not holds_forward(closed)


def test_a_return_waits_for_the_incident_holding_the_flow() -> None:
    billing = _open(BILLING, ["invoices"])
    assert waiting_for(billing) is None
    billing.record(RESUMED_STEP, {"held_by": "fo-whole"}, status=WAITING)
    assert waiting_for(billing) == "fo-whole" and not billing.done(RESUMED_STEP)
    billing.record(RESUMED_STEP, {"components": {}})
    assert waiting_for(billing) is None and billing.done(RESUMED_STEP)


def test_what_other_open_incidents_wrote_is_theirs() -> None:
    billing, orders = _open(BILLING, ["invoices"]), _open(ORDERS, ["orders"])
    mine = ListEdit("src", "topics.exclude", ("invoices",), ("invoices",))
    theirs = ListEdit("src", "topics.exclude", ("orders",), ("orders",), seed=("d",))
    billing.edits, orders.edits = [mine.as_dict()], [theirs.as_dict()]
    assert edits_of(billing) == [mine]
    assert others_edits([billing, orders], but=billing) == [theirs]
    assert others_edits([billing, orders], but=orders) == [mine]


def test_a_reverse_flow_may_run_from_failback_until_the_return_retires_it() -> None:
    from drctl.ops.steps.side_by_side import reverse_may_run

    m = _open(BILLING, ["invoices"])
    assert not reverse_may_run(m)
    m.record("failback:reverse-replication", {})
    assert reverse_may_run(m)
    m.record("failback", {})
    m.record("reprotect:quiet", {})
    assert reverse_may_run(m)
    m.record("reprotect:reverse-retired", {})
    assert not reverse_may_run(m)


class _Kind:
    """The few things side_by_side asks of a replication kind, from memory."""

    def __init__(self, holds: bool | None = True) -> None:
        self.holds = holds
        self.resumed: list[list[str]] = []

    def edits_hold(self, rep: object, edits: object, part: object = None) -> bool | None:
        return self.holds

    def resume_components(self, rep: object, names: Sequence[str], notify: object) -> None:
        self.resumed.append(list(names))

    def resume_forward(self, *_: object) -> str:
        return "resumed"

    def exclusions(self, *_: object) -> dict[str, dict[str, list[str]]]:
        return {}


def _ctx(store: MarkerStore, kind: _Kind) -> OpsContext:
    return OpsContext(_config(), _no_cluster, lambda cluster: store,
                      cast(ReplicationKind, kind))


def _no_cluster(name: str) -> Any:
    raise AssertionError(f"no cluster may be asked ({name})")


def _died_holding(log: FileLog, holder: str, journal: tuple[str, ...]) -> None:
    """A holder on another host that stopped `journal` for a moment and was never heard of
    again (a 1 ms lease: run out by the next claim)."""
    log.append(LockRecord("claim", holder, "drctl reprotect", "elsewhere", 1, 1))
    log.append(LockRecord("beat", holder, "drctl reprotect", "elsewhere", 1, 1, journal))
    time.sleep(0.01)


def test_a_step_under_the_lock_first_resumes_what_a_dead_holder_left_stopped(
        tmp_path: Path) -> None:
    """A holder that died between a stop and its resume left its journal; the next step
    resumes those connectors first — unless a whole-flow incident holds the flow stopped."""
    store = MarkerStore(tmp_path, "_drctl_state", None)
    kind = _Kind()
    ctx = _ctx(store, kind)
    log = FileLog(tmp_path / "locks" / "dc1-dc2.jsonl")
    _died_holding(log, "dead", ("src",))
    with flow_locked(ctx, "drctl failover"):
        assert kind.resumed == [["src"]]
    assert replay(log.read()).journal == ()
    # Left again, while a whole-flow incident holds the flow: not resumed, and forgotten.
    whole = _open(Scope(), ["orders"])
    whole.source, whole.target = "dc1", "dc2"
    store.save(whole)
    _died_holding(log, "dead2", ("src",))
    with flow_locked(ctx, "drctl failover"):
        assert kind.resumed == [["src"]]
    assert replay(log.read()).journal == ()


def test_resuming_is_refused_while_another_reverse_flow_would_loop(tmp_path: Path) -> None:
    store = MarkerStore(tmp_path, "_drctl_state", None)
    mine = _open(ORDERS, ["orders"])
    other = _open(BILLING, ["invoices"], steps=("failover", "failback:reverse-replication"))
    other.edits = [ListEdit("src", "topics.exclude", ("invoices",), ("invoices",)).as_dict()]
    # Its topics no longer left out while its reverse flow may run: a loop, both named.
    ctx = _ctx(store, _Kind(holds=False))
    with pytest.raises(CheckFailed, match=f"{mine.incident}.*{other.incident}"):
        resume_when_free(ctx, mine, [mine, other])
    # Still left out: resumed.
    assert resume_when_free(_ctx(store, _Kind(holds=True)), mine, [mine, other]) == "resumed"
    # Held by a whole-flow incident: that incident, not a resume.
    whole = _open(Scope(), ["orders"])
    assert resume_when_free(ctx, mine, [mine, whole]) is whole


def test_a_new_incident_leaves_out_what_its_application_gained_since_the_one_it_supersedes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`failover --new-incident` inherits the superseded incident's entries (failover.claim)
    and plans its own against the application's topics now: `billing.refunds`, created since,
    is left out too; the checks read the topics, not the inherited list; the return takes
    out exactly what both wrote."""
    from drctl.config import parse_config
    from drctl.ops.steps.side_by_side import leave_out, left_out, take_back
    from drctl.replication import connect, mirrormaker2
    from drctl.replication.base import FlowPart
    from drctl.replication.mirrormaker2 import MirrorMaker2
    from tests.unit.replication.test_shared_connectors import FakeConnect

    worker = FakeConnect({"src": {"topics": ".*"}, "cp": {"groups": ".*"}})
    for module in (connect, mirrormaker2):
        monkeypatch.setattr(module, "connect_client", lambda *_a, **_k: worker)
    before = {n: dict(c) for n, c in worker.configs.items()}
    config = parse_config({
        "clusters": {"a": {"bootstrap.servers": "x"}, "b": {"bootstrap.servers": "y"}},
        "replication": {"kind": "mirrormaker2", "source": "a", "target": "b",
                        "connect": {"url": "http://c:8083", "source_connector": "src",
                                    "checkpoint_connector": "cp"}},
        "state": {"dir": str(tmp_path)}})
    store = MarkerStore(tmp_path, "_drctl_state", None)
    ctx = OpsContext(config, _no_cluster, lambda cluster: store, MirrorMaker2())
    old = _open(BILLING, ["billing.eu"])
    leave_out(ctx, old, FlowPart("billing", ("billing.eu",)), [old])
    # The application gained billing.refunds; it replicates forward. A new outage:
    new = _open(BILLING, ["billing.eu", "billing.refunds"])
    new.edits = list(old.edits)  # what failover.claim carries over
    assert left_out(ctx, new) is False  # the inherited entries do not cover it
    leave_out(ctx, new, FlowPart("billing", ("billing.eu", "billing.refunds")), [new])
    excluded = worker.configs["src"]["topics.exclude"].split(",")
    assert {"billing\\.eu", "billing\\.refunds"} <= set(excluded), excluded
    assert left_out(ctx, new) is True
    assert [(e.connector, e.added) for e in edits_of(new)] == [
        ("src", ("billing\\.eu", "billing\\.refunds")),
        ("cp", ("billing\\.eu", "billing\\.refunds"))]
    assert store.get(new.incident).edits == new.edits  # recorded before written
    take_back(ctx, new, [new])
    assert worker.configs == before
