"""Consumer groups: list them, read their states and committed offsets, commit and delete —
every group-coordinator request of drctl goes through here, in batches of many groups.

librdkafka sends them in a child process per cluster (kafka/coordinator.py): an answer that
crashes it (librdkafka#5040) costs a restart of that child, never drctl. What an answer means
is decided here, once: a transient failure (a coordinator moving or loading, a dropped
connection, no answer, the child dying) is asked again for the items it concerns, until an
attempt makes no progress for the cluster's --deadline; then exit 4 naming the cluster and
what it did not answer. A permanent one (authorization, an unknown topic, an invalid
request) ends a read at once (exit 4 with the cause); a commit reports it for its group.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from confluent_kafka import KafkaError, KafkaException

from drctl.kafka.causes import Cause, kafka_cause, kafka_hint
from drctl.kafka.clients import ClusterRefused, ClusterUnreachable
from drctl.kafka.coordinator import Coordinator, CoordinatorDied, CoordinatorRejected, Failure
from drctl.kafka.retriable import transient
from drctl.kafka.topics import TP
from drctl.retry import RetryPolicy
from drctl.timeparse import format_duration


class GroupClients(Protocol):
    """What the group requests need of a cluster's clients (kafka/clients.py's
    ClusterClients; tests give fakes)."""

    name: str
    properties: dict[str, str]
    deadline_s: float
    notify: Callable[[str], object] | None

    @property
    def bootstrap(self) -> str: ...

    def coordinator(self) -> Coordinator: ...


@dataclass(frozen=True)
class GroupState:
    group: str
    state: str  # EMPTY, STABLE, DEAD, ...
    members: int

    @property
    def active(self) -> bool:
        return self.members > 0 or self.state in ("STABLE", "PREPARING_REBALANCE",
                                                  "COMPLETING_REBALANCE")


# Between attempts: short at first (a coordinator that moved answers again in a moment),
# then every 2 s until the deadline.
BACKOFF = RetryPolicy(initial_s=0.2, max_s=2.0, attempts=10_000)
# How long one attempt waits for a window's answers: half the deadline, so that a second
# attempt fits in it, but at least 5 s whatever the deadline (a loaded cluster that answers
# 500 groups slowly is progressing, not silent: --deadline bounds silence, never progress).
_MIN_REQUEST_S = 5.0
_MAX_REQUEST_S = 30.0
# Less time than this left before the deadline is not worth one more attempt.
_LAST_WAIT_S = 0.1

# What each operation is, in an operator's words (its Kafka request in brackets).
_WHAT = {"list": "the list of consumer groups (ListGroups)",
         "offsets": "the committed offsets (OffsetFetch)",
         "describe": "the states (DescribeGroups)",
         "commit": "the offset commits (OffsetCommit)",
         "delete": "the deletion (DeleteGroups)"}


def _error(failure: Failure) -> KafkaException:
    return KafkaException(KafkaError(failure.code, failure.text))


def _in_words(exc: BaseException) -> str:
    """A failure's cause in a few words."""
    if isinstance(exc, CoordinatorDied):
        return exc.describe()
    err = exc.args[0] if exc.args else None
    if not isinstance(err, KafkaError):
        return str(exc)
    code = err.code()
    if code in (KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_NOT_AVAILABLE,
                KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError._WAIT_COORD):
        return f"the group coordinator is moving or still loading ({err.name()})"
    if code in (KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE,
                KafkaError.BROKER_NOT_AVAILABLE, KafkaError.REPLICA_NOT_AVAILABLE,
                KafkaError.KAFKA_STORAGE_ERROR, KafkaError.REBALANCE_IN_PROGRESS):
        return f"a broker or partition leader is not serving ({err.name()})"
    cause = kafka_cause(err)
    return str(cause) if cause is not Cause.NO_ANSWER else err.name()


def _ask(clients: GroupClients, op: str, items: Sequence[Any], key: Callable[[Any], Any],
         refused: dict[Any, KafkaException] | None = None, deadline_s: float | None = None
         ) -> Iterator[tuple[Any, Any]]:
    """Yield (key, answer) for every item as the answers come. Items whose answer is a
    transient failure are asked again (module docstring) for `deadline_s` (the clients'
    by default); a permanent one raises ClusterRefused, or with `refused` is put there under its
    key and the rest go on."""
    deadline = clients.deadline_s if deadline_s is None else deadline_s
    request_timeout = min(_MAX_REQUEST_S, max(_MIN_REQUEST_S, deadline / 2))
    by_key = {key(item): item for item in items}
    pending = list(by_key)
    delays = BACKOFF.delays()
    stalled_since: float | None = None
    # The stall's latest failure that says more than "no answer in time" (a child crashed
    # on an error answer, a coordinator moving): named when the deadline cut the last attempt.
    telling: BaseException | None = None
    while pending:
        attempt_started = time.monotonic()
        # The attempt's wait ends a deadline after the last answer (or the stall's start):
        # a child silent that long ends it, never the child's own timeouts after it.
        quiet_since = attempt_started if stalled_since is None else stalled_since
        failed: dict[Any, BaseException] = {}
        answered: set[Any] = set()
        try:
            for part in clients.coordinator().request(
                    op, [by_key[k] for k in pending], request_timeout,
                    lambda: quiet_since + deadline):  # noqa: B023 - its latest value
                for k, answer in part:
                    if not isinstance(answer, Failure):
                        answered.add(k)
                        quiet_since = time.monotonic()
                        yield k, answer
                        continue
                    exc = _error(answer)
                    if transient(exc):
                        failed[k] = exc
                    elif refused is not None:
                        answered.add(k)
                        refused[k] = exc
                    else:
                        raise _refused(clients, op, exc)
        except CoordinatorDied as died:
            for k in pending:  # the items it had not answered when it died
                if k not in answered:
                    failed.setdefault(k, died)
        except CoordinatorRejected as exc:
            raise _refused(clients, op, KafkaException(KafkaError(KafkaError._INVALID_ARG,
                                                                  str(exc)))) from None
        # What the attempt left unanswered (a child that died before it answered all).
        pending = [k for k in pending if k in failed]
        if not pending:
            return
        if answered:  # progress: the wait for what is left starts at the last answer
            stalled_since, delays, telling = quiet_since, BACKOFF.delays(), None
        elif stalled_since is None:
            stalled_since = attempt_started
        last = next(iter(failed.values()))
        telling = next((e for e in failed.values() if not _timed_out(e)), telling)
        waited = time.monotonic() - stalled_since
        if deadline - waited < _LAST_WAIT_S:
            raise _unanswered(clients, op, len(pending), len(by_key),
                              last if telling is None else telling, waited
                              ).measured(waited, deadline)
        delay = min(next(delays), round(deadline - waited, 1))
        if clients.notify is not None:
            many = "" if op == "list" else f" of {len(pending):,} group(s)"
            clients.notify(f"{clients.name} ({clients.bootstrap}): {_in_words(last)}; "
                           f"{_WHAT[op]}{many} asked again in {format_duration(delay)}")
        time.sleep(delay)


def _timed_out(exc: BaseException) -> bool:
    """No answer in time, and nothing more said."""
    err = exc.args[0] if exc.args else None
    return isinstance(err, KafkaError) and err.code() == KafkaError._TIMED_OUT


def _refused(clients: GroupClients, op: str, exc: KafkaException) -> ClusterRefused:
    err = exc.args[0]
    cause = kafka_cause(err)
    hint = kafka_hint(cause, clients.properties) if cause is Cause.AUTHORIZATION else \
        "Check the group names and the cluster's version; --debug shows the broker's answer."
    return ClusterRefused(f"cluster '{clients.name}' at {clients.bootstrap} refused {_WHAT[op]}: "
                   f"{_in_words(exc)}.", hint, detail=err.str())


def _unanswered(clients: GroupClients, op: str, left: int, total: int, last: BaseException,
                waited_s: float) -> ClusterUnreachable:
    many = "" if op == "list" else f" of {left:,} of {total:,} group(s)"
    detail = getattr(last, "detail", None) or (last.args[0].str() if last.args and isinstance(
        last.args[0], KafkaError) else str(last))
    return ClusterUnreachable(
        clients.name, clients.bootstrap, Cause.NO_ANSWER,
        f"cluster '{clients.name}' at {clients.bootstrap} did not answer {_WHAT[op]}{many} "
        f"for {format_duration(round(waited_s, 1))}: {_in_words(last)}.",
        "Check the brokers (a restart, load, GC pauses, the network), then run the command "
        "again: what it did is kept.", detail=detail)


# Groups Kafka lists that no request can name, and why they are left out. Old consumers with
# no group.id committed under the group "" (Kafka keeps it); librdkafka refuses to name it.
UNNAMEABLE = {"": 'the group "" (no name: old consumers without a group.id committed under '
                  "it) cannot be named in a request by drctl's Kafka client: its offsets are "
                  "neither read nor moved; move its consumers to a named group"}
# How many ListGroups answers are asked for at most until one leaves out nothing the one
# before named.
_LIST_ANSWERS = 5
# The pause between two ListGroups answers that are compared. A __consumer_offsets partition
# that moves is silent only in its hand-over: Kafka's group coordinator answers a partition it
# is still loading with COORDINATOR_LOAD_IN_PROGRESS (asked again, `_ask`), but one it has
# left, or not yet heard it leads, it leaves out with no error (GroupCoordinatorService
# turns NOT_COORDINATOR into no groups; the classic coordinator lists what it owns). Both
# brokers learn of the move from the same record of the metadata log, each in a long poll the
# controller answers as the record commits and that waits at most 500 ms
# (KafkaRaftClient.MAX_FETCH_WAIT_MS); the new coordinator then queues the load behind its
# other events (milliseconds, tens under load). Twice the long poll leaves room for a loaded
# lab (reasoned, not measured); a broker stalled longer than that behind the metadata log can
# still hide a partition's groups from both answers. Two answers a moment apart (they were
# 0.03 ms apart) both fall inside any hand-over.
LIST_PAUSE_S = 1.0


@dataclass(frozen=True)
class GroupListing:
    """A cluster's consumer groups, and those it listed that are left out (group -> why)."""

    groups: list[str]
    skipped: dict[str, str]

    def notes(self, clients: GroupClients) -> list[str]:
        """One line per group left out, naming the cluster."""
        return [f"{clients.name}: {why}; skipped" for why in self.skipped.values()]


def _list_once(clients: GroupClients, deadline_s: float | None) -> list[str]:
    for _, answer in _ask(clients, "list", [None], key=lambda item: item,
                          deadline_s=deadline_s):
        return list(answer)
    raise AssertionError("a list request answers once")


def group_listing(clients: GroupClients, *, deadline_s: float | None = None,
                  once: bool = False, clock: Callable[[], float] = time.monotonic,
                  sleep: Callable[[float], object] = time.sleep) -> GroupListing:
    """Every consumer group the cluster knows. librdkafka asks each broker; a broker that
    failed leaves its groups out, which is not "no group there": asked again, then exit 4,
    never a shorter list. A broker whose group coordinator is handing a __consumer_offsets
    partition over answers without that partition's groups and without an error: listed again
    at least LIST_PAUSE_S after the answer before until an answer leaves out nothing the one
    before named, every group any answer named kept (a group created meanwhile is no sign of
    a move). `once`: one answer, for a best-effort caller that cannot wait for the pause.
    Groups no request can name (UNNAMEABLE) are left out, and said."""
    seen: set[str] = set()
    last: set[str] | None = None
    answered_at = 0.0
    for _ in range(1 if once else _LIST_ANSWERS):
        if last is not None:
            # Answers a moment apart come from inside one hand-over and agree on what it hides.
            wait = answered_at + LIST_PAUSE_S - clock()
            if wait > 0:
                sleep(wait)
        answer = set(_list_once(clients, deadline_s))
        answered_at = clock()
        seen |= answer
        if last is not None and answer >= last:
            break
        last = answer
    skipped = {g: why for g, why in UNNAMEABLE.items() if g in seen}
    return GroupListing(sorted(seen - set(skipped)), skipped)


def list_groups(clients: GroupClients, *, deadline_s: float | None = None,
                once: bool = False, clock: Callable[[], float] = time.monotonic,
                sleep: Callable[[float], object] = time.sleep) -> list[str]:
    """`group_listing`'s groups; each group left out is said through the clients' notify."""
    listing = group_listing(clients, deadline_s=deadline_s, once=once, clock=clock,
                            sleep=sleep)
    if clients.notify is not None:
        for line in listing.notes(clients):
            clients.notify(line)
    return listing.groups


def committed_offsets(clients: GroupClients, groups: Iterable[str], *,
                      deadline_s: float | None = None) -> dict[str, dict[TP, int]]:
    """Committed offsets of many groups (a group with none has an empty mapping)."""
    return dict(_ask(clients, "offsets", list(dict.fromkeys(groups)), key=lambda g: g,
                     deadline_s=deadline_s))


def group_states(clients: GroupClients, groups: Iterable[str], *,
                 deadline_s: float | None = None) -> dict[str, GroupState]:
    """Each group's state and member count (a group the cluster does not know is DEAD)."""
    return {g: GroupState(g, state, members) for g, (state, members) in
            _ask(clients, "describe", list(dict.fromkeys(groups)), key=lambda g: g,
                 deadline_s=deadline_s)}


def alter_offsets_many(clients: GroupClients, commits: Mapping[str, Mapping[TP, int]]
                       ) -> dict[str, KafkaException]:
    """One atomic commit per group, many in flight at once. Returns the groups a broker
    refused (authorization, an unknown topic), with its answer; a transient failure is
    retried (module docstring)."""
    refused: dict[str, KafkaException] = {}
    requests = [(g, [(t, p, o) for (t, p), o in sorted(offsets.items())])
                for g, offsets in commits.items()]
    for _ in _ask(clients, "commit", requests, key=lambda r: r[0], refused=refused):
        pass
    return refused


def alter_offsets(clients: GroupClients, group: str, offsets: Mapping[TP, int]) -> None:
    """One atomic commit for the whole group."""
    failed = alter_offsets_many(clients, {group: offsets})
    if group in failed:
        raise failed[group]


def delete_groups(clients: GroupClients, groups: Iterable[str]) -> dict[str, KafkaException]:
    """Delete empty groups; returns those a broker refused (a group with members, say)."""
    refused: dict[str, KafkaException] = {}
    for _ in _ask(clients, "delete", list(dict.fromkeys(groups)), key=lambda g: g,
                  refused=refused):
        pass
    return refused
