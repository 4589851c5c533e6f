"""The replication fence: failover denies a replicator it could not stop WRITE on the target's
topics, failback lifts the denial once the stop is confirmed (docs/design.md §6, the returning
replicator). The marker's `fence` keeps its life as plain data:

- state: "fenced" | "unfenced" (the stop was pending and no fence could be set: `cause` and
  `reason` say why) | "not-needed" (the stop was confirmed) | "lifted";
- principal, topics, fenced_at, lifted_at.

ACL calls live in `drctl.kafka.acls`; this module decides when to make them and what to say.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from drctl.config import ReplicationSettings
from drctl.context import OpsContext
from drctl.errors import CheckFailed, DrctlError
from drctl.kafka.acls import AclOutcome, FenceResult, fence, lift_fence
from drctl.state import FailoverMarker

FENCED, UNFENCED, NOT_NEEDED, LIFTED = "fenced", "unfenced", "not-needed", "lifted"
NO_PRINCIPAL = "no-principal"  # a cause besides the AclOutcome values
ERROR = "error"  # the target refused or did not answer the ACL request

_ADVICE = {
    NO_PRINCIPAL: "Set replication.principal to the replicator's Kafka principal (e.g. "
                  "User:mirrormaker) and run `drctl failover` again to fence it.",
    AclOutcome.UNSUPPORTED.value: "The target has no authorizer, so ACLs cannot fence it: "
                                  "enable one (authorizer.class.name) to fence.",
    AclOutcome.DENIED.value: "Give drctl's principal ALTER and DESCRIBE on the target's cluster "
                             "resource, then run `drctl failover` again to fence it.",
    ERROR: "Run `drctl failover` again to retry the fence.",
}


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def fence_topics(rep: ReplicationSettings, topics: dict[str, str]) -> list[str]:
    """The target topics a returning replicator could write: the mirror topics and the
    failover topics (the same ones when names are kept)."""
    return sorted(set(topics.values()) | {rep.failover_topic(t) for t in topics})


def fence_record(result: FenceResult, topics: list[str], previous: dict[str, Any]
                 ) -> dict[str, Any]:
    """The marker's fence after a `fence` call; a fence already in place keeps its time."""
    if result.done:
        return {"state": FENCED, "principal": result.principal, "topics": topics,
                "fenced_at": previous.get("fenced_at") or _now(), "lifted_at": None,
                "cause": "", "reason": ""}
    return unfenced_record(result.principal, topics, result.outcome.value, result.reason)


def unfenced_record(principal: str | None, topics: list[str], cause: str,
                    reason: str) -> dict[str, Any]:
    return {"state": UNFENCED, "principal": principal, "topics": topics, "fenced_at": None,
            "lifted_at": None, "cause": cause, "reason": reason}


def fence_advice(fence_state: dict[str, Any]) -> str:
    """What the operator does about an unfenced replicator."""
    first = _ADVICE.get(fence_state.get("cause", ""), _ADVICE[ERROR])
    return f"{first} Until then stop the replicator by hand (its connectors or processes)."


def open_risks(marker: FailoverMarker) -> list[str]:
    """What still threatens the target: a replicator neither confirmed stopped nor fenced."""
    if marker.replication_stop != "pending" or marker.fence.get("state") == FENCED:
        return []
    reason = marker.fence.get("reason") or "no fence was recorded"
    return [f"Replication {marker.source} -> {marker.target} is NOT fenced ({reason}) and was "
            "never confirmed stopped: if the replicator comes back it copies stale records "
            f"behind the post-failover writes. {fence_advice(marker.fence)}"]


def fence_unconfirmed_stop(ctx: OpsContext, marker: FailoverMarker,
                           topics: dict[str, str]) -> None:
    """Failover, after the stop step: fence on the target when the stop is pending (again on
    every re-run: idempotent, and it retries an earlier "unfenced"); a confirmed stop needs
    none, and a fence already set stays until failback (the replicator came back once)."""
    rep = ctx.rep
    if marker.replication_stop != "pending":
        if not marker.fence:
            marker.fence = {"state": NOT_NEEDED, "principal": rep.principal, "topics": [],
                            "fenced_at": None, "lifted_at": None, "cause": "", "reason": ""}
        return
    names = fence_topics(rep, topics)
    if rep.principal is None:
        marker.fence = unfenced_record(None, names, NO_PRINCIPAL,
                                       "replication.principal is not configured")
        return
    ctx.notify(f"Fencing replication on {rep.target}: DENY WRITE for {rep.principal} on "
           f"{len(names)} topic(s)")
    try:
        result = fence(ctx.clients(rep.target).admin(), rep.principal, names)
    except DrctlError as exc:  # the target must take traffic whatever the ACL request did
        marker.fence = unfenced_record(rep.principal, names, ERROR, exc.message)
        return
    marker.fence = fence_record(result, names, marker.fence)
    if result.done and result.reason:
        ctx.notify(f"Warning: the fence on {rep.target}: {result.reason}; until it is, a "
                   "returning replicator can still write there")


def stop_behind_fence(ctx: OpsContext, marker: FailoverMarker, *, dry_run: bool) -> bool:
    """Failback's preflight, for a replicator that Connect reports running: when the fence
    holds it (its writes fail on authorization) it is stopped here through Connect, which
    answers now, and the stop recorded; a dry run assumes that stop. Without a fence a running
    replicator may have copied already: that stays the operator's call (False)."""
    if marker.fence.get("state") != FENCED:
        return False
    if dry_run:
        return True
    rep = ctx.rep
    outcome = ctx.require_kind().stop_forward(rep)
    marker.replication_stop = outcome.state
    marker.stopped_connectors = outcome.connectors
    marker.record("failback:stop-replication", {"state": outcome.state,
                                                "detail": outcome.detail})
    ctx.markers(rep.target).save(marker)
    return outcome.state == "stopped"


def lift_fence_after_stop(ctx: OpsContext, marker: FailoverMarker, *,
                          dry_run: bool) -> dict[str, Any] | None:
    """Failback, after its preflight confirmed the stop: remove the fence (once; a re-run
    finds it lifted). Returns the plan entry, or None when there is no fence."""
    if marker.fence.get("state") != FENCED:
        return None
    rep = ctx.rep
    principal, topics = marker.fence["principal"], marker.fence["topics"]
    step = {"step": "lift-fence", "principal": principal, "topics": topics}
    if dry_run:
        return step
    ctx.notify(f"Lifting the replication fence on {rep.target} ({len(topics)} topic(s))")
    result = lift_fence(ctx.clients(rep.target).admin(), principal, topics)
    if not result.done:
        raise CheckFailed(f"The replication fence on {rep.target} could not be lifted: "
                          f"{result.reason}.",
                          "Give drctl's principal ALTER and DESCRIBE on the target's cluster "
                          f"resource, or remove the DENY WRITE ACLs of {principal} there "
                          "yourself, then run failback again.")
    if result.reason:
        ctx.notify(f"Warning: the fence's lift on {rep.target}: {result.reason}; a "
                   "replicator started before it is applied is refused again")
    marker.fence = {**marker.fence, "state": LIFTED, "lifted_at": _now()}
    marker.record("failback:lift-fence", {"lifted": list(result.changed),
                                          "not_fenced": list(result.unchanged)})
    ctx.markers(rep.target).save(marker)
    return step
