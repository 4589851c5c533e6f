"""ACL errors become outcomes (drctl/kafka/acls.py)."""

from __future__ import annotations

from confluent_kafka import KafkaError

from drctl.kafka.acls import AclOutcome, outcome_of


def test_acl_errors_become_outcomes() -> None:
    assert outcome_of(KafkaError(KafkaError.SECURITY_DISABLED)) == AclOutcome.UNSUPPORTED
    assert outcome_of(KafkaError(KafkaError.CLUSTER_AUTHORIZATION_FAILED)) == AclOutcome.DENIED
    assert outcome_of(KafkaError(KafkaError._TRANSPORT)) is None
    assert outcome_of(KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART)) is None
