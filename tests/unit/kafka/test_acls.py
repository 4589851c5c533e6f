"""ACL errors become outcomes (drctl/kafka/acls.py)."""

from __future__ import annotations

from concurrent.futures import Future
from types import SimpleNamespace
from typing import Any

from confluent_kafka import KafkaError

from drctl.kafka.acls import AclOutcome, fence, fenced_topics, lift_fence, outcome_of


def test_acl_errors_become_outcomes() -> None:
    assert outcome_of(KafkaError(KafkaError.SECURITY_DISABLED)) == AclOutcome.UNSUPPORTED
    assert outcome_of(KafkaError(KafkaError.CLUSTER_AUTHORIZATION_FAILED)) == AclOutcome.DENIED
    assert outcome_of(KafkaError(KafkaError._TRANSPORT)) is None
    assert outcome_of(KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART)) is None


class _LaggingBroker:
    """An admin client whose broker applies each ACL change `lag` describes after the
    controller acknowledged it, as a KRaft broker applies the metadata record later."""

    def __init__(self, lag: int) -> None:
        self.applied: set[str] = set()  # the denied topics the broker enforces
        self.pending: list[tuple[int, set[str]]] = []  # (describes left, the state after)
        self.lag = lag
        self.describes = 0

    @staticmethod
    def _done(value: object) -> Future[object]:
        future: Future[object] = Future()
        future.set_result(value)
        return future

    def describe_acls(self, _filter: object, **_: object) -> Future[object]:
        self.describes += 1
        self.pending = [(left - 1, state) for left, state in self.pending]
        while self.pending and self.pending[0][0] < 0:
            self.applied = self.pending.pop(0)[1]
        return self._done([SimpleNamespace(name=t) for t in sorted(self.applied)])

    def create_acls(self, bindings: list[Any], **_: object) -> dict[object, Future[object]]:
        after = (self.pending[-1][1] if self.pending else self.applied) \
            | {b.name for b in bindings}
        self.pending.append((self.lag, after))
        return {b: self._done(None) for b in bindings}

    def delete_acls(self, filters: list[Any], **_: object) -> dict[object, Future[object]]:
        before = self.pending[-1][1] if self.pending else self.applied
        gone = {f.name for f in filters} & before
        self.pending.append((self.lag, before - gone))
        return {f: self._done([SimpleNamespace(name=f.name)] if f.name in gone else [])
                for f in filters}


def test_a_fence_and_its_lift_are_done_once_the_broker_reads_them_back() -> None:
    """A test read a lifted fence back right after the lift and found it (a matrix run under
    load): the controller had acknowledged the change, the broker had not applied it yet. A
    replicator restarted at that moment fails again on the denial just lifted."""
    broker = _LaggingBroker(lag=3)
    admin: Any = broker
    fenced = fence(admin, "User:mm2", ["orders", "payments"])
    assert fenced.outcome == AclOutcome.DONE and fenced.changed == ("orders", "payments")
    assert fenced_topics(admin, "User:mm2") == {"orders", "payments"}
    lifted = lift_fence(admin, "User:mm2", ["orders"])
    assert lifted.outcome == AclOutcome.DONE and lifted.changed == ("orders",)
    assert fenced_topics(admin, "User:mm2") == {"payments"}
    assert broker.describes > 4  # it asked again until the broker agreed


def test_a_change_the_broker_never_reads_back_is_done_and_says_so() -> None:
    """The controller took the change (it is in the metadata log) but the broker drctl asks
    has not applied it by the timeout: still done — the log holds it — and said, where it
    used to pass as read back."""
    broker = _LaggingBroker(lag=10_000)
    admin: Any = broker
    fenced = fence(admin, "User:mm2", ["orders"], timeout_s=0.3)
    assert fenced.outcome == AclOutcome.DONE and fenced.changed == ("orders",)
    assert "had not applied it after 0.3 s" in fenced.reason
    applied: Any = _LaggingBroker(lag=0)
    assert fence(applied, "User:mm2", ["orders"]).reason == ""  # read back at once: nothing
    applied.lag = 10_000
    lifted = lift_fence(applied, "User:mm2", ["orders"], timeout_s=0.3)
    assert lifted.outcome == AclOutcome.DONE and lifted.changed == ("orders",)
    assert "had not applied it after 0.3 s" in lifted.reason
