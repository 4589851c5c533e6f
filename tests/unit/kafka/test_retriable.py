"""Which Kafka errors are retried (drctl/kafka/retriable.py)."""

from __future__ import annotations


def test_a_restarted_brokers_answers_are_retried_and_a_refusal_is_not() -> None:
    from confluent_kafka import KafkaError, KafkaException

    from drctl.kafka.retriable import is_retriable

    for code in (KafkaError.FENCED_LEADER_EPOCH, KafkaError.UNKNOWN_LEADER_EPOCH,
                 KafkaError.COORDINATOR_LOAD_IN_PROGRESS):
        assert is_retriable(KafkaException(KafkaError(code))), code
    assert not is_retriable(KafkaException(KafkaError(KafkaError.GROUP_AUTHORIZATION_FAILED)))


def test_answers_a_metadata_refresh_cures_are_told_apart() -> None:
    from confluent_kafka import KafkaError, KafkaException

    from drctl.kafka.retriable import is_stale_metadata

    for code in (KafkaError.FENCED_LEADER_EPOCH, KafkaError.NOT_LEADER_FOR_PARTITION,
                 KafkaError._NOENT):
        assert is_stale_metadata(KafkaException(KafkaError(code))), code
    for code in (KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError.TOPIC_AUTHORIZATION_FAILED):
        assert not is_stale_metadata(KafkaException(KafkaError(code))), code
    assert not is_stale_metadata(TimeoutError("no answer"))


def test_every_error_is_classified_once_transient_or_permanent() -> None:
    """Issue 43: one rule for all of drctl — a dropped connection, no answer, a coordinator
    moving and a child process dying are waited for; a refusal is not."""
    from confluent_kafka import KafkaError, KafkaException

    from drctl.errors import CheckFailed, Unreachable
    from drctl.kafka.clients import ClusterRefused, ClusterUnreachable
    from drctl.kafka.connect_rest import ConnectUnreachable
    from drctl.kafka.coordinator import CoordinatorDied
    from drctl.kafka.records import ReadTimeout
    from drctl.kafka.retriable import transient

    for code in (KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN, KafkaError._TIMED_OUT,
                 KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_NOT_AVAILABLE,
                 KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError.LEADER_NOT_AVAILABLE,
                 KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.BROKER_NOT_AVAILABLE,
                 KafkaError.REPLICA_NOT_AVAILABLE, KafkaError.KAFKA_STORAGE_ERROR,
                 KafkaError.REQUEST_TIMED_OUT, KafkaError._DESTROY_BROKER):
        assert transient(KafkaException(KafkaError(code))), code
    for code in (KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.GROUP_AUTHORIZATION_FAILED,
                 KafkaError.CLUSTER_AUTHORIZATION_FAILED, KafkaError.SASL_AUTHENTICATION_FAILED,
                 KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError.INVALID_REQUEST):
        assert not transient(KafkaException(KafkaError(code))), code
    assert transient(CoordinatorDied("dc1", -11, ""))
    assert transient(TimeoutError()) and transient(ReadTimeout("x"))
    assert transient(Unreachable("dc1 did not answer"))
    # Waited for the whole deadline already, or refused: the command ends.
    assert not transient(ClusterRefused("refused"))
    assert not transient(ConnectUnreachable("http://c", "Connect did not answer"))
    assert not transient(CheckFailed("a gap")) and not transient(ValueError("a bug"))
    assert not transient(ClusterUnreachable.__new__(ClusterUnreachable))
