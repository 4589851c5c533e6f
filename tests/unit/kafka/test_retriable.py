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
