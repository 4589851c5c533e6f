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


# Answers that say the client's metadata is behind the cluster's. librdkafka's admin client
# does not refresh its cache on them: a long-lived one asks with the old leader epoch until
# the cache expires (15 min), so the caller refreshes before it retries. _NOENT: its lookup
# of partition leaders found none (a broker that is still electing them).
STALE_METADATA_CODES = {KafkaError.FENCED_LEADER_EPOCH, KafkaError.UNKNOWN_LEADER_EPOCH,
                        KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE,
                        KafkaError._NOENT}


def _kafka_error(exc: BaseException) -> KafkaError | None:
    err = exc.args[0] if exc.args else None
    return err if isinstance(err, KafkaError) else None


def is_stale_metadata(exc: BaseException) -> bool:
    """A KafkaException that a metadata refresh (not only time) makes go away."""
    err = _kafka_error(exc)
    return err is not None and err.code() in STALE_METADATA_CODES


def is_retriable(exc: BaseException) -> bool:
    """A KafkaException a broker may stop raising in a moment (coordinator or leader moving)."""
    err = _kafka_error(exc)
    return err is not None and (err.code() in RETRIABLE_CODES or err.retriable())
