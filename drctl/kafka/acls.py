"""ACL bindings on a cluster: the replication fence and plain grants.

The fence denies the replicator's principal WRITE on chosen topics of the target, so a
replicator that comes back after a failover it never heard of cannot copy stale records behind
the post-failover writes (docs/design.md §6, "the returning replicator"). A DENY binding wins
over any ALLOW, so the replicator's own grants stay as they are and lifting the fence restores
them.

A cluster without an authorizer, or a drctl principal without ALTER on the cluster, is an
outcome the caller reports ("unfenced"), not an exception it has to parse.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from drctl.errors import DrctlError, Unreachable

ANY_HOST = "*"
# A name no binding uses: deleting "its" binding changes nothing anywhere.
_PROBE = "__drctl_authorizer_probe"


class AclOutcome(StrEnum):
    DONE = "done"
    UNSUPPORTED = "unsupported"  # the cluster has no authorizer: ACLs cannot exist there
    DENIED = "denied"  # drctl's principal may not read or change ACLs (ALTER on the cluster)


class AclsUnavailable(DrctlError):
    """ACLs cannot be read or written on this cluster; `outcome` says why."""

    def __init__(self, outcome: AclOutcome, message: str, hint: str | None = None) -> None:
        super().__init__(message, hint)
        self.outcome = outcome


@dataclass(frozen=True)
class FenceResult:
    """What `fence` or `lift_fence` did for one principal.

    `changed`: topics this call fenced (or unfenced); `unchanged`: topics that already were
    (or were not fenced to begin with). Both empty unless `outcome` is DONE. `reason`: why it
    is not DONE, or for a DONE change not yet read back from the broker, what to say.
    """

    outcome: AclOutcome
    principal: str
    changed: tuple[str, ...] = ()
    unchanged: tuple[str, ...] = ()
    reason: str = ""

    @property
    def done(self) -> bool:
        return self.outcome == AclOutcome.DONE


def outcome_of(error: KafkaError) -> AclOutcome | None:
    """The typed outcome for a broker's ACL error, or None when it is not about ACLs."""
    if error.code() == KafkaError.SECURITY_DISABLED:
        return AclOutcome.UNSUPPORTED
    if error.code() in (KafkaError.CLUSTER_AUTHORIZATION_FAILED,
                        KafkaError.TOPIC_AUTHORIZATION_FAILED):
        return AclOutcome.DENIED
    return None


def _deny_write(principal: str, topic: str) -> AclBinding:
    return AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, principal,
                      ANY_HOST, AclOperation.WRITE, AclPermissionType.DENY)


def _deny_write_filter(principal: str, topic: str | None) -> AclBindingFilter:
    # A None name matches any topic; confluent-kafka documents it, its annotations do not.
    return AclBindingFilter(ResourceType.TOPIC, topic,  # type: ignore[arg-type]
                            ResourcePatternType.LITERAL, principal, ANY_HOST, AclOperation.WRITE,
                            AclPermissionType.DENY)


def _unavailable(outcome: AclOutcome, error: KafkaError) -> AclsUnavailable:
    if outcome == AclOutcome.UNSUPPORTED:
        return AclsUnavailable(outcome, f"the cluster has no authorizer ({error.name()})",
                               "Set authorizer.class.name on its brokers to use ACLs.")
    # The broker's own text for this one is a dump of its request object: name the code only.
    return AclsUnavailable(outcome, f"drctl's principal may not manage ACLs ({error.name()})",
                           "Make drctl's principal a super user or grant it ALTER and DESCRIBE "
                           "on the cluster resource.")


def _result(future: Future[Any], timeout_s: float) -> Any:
    """A future's value, with ACL errors typed and transport errors as Unreachable."""
    try:
        return future.result(timeout=timeout_s)
    except KafkaException as exc:
        error = exc.args[0]
        outcome = outcome_of(error)
        if outcome is not None:
            raise _unavailable(outcome, error) from exc
        if error.code() in (KafkaError._TRANSPORT, KafkaError._TIMED_OUT,
                            KafkaError._ALL_BROKERS_DOWN):
            raise Unreachable(f"the cluster did not answer an ACL request ({error.str()}).",
                              "Check that its brokers run and accept drctl's credentials.") \
                from exc
        raise DrctlError(f"the cluster refused an ACL request: {error.str()}") from exc
    except TimeoutError as exc:
        raise Unreachable(f"the cluster did not answer an ACL request in {timeout_s:.0f} s.",
                          "Check that its brokers run and accept drctl's credentials.") from exc


def read_acls(admin: AdminClient, binding_filter: AclBindingFilter, *,
              timeout_s: float = 10) -> list[AclBinding]:
    """The bindings matching the filter (AclsUnavailable when drctl may not read them; a
    cluster without an authorizer answers with none: see `authorizer_available`)."""
    future = admin.describe_acls(binding_filter, request_timeout=timeout_s)
    return list(_result(future, timeout_s + 1) or [])


def fenced_topics(admin: AdminClient, principal: str, *, timeout_s: float = 10) -> set[str]:
    """The topics on which `principal` is denied WRITE by a literal binding.

    Raises AclsUnavailable (DENIED) when drctl may not read ACLs. A cluster without an
    authorizer answers with none (see `authorizer_available`).
    """
    return {b.name for b in read_acls(admin, _deny_write_filter(principal, None),
                                      timeout_s=timeout_s)}


def fence(admin: AdminClient, principal: str, topics: Iterable[str], *,
          timeout_s: float = 10) -> FenceResult:
    """Deny `principal` WRITE on each topic. Idempotent: a topic already fenced stays as it is
    and is reported under `unchanged`."""
    wanted = sorted(set(topics))
    unread = ""
    try:
        existing = fenced_topics(admin, principal, timeout_s=timeout_s)
        missing = [t for t in wanted if t not in existing]
        if missing:
            futures = admin.create_acls([_deny_write(principal, t) for t in missing],
                                        request_timeout=timeout_s)
            for future in futures.values():
                _result(future, timeout_s + 1)
            unread = _until_read_back(admin, principal,
                                      lambda fenced: fenced >= set(missing), timeout_s)
    except AclsUnavailable as exc:
        return FenceResult(exc.outcome, principal, reason=exc.message)
    return FenceResult(AclOutcome.DONE, principal, tuple(missing),
                       tuple(t for t in wanted if t in existing), unread)


def lift_fence(admin: AdminClient, principal: str, topics: Iterable[str], *,
               timeout_s: float = 10) -> FenceResult:
    """Remove the WRITE denials of `principal` on each topic; topics that were not fenced are
    reported under `unchanged`."""
    wanted = sorted(set(topics))
    if not wanted:
        return FenceResult(AclOutcome.DONE, principal)
    try:
        futures = admin.delete_acls([_deny_write_filter(principal, t) for t in wanted],
                                    request_timeout=timeout_s)
        removed: set[str] = set()
        for future in futures.values():
            deleted = _result(future, timeout_s + 1)
            removed.update(b.name for b in deleted)
        unread = _until_read_back(admin, principal, lambda fenced: not fenced & removed,
                                  timeout_s)
    except AclsUnavailable as exc:
        return FenceResult(exc.outcome, principal, reason=exc.message)
    return FenceResult(AclOutcome.DONE, principal, tuple(t for t in wanted if t in removed),
                       tuple(t for t in wanted if t not in removed), unread)


def _until_read_back(admin: AdminClient, principal: str, agrees: Callable[[set[str]], bool],
                     timeout_s: float) -> str:
    """Until the broker drctl asks reads the change back, at most `timeout_s`. The controller
    acknowledges an ACL change once it is in the metadata log; a broker enforces it when it
    has applied that record, a moment later and later still under load (a test read a lifted
    fence back right after the lift: still there). A replicator restarted at once would
    fail again on the denial just lifted. Returns "" once read back, else what to say: the
    change is made (in the log) but not yet seen applied."""
    end = time.monotonic() + timeout_s
    while not agrees(fenced_topics(admin, principal, timeout_s=timeout_s)):
        if time.monotonic() >= end:
            return (f"the controller took the change, but the broker drctl asked had not "
                    f"applied it after {timeout_s:g} s (its metadata behind)")
        time.sleep(0.1)
    return ""


def grant(admin: AdminClient, bindings: Iterable[AclBinding], *, timeout_s: float = 10) -> None:
    """Create ALLOW (or any) bindings; existing ones are left as they are.

    Raises AclsUnavailable when the cluster has no authorizer or drctl may not change ACLs.
    """
    futures = admin.create_acls(list(bindings), request_timeout=timeout_s)
    for future in futures.values():
        _result(future, timeout_s + 1)


def authorizer_available(admin: AdminClient, *, timeout_s: float = 10) -> bool:
    """Whether the cluster has an authorizer (ACLs can exist there at all).

    Kafka answers a DescribeAcls without an authorizer with no bindings rather than an error
    (measured on 4.3.1), so the probe deletes a binding nobody creates: refused with
    SECURITY_DISABLED exactly when there is no authorizer. A principal that may not manage ACLs
    still learns that an authorizer is there.
    """
    probe = _deny_write_filter(f"User:{_PROBE}", _PROBE)
    try:
        for future in admin.delete_acls([probe], request_timeout=timeout_s).values():
            _result(future, timeout_s + 1)
    except AclsUnavailable as exc:
        return exc.outcome != AclOutcome.UNSUPPORTED
    return True
