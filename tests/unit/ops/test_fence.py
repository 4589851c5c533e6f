"""The replication fence's decisions (drctl/ops/steps/fence.py); the ACLs themselves are tested on
real brokers in tests/lab/test_fence.py and tests/lab/test_secure_lab.py."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

import pytest

from drctl.config import Config, parse_config
from drctl.context import OpsContext
from drctl.errors import ExitStatus
from drctl.kafka.acls import AclOutcome, FenceResult
from drctl.ops.steps.fence import (
    fence_record,
    fence_topics,
    fence_unconfirmed_stop,
    lift_fence_after_stop,
    open_risks,
)
from drctl.ops.steps.flow_status import status_verdict
from drctl.replication.base import kind_named
from drctl.state import FailoverMarker


def _config(rename: str = "{topic}", principal: str | None = "User:mm2") -> Config:
    return parse_config({
        "clusters": {"dc1": {"bootstrap.servers": "x"}, "dc2": {"bootstrap.servers": "y"}},
        "replication": {"kind": "mirrormaker2", "source": "dc1", "target": "dc2",
                        "rename": rename,
                        **({"principal": principal} if principal else {})},
    })


def _no_kafka(name: str) -> Any:
    raise AssertionError(f"no ACL request expected (asked for {name})")


def _context(config: Config) -> OpsContext:
    return OpsContext(config, _no_kafka, _no_kafka, kind_named("mirrormaker2"))


def _marker(stop: str) -> FailoverMarker:
    marker = FailoverMarker.new("dc1", "dc2", "mirrormaker2", planned=False)
    marker.replication_stop = stop
    return marker


def test_fence_covers_mirror_and_failover_topics() -> None:
    kept = _config().require_replication()
    assert fence_topics(kept, {"orders": "orders", "pay": "pay"}) == ["orders", "pay"]
    prefixed = _config("dc1.{topic}").require_replication()
    assert fence_topics(prefixed, {"orders": "dc1.orders"}) == ["dc1.orders", "orders"]


def test_a_confirmed_stop_needs_no_fence_and_asks_no_cluster() -> None:
    marker = _marker("stopped")
    fence_unconfirmed_stop(_context(_config()), marker, {"orders": "orders"})
    assert marker.fence["state"] == "not-needed"
    assert open_risks(marker) == []


def test_a_pending_stop_without_principal_is_unfenced_and_an_open_risk() -> None:
    marker = _marker("pending")
    fence_unconfirmed_stop(_context(_config(principal=None)), marker, {"orders": "orders"})
    assert marker.fence["state"] == "unfenced"
    assert marker.fence["reason"] == "replication.principal is not configured"
    (risk,) = open_risks(marker)
    assert "NOT fenced (replication.principal is not configured)" in risk
    assert "Set replication.principal" in risk and "stop the replicator by hand" in risk


def test_a_fence_set_while_pending_stays_when_the_stop_is_confirmed_later() -> None:
    marker = _marker("pending")
    marker.fence = fence_record(FenceResult(AclOutcome.DONE, "User:mm2", ("orders",)),
                                ["orders"], {})
    fenced_at = marker.fence["fenced_at"]
    assert open_risks(marker) == []  # fenced: the returning replicator cannot write
    marker.replication_stop = "stopped"  # the failover re-run reached Connect
    fence_unconfirmed_stop(_context(_config()), marker, {"orders": "orders"})
    assert marker.fence["state"] == "fenced" and marker.fence["fenced_at"] == fenced_at
    # A second fence call (re-run, still pending) keeps the first time.
    again = fence_record(FenceResult(AclOutcome.DONE, "User:mm2", (), ("orders",)),
                         ["orders"], marker.fence)
    assert again["fenced_at"] == fenced_at


@pytest.mark.parametrize(("outcome", "advice"), [
    (AclOutcome.UNSUPPORTED, "enable one (authorizer.class.name)"),
    (AclOutcome.DENIED, "ALTER and DESCRIBE on the target's cluster resource"),
])
def test_an_impossible_fence_is_recorded_with_its_reason(outcome: AclOutcome,
                                                         advice: str) -> None:
    marker = _marker("pending")
    marker.fence = fence_record(FenceResult(outcome, "User:mm2", reason="why not"),
                                ["orders"], {})
    assert (marker.fence["state"], marker.fence["cause"], marker.fence["reason"]) == \
        ("unfenced", outcome.value, "why not")
    (risk,) = open_risks(marker)
    assert "(why not)" in risk and advice in risk


def test_lifting_is_a_no_op_without_a_fence_and_planned_on_a_dry_run() -> None:
    ctx = _context(_config())
    marker = _marker("stopped")
    marker.fence = {"state": "lifted", "principal": "User:mm2", "topics": ["orders"]}
    assert lift_fence_after_stop(ctx, marker, dry_run=False) is None
    marker.fence = {**marker.fence, "state": "fenced"}
    step = lift_fence_after_stop(ctx, marker, dry_run=True)
    assert step == {"step": "lift-fence", "principal": "User:mm2", "topics": ["orders"]}
    assert marker.fence["state"] == "fenced"


def test_markers_written_before_the_fence_still_load() -> None:
    raw = asdict(_marker("pending"))
    del raw["fence"]
    marker = FailoverMarker.from_json(json.dumps(raw))
    assert marker.fence == {}
    (risk,) = open_risks(marker)
    assert "no fence was recorded" in risk
    assert FailoverMarker.from_json(marker.to_json()).fence == {}


def test_status_names_an_unfenced_pending_stop_as_the_risk() -> None:
    fenced, unfenced = _marker("pending"), _marker("pending")
    fenced.fence = {"state": "fenced", "principal": "User:mm2", "topics": ["orders"]}
    unfenced.fence = {"state": "unfenced", "reason": "the cluster has no authorizer"}
    rows = [{"incident": m.incident, "replication_stop": m.replication_stop,
             "open_risks": open_risks(m)} for m in (fenced, unfenced)]
    verdict, why = status_verdict({"clusters": {}, "open_failovers": rows})
    assert verdict == ExitStatus.CHECK_FAILED
    assert why is not None and "NOT fenced (the cluster has no authorizer)" in why
    verdict, why = status_verdict({"clusters": {}, "open_failovers": rows[:1]})
    assert verdict == ExitStatus.CHECK_FAILED
    assert why == f"Replication stop pending for {fenced.incident} (fenced on the target): " \
                  "stop the replicator."
