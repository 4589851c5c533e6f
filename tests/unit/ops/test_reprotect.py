"""The return to protection's pure parts: where forward copying starts (the walk over the
source's records after failback's comparison), with the retention and compaction rules of
drctl/ops/one_way/cut_over.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import pytest

from drctl.config import NameFilter, Scope
from drctl.context import OpsContext
from drctl.errors import CheckFailed, UsageError
from drctl.fingerprint import record_fingerprint
from drctl.kafka.records import Record
from drctl.ops.one_way import reprotect
from drctl.ops.one_way.cut_over import CUT_OVER_STEP, ExpectedCopy, Walked, walk_copies
from drctl.ops.one_way.reprotect import (
    ReprotectOptions,
    ReprotectResult,
    copies_already,
    marker_to_reprotect,
    waiting_checked,
)
from drctl.ops.steps.side_by_side import RESUMED_STEP, WAITING, waiting_for
from drctl.replication.base import FlowState, ReplicationKind
from drctl.replication.edits import ListEdit
from drctl.state import FailoverMarker, MarkerStore
from tests.unit.ops.support import _config, open_incident

BILLING = Scope("billing", NameFilter(("invoices",)))
ORDERS = Scope("orders", NameFilter(("orders",)))

TP = ("orders", 0)


def _rec(offset: int, value: bytes | None, key: bytes = b"k", ts: int = 1000) -> Record:
    return Record("orders", 0, offset, key, value, ts, 1, ())


def _expected(*values: bytes | None, key: bytes = b"k", keyed: bool = False
              ) -> dict[tuple[str, int], list[ExpectedCopy]]:
    return {TP: [ExpectedCopy(record_fingerprint(_rec(0, v, key)), key if keyed else None,
                              keyed and v is None) for v in values]}


def _cut(walked: Walked) -> tuple[int | None, list[int], int]:
    return walked.last_copy, walked.strays, walked.missing


def test_the_cut_over_follows_the_last_copy_of_a_post_failover_write() -> None:
    # Source from failback's comparison end: the reverse copies of p1, p2, then new writes.
    records = [_rec(100, b"p1"), _rec(101, b"p2"), _rec(102, b"n1"), _rec(103, b"n2")]
    walked = walk_copies(records, _expected(b"p1", b"p2"))[TP]
    assert _cut(walked) == (101, [], 0)
    assert walked.others == [102, 103]  # after the cut-over: forward replication copies them


def test_a_native_write_among_the_reverse_copies_is_a_stray() -> None:
    # A producer moved back before the reverse flow had carried p2.
    records = [_rec(100, b"p1"), _rec(101, b"n1"), _rec(102, b"p2"), _rec(103, b"n2")]
    assert _cut(walk_copies(records, _expected(b"p1", b"p2"))[TP]) == (102, [101], 0)


def test_identical_records_count_as_a_multiset() -> None:
    # Two identical post-failover writes, and a third identical record written natively.
    records = [_rec(10, b"same"), _rec(11, b"same"), _rec(12, b"same")]
    walked = walk_copies(records, _expected(b"same", b"same"))[TP]
    assert (_cut(walked), walked.others) == ((11, [], 0), [12])


def test_a_copy_the_source_lacks_is_counted_missing() -> None:
    assert _cut(walk_copies([_rec(5, b"p1")], _expected(b"p1", b"p2"))[TP]) == (5, [], 1)


def test_a_partition_without_post_failover_writes_has_no_last_copy() -> None:
    walked = walk_copies([_rec(7, b"n1")], {}, [TP])[TP]
    assert (_cut(walked), walked.others) == ((None, [], 0), [7])


def test_on_a_compacted_topic_a_stray_a_later_value_of_its_key_supersedes_is_not_copied() -> None:
    # The target compacted k=v1 away after the reverse flow copied it; its copy on the source
    # no longer pairs with anything. Appending it to the target after v2 would make v1 the
    # current value again.
    records = [_rec(100, b"v1"), _rec(101, b"v2")]
    expected = _expected(b"v2", keyed=True)
    walked = walk_copies(records, expected, compacted={"orders"})[TP]
    assert (walked.strays, walked.superseded, walked.last_copy) == ([], [100], 101)
    # Not compacted: every record counts, the unpaired one is a stray.
    assert walk_copies(records, _expected(b"v2"))[TP].strays == [100]


def test_a_copy_compaction_removed_from_the_source_is_not_missing() -> None:
    # Post-failover writes k=v1 then k=v2; the source compacted its copy of v1 away.
    walked = walk_copies([_rec(101, b"v2")], _expected(b"v1", b"v2", keyed=True),
                         compacted={"orders"})[TP]
    assert (walked.missing, walked.compacted_away) == (0, 1)
    # The same on a topic that does not compact: missing.
    assert walk_copies([_rec(101, b"v2")], _expected(b"v1", b"v2"))[TP].missing == 1


def test_a_lone_copy_compaction_cannot_explain_is_missing_even_on_a_compacted_topic() -> None:
    walked = walk_copies([_rec(101, b"x", key=b"other")], _expected(b"v1", keyed=True),
                         compacted={"orders"})[TP]
    assert (walked.missing, walked.compacted_away) == (1, 0)


def test_copies_of_writes_the_targets_retention_removed_are_not_strays() -> None:
    # The target's retention took its first two post-failover writes (after the reverse flow
    # copied them): their copies open the source's range and pair with nothing.
    records = [_rec(100, b"p1"), _rec(101, b"p2"), _rec(102, b"p3"), _rec(103, b"n1")]
    walked = walk_copies(records, _expected(b"p3"), removed_on_target={TP: 2})[TP]
    assert (walked.strays, walked.removed_on_target, walked.last_copy) == ([], 2, 102)
    # Without the removal those two are strays (the target lacks them).
    assert walk_copies(records, _expected(b"p3"))[TP].strays == [100, 101]


def test_copies_the_sources_retention_removed_are_not_missing() -> None:
    walked = walk_copies([_rec(102, b"p3")], _expected(b"p1", b"p2", b"p3"),
                         removed_on_source={TP: 2})[TP]
    assert (walked.missing, walked.removed_on_source, walked.last_copy) == (0, 2, 102)
    # Retention explains no more than it took.
    walked = walk_copies([_rec(102, b"p3")], _expected(b"p1", b"p2", b"p3"),
                         removed_on_source={TP: 1})[TP]
    assert (walked.missing, walked.removed_on_source) == (1, 1)


# The whole flow's return and the application returns that waited for it (issue 51, 13).

class _Flow:
    """The forward flow as a replication kind reports it, from memory."""

    def __init__(self, copying: bool, holds: bool | None) -> None:
        self.copying, self.holds = copying, holds

    def forward_state(self, rep: object) -> FlowState:
        return FlowState(True, {"src": "RUNNING"}, ("src",) if self.copying else ())

    def edits_hold(self, rep: object, edits: object, part: object = None) -> bool | None:
        return self.holds


def _ctx(tmp_path: Path, flow: _Flow, scope: Scope | None = None) -> OpsContext:
    store = MarkerStore(tmp_path, "_drctl_state", None)
    return OpsContext(_config(), cast(Any, lambda name: None), lambda cluster: store,
                      cast(ReplicationKind, flow), scope=scope)


def _waiting(held_by: FailoverMarker) -> FailoverMarker:
    """An application's return that set its start, took its entries out and waits."""
    m = open_incident(BILLING, ["invoices"])
    m.source, m.target = "dc1", "dc2"
    m.edits = [ListEdit("src", "topics.exclude", ("invoices",), ("invoices",)).as_dict()]
    m.record(CUT_OVER_STEP, {"failover_ends": {"invoices": {"0": 5}}})
    m.record("reprotect:forward-start", {})
    m.record(RESUMED_STEP, {"held_by": held_by.incident}, status=WAITING)
    return m


def _whole() -> FailoverMarker:
    m = open_incident(Scope(), ["orders"])
    m.source, m.target = "dc1", "dc2"
    return m


def test_a_waiting_return_finds_the_forward_flow_copying_its_topics_once_resumed(
        tmp_path: Path) -> None:
    """Then, with names kept, the forward flow's copies land in its failover topics: they are
    not producers' writes, and its writes check is not made again (the whole flow's return
    made it before resuming)."""
    whole = _whole()
    app = _waiting(whole)
    # Still held stopped by the whole flow: not copying.
    assert not copies_already(_ctx(tmp_path, _Flow(False, False)), app, [whole, app])
    assert not copies_already(_ctx(tmp_path, _Flow(True, False)), app, [whole, app])
    whole.record(RESUMED_STEP, {})  # the whole flow's return resumed it
    assert copies_already(_ctx(tmp_path, _Flow(True, False)), app, [whole, app])
    # Its entries still in the connectors: its part is not copied, whatever the rest does.
    assert not copies_already(_ctx(tmp_path, _Flow(True, True)), app, [whole, app])
    # A whole flow's return that finds the flow copying resumed it already (a re-run).
    assert copies_already(_ctx(tmp_path, _Flow(True, None)), whole, [whole])
    assert not copies_already(_ctx(tmp_path, _Flow(False, None)), whole, [whole])


def test_the_return_that_resumes_the_flow_checks_the_waiting_returns_cut_overs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    whole = _whole()
    app = _waiting(whole)
    ctx = _ctx(tmp_path, _Flow(False, False))
    ctx.store.save(app)
    writes: dict[tuple[str, int], int] = {}
    monkeypatch.setattr(reprotect, "writes_since", lambda _ctx, ends: dict(writes))
    result = ReprotectResult(whole)
    waiting_checked(ctx, whole, [whole, app], ReprotectOptions(), result)  # nothing written
    writes[("invoices", 0)] = 3
    waiting_checked(ctx, whole, [whole, app], ReprotectOptions(force=True), result)
    assert app.incident in result.forced[0] and "invoices[0] +3" in result.forced[0]
    with pytest.raises(CheckFailed) as caught:
        waiting_checked(ctx, whole, [whole, app], ReprotectOptions(), result)
    assert app.incident in caught.value.message and "invoices[0] +3" in caught.value.message
    assert f"reprotect --incident {app.incident}" in (caught.value.hint or "")
    # Its cut-over is to be taken again (its return carries the writes): the resume waits.
    assert not app.done(CUT_OVER_STEP) and not app.done("reprotect:forward-start")
    assert waiting_for(ctx.store.get(app.incident)) == whole.incident
    with pytest.raises(CheckFailed, match="cut-over is to be taken again"):
        waiting_checked(ctx, whole, [whole, app], ReprotectOptions(), result)


def test_a_return_run_again_after_its_incident_closed_finds_it(tmp_path: Path) -> None:
    """`reprotect --app billing` once billing's incident is closed (by its own return, or by
    the whole flow's that finished it): the incident, which says it is closed (exit 0)."""
    ctx = _ctx(tmp_path, _Flow(True, False), scope=BILLING)
    older, last = (_waiting(_whole()) for _ in range(2))
    for day, m in enumerate((older, last), start=1):
        m.steps[CUT_OVER_STEP].at = f"2026-01-0{day}T00:00:00Z"  # the order returns close in
        m.record(RESUMED_STEP, {})
        m.status = "closed"
        ctx.store.save(m)
    assert marker_to_reprotect(ctx, None).incident == last.incident
    # One of its scope open: that one is the incident to return from.
    opened = _waiting(_whole())
    ctx.store.save(opened)
    assert marker_to_reprotect(ctx, None).incident == opened.incident
    # Another scope's closed incident is not this one's.
    with pytest.raises(UsageError):
        marker_to_reprotect(_ctx(tmp_path / "other", _Flow(True, False), ORDERS), None)
