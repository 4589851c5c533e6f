"""Which Kafka errors are worth another try: the rule that `drctl.retry`'s policy applies to
broker answers."""

from __future__ import annotations

from confluent_kafka import KafkaError

# Broker answers that pass once a coordinator or leader has moved; librdkafka does not flag
# all of them retriable. UNKNOWN_TOPIC_OR_PART: a topic created a moment ago; the leader
# epoch errors: a restarted broker is ahead of (or behind) the client's metadata.
RETRIABLE_CODES = {KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
                   KafkaError.COORDINATOR_NOT_AVAILABLE, KafkaError.REBALANCE_IN_PROGRESS,
                   KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE,
                   KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError.FENCED_LEADER_EPOCH,
                   KafkaError.UNKNOWN_LEADER_EPOCH}


def is_retriable(exc: BaseException) -> bool:
    """A KafkaException a broker may stop raising in a moment (coordinator or leader moving)."""
    err = exc.args[0] if exc.args else None
    return isinstance(err, KafkaError) and (err.code() in RETRIABLE_CODES or err.retriable())
