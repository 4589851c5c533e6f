"""Every error drctl meets talking to a cluster, classified once: transient (another try, within
the command's --deadline, may pass) or permanent (at once: no wait changes it).

Transient: no connection, a request that timed out, a coordinator or leader moving or still
loading, the child process of the group requests dying on an answer (kafka/coordinator.py),
a cluster that did not answer (drctl's `Unreachable`). Permanent: authorization and
authentication, an unknown topic, an invalid request, and every other answer a broker gives
on purpose. drctl's own errors say which they are with a class attribute `transient`.
The retry policy (drctl/retry.py) applies this rule; causes.py says the cause in words.
"""

from __future__ import annotations

from confluent_kafka import KafkaError

# Answers that pass once a coordinator or leader has moved, a restarted broker has loaded its
# logs, or a connection is made again; librdkafka does not flag all of them retriable. The
# leader epoch errors: a restarted broker is ahead of (or behind) the client's metadata.
TRANSIENT_CODES = {
    KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
    KafkaError.COORDINATOR_NOT_AVAILABLE, KafkaError.REBALANCE_IN_PROGRESS,
    KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE,
    KafkaError.BROKER_NOT_AVAILABLE, KafkaError.REPLICA_NOT_AVAILABLE,
    KafkaError.KAFKA_STORAGE_ERROR, KafkaError.NETWORK_EXCEPTION,
    KafkaError.FENCED_LEADER_EPOCH, KafkaError.UNKNOWN_LEADER_EPOCH,
    KafkaError.UNSTABLE_OFFSET_COMMIT, KafkaError.NOT_ENOUGH_REPLICAS,
    KafkaError.NOT_ENOUGH_REPLICAS_AFTER_APPEND, KafkaError.REQUEST_TIMED_OUT,
    KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN, KafkaError._TIMED_OUT,
    KafkaError._MSG_TIMED_OUT, KafkaError._WAIT_COORD, KafkaError._NOENT,
    # a broker handle librdkafka dropped while it re-bootstrapped (a connection lost)
    KafkaError._DESTROY_BROKER,
    # a name that does not resolve now: DNS fails in incidents too (said in words, causes.py)
    KafkaError._RESOLVE,
}

# Answers no wait changes, even where librdkafka flags them retriable.
PERMANENT_CODES = {
    KafkaError.CLUSTER_AUTHORIZATION_FAILED, KafkaError.TOPIC_AUTHORIZATION_FAILED,
    KafkaError.GROUP_AUTHORIZATION_FAILED, KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    KafkaError.SASL_AUTHENTICATION_FAILED, KafkaError._AUTHENTICATION, KafkaError._SSL,
    KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError.INVALID_REQUEST, KafkaError._INVALID_ARG,
}

# Answers that say the client's metadata is behind the cluster's: a metadata refresh, not
# only time, cures them. librdkafka's admin client does not refresh its cache on them (a
# long-lived one asks with the old leader epoch until the cache expires, 15 min), so the
# caller refreshes before it retries. _NOENT: its lookup of partition leaders found none (a
# broker still electing them). UNKNOWN_TOPIC_OR_PART: a topic created a moment ago that
# this client's metadata does not have yet — once refreshed and still unknown, it is not
# there (permanent). _UNKNOWN_PARTITION: likewise a partition added a moment ago (failback
# grows a topic, then reads its ends with an admin client that knew the old count).
STALE_METADATA_CODES = {KafkaError.FENCED_LEADER_EPOCH, KafkaError.UNKNOWN_LEADER_EPOCH,
                        KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE,
                        KafkaError._NOENT, KafkaError.UNKNOWN_TOPIC_OR_PART,
                        KafkaError._UNKNOWN_PARTITION}


def kafka_error(exc: BaseException) -> KafkaError | None:
    """The KafkaError a KafkaException (or a value that is one) carries."""
    if isinstance(exc, KafkaError):
        return exc
    err = exc.args[0] if exc.args else None
    return err if isinstance(err, KafkaError) else None


def code_is_transient(code: int, *, flagged_retriable: bool = False) -> bool:
    """The rule for one librdkafka error code (`flagged_retriable`: librdkafka says so)."""
    if code in PERMANENT_CODES:
        return False
    return code in TRANSIENT_CODES or flagged_retriable


def transient(exc: BaseException) -> bool:
    """Whether another try, after a wait, may pass (module docstring); everything else is
    permanent and ends the command at once."""
    declared = getattr(exc, "transient", None)
    if isinstance(declared, bool):  # drctl's own errors say it
        return declared
    err = kafka_error(exc)
    if err is not None:
        return code_is_transient(err.code(), flagged_retriable=err.retriable())
    return isinstance(exc, TimeoutError | ConnectionError)


def is_stale_metadata(exc: BaseException) -> bool:
    """A KafkaException that a metadata refresh (not only time) makes go away."""
    err = kafka_error(exc)
    return err is not None and err.code() in STALE_METADATA_CODES


def is_retriable(exc: BaseException) -> bool:
    """A broker answer worth another try: `transient` for Kafka's errors, and only those."""
    return kafka_error(exc) is not None and transient(exc)
