"""The failover marker: durable record of an incident (docs/design.md §2).

Written to a local state directory *and* to a compacted topic on the surviving cluster, so a
different engineer on a different machine can run the failback days later. Every mutating step
of failover and failback records itself here before moving on, which is what makes re-runs
safe: a step marked done is never applied twice.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, is_dataclass
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import NewTopic

from drctl.config import Config, Scope
from drctl.errors import DrctlError, Unreachable, UsageError
from drctl.kafka.clients import (
    ClusterClients,
    ClusterUnreachable,
    cluster_metadata,
    reason_text,
    retry_line,
    unreachable,
)
from drctl.kafka.records import ReadTimeout, read_all
from drctl.kafka.retriable import transient
from drctl.kafka.topics import wait_for_leaders
from drctl.retry import RetriesExhausted, RetryPolicy, retry_call, time_left

SCHEMA_VERSION = 1
# A marker of thousands of groups holds every position it applied (10,000 groups x 16
# partitions: about 15 MB of JSON). Compressed it is a fraction of that; the state topic and
# the producer accept up to this much, Kafka's 1 MB default would refuse it.
MARKER_MAX_BYTES = 64 * 1024 * 1024
Offsets = dict[str, dict[int, int]]  # topic -> partition -> offset


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class IncidentPhase(StrEnum):
    """Where an incident stands. The pair is protected again only when it is closed: after
    failback the reverse flow runs and the forward flow is stopped (docs/design.md §6, the
    return to protection)."""

    FAILING_OVER = "failing-over"  # failover began, not finished
    FAILED_OVER = "failed-over"  # clients work on the target; failback not begun
    FAILING_BACK = "failing-back"  # failback began, not finished
    FAILED_BACK = "failed-back"  # failback done: exposed until `drctl reprotect`
    REPROTECTING = "reprotecting"  # the return to protection began, not finished
    CLOSED = "closed"

    @property
    def next_command(self) -> str:
        """What the operator runs next, as a command."""
        return _NEXT_COMMAND[self]


_NEXT_COMMAND = {
    IncidentPhase.FAILING_OVER: "drctl failover",
    IncidentPhase.FAILED_OVER: "drctl failback",
    IncidentPhase.FAILING_BACK: "drctl failback",
    IncidentPhase.FAILED_BACK: "drctl reprotect",
    IncidentPhase.REPROTECTING: "drctl reprotect",
    IncidentPhase.CLOSED: "",
}


@dataclass
class StepRecord:
    status: str  # done | failed
    at: str
    result: dict[str, Any] = field(default_factory=dict)


@dataclass
class FailoverMarker:
    incident: str
    source: str
    target: str
    kind: str
    planned: bool
    status: str = "open"  # open | closed
    created_at: str = field(default_factory=_now)
    updated_at: str = field(default_factory=_now)
    failover_time_ms: int | None = None
    # "stopped", "pending" (replicator unreachable: it may resume and pour stale data),
    # or "not-configured".
    replication_stop: str = "not-configured"
    stopped_connectors: list[str] = field(default_factory=list)
    # The stop was pending at some point after F: the replicator may have copied records in
    # (late copies). Set once, never cleared.
    stop_unconfirmed: bool = False
    # What the replicator copied after F (ops/one_way/late_copies.py `LateCopies.as_dict`).
    late_copies: dict[str, Any] = field(default_factory=dict)
    # The replication fence's life (drctl/ops/steps/fence.py): state fenced | unfenced | not-needed
    # | lifted, principal, topics, why not, when. Empty in markers written before it existed.
    fence: dict[str, Any] = field(default_factory=dict)
    # Target end offsets of the mirror topics when replication stopped (F), and of the
    # failover topics when they differ (MM2 prefixed names).
    failover_point: Offsets = field(default_factory=dict)
    failover_topics_end: Offsets = field(default_factory=dict)
    source_end: Offsets | None = None  # what the source held, when it could still be read
    topics: dict[str, str] = field(default_factory=dict)  # source topic -> mirror topic
    groups: dict[str, dict[str, Any]] = field(default_factory=dict)
    # What the flow's last return to protection settled (ops/one_way/reprotect.py), taken at
    # failover: {"incident", "source": {topic: {partition: offset}}, "target": {mirror: {...}}}.
    # Below those offsets an earlier incident handled every record (replicated, reconciled or
    # quarantined): this incident's gap analysis starts no lower.
    settled: dict[str, Any] = field(default_factory=dict)
    # What failover could not take along (ops/steps/failover_point.py `left_behind`): {"topics":
    # [{topic, groups}], "groups": [{group, reason}]}. Empty when nothing was.
    left_behind: dict[str, Any] = field(default_factory=dict)
    # The RPO measured at the failover point (ops/steps/rpo.py `Rpo.as_dict`); empty before.
    rpo: dict[str, Any] = field(default_factory=dict)
    # Schema-id parity as each operation's preflight found it (ops/steps/schemas.py): {"failover":
    # [Parity.as_dict()], "failback": [...]}; empty when no registry is configured.
    schemas: dict[str, Any] = field(default_factory=dict)
    # What the incident covers (`Scope.as_dict`): empty for the whole flow (and in markers
    # written before scopes existed).
    scope: dict[str, Any] = field(default_factory=dict)
    # The exact entries an application's incident wrote into the shared forward connectors
    # to leave itself out (`replication/edits.py` `ListEdit.as_dict`), recorded before they
    # are written; its return takes out exactly these.
    edits: list[dict[str, Any]] = field(default_factory=list)
    # One entry per run of failover, failback and reprotect: its phases from the command's
    # start (ops/one_way/phases.py `PhaseClock.as_run`). Empty in markers written before it existed.
    timings: list[dict[str, Any]] = field(default_factory=list)
    steps: dict[str, StepRecord] = field(default_factory=dict)
    schema: int = SCHEMA_VERSION

    @classmethod
    def new(cls, source: str, target: str, kind: str, planned: bool) -> FailoverMarker:
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        return cls(f"fo-{stamp}-{secrets.token_hex(3)}", source, target, kind, planned)

    @property
    def covers(self) -> Scope:
        """The incident's scope: the whole flow, or one application's topics and groups."""
        return Scope.from_dict(self.scope)

    @property
    def ends_at_failover(self) -> Offsets:
        """The target's ends when F was taken: the mirrors' and, with prefixed names, the
        failover topics' (where a group reading an earlier incident's reverse copies goes).
        No position placed for the failover goes past them."""
        return {**self.failover_topics_end, **self.failover_point}

    def done(self, step: str) -> bool:
        rec = self.steps.get(step)
        return rec is not None and rec.status == "done"

    @property
    def phase(self) -> IncidentPhase:
        if self.status == "closed":
            return IncidentPhase.CLOSED
        if any(k.startswith("reprotect:") for k in self.steps):
            return IncidentPhase.REPROTECTING
        if self.done("failback"):
            return IncidentPhase.FAILED_BACK
        if any(k.startswith("failback:") for k in self.steps):
            return IncidentPhase.FAILING_BACK
        if self.done("failover"):
            return IncidentPhase.FAILED_OVER
        return IncidentPhase.FAILING_OVER

    @property
    def failback_started(self) -> bool:
        return self.phase in (IncidentPhase.FAILING_BACK, IncidentPhase.FAILED_BACK,
                              IncidentPhase.REPROTECTING)

    def age_s(self, now_s: float | None = None) -> float:
        """Seconds since the incident was opened."""
        created = datetime.fromisoformat(self.created_at)
        now = datetime.now(UTC) if now_s is None else datetime.fromtimestamp(now_s, UTC)
        return (now - created).total_seconds()

    def record(self, step: str, result: Mapping[str, Any] | None = None,
               status: str = "done") -> None:
        self.steps[step] = StepRecord(status, _now(), dict(result or {}))
        self.updated_at = _now()

    def as_data(self) -> dict[str, Any]:
        """The marker as plain data, as `dataclasses.asdict` gives it but without copying
        every value: a failover of 10,000 groups records them all, and its JSON, report and
        runbook summary each take the marker once."""
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["steps"] = {name: _dataclass_fields(step) for name, step in self.steps.items()}
        return data

    def to_json(self) -> str:
        # json walks the marker itself: asdict() would deep-copy every value first, a third
        # of a failover's time at 10,000 groups x 16 partitions.
        return json.dumps(self, sort_keys=True, default=_dataclass_fields)

    @classmethod
    def from_json(cls, text: str | bytes) -> FailoverMarker:
        raw = json.loads(text)
        if raw.get("schema", 0) > SCHEMA_VERSION:
            raise DrctlError(f"Failover marker {raw.get('incident')} was written by a newer "
                             "drctl.", "Upgrade drctl before touching this incident.")
        raw["steps"] = {k: StepRecord(**v) for k, v in raw.get("steps", {}).items()}
        for key in ("failover_point", "failover_topics_end", "source_end"):
            if raw.get(key) is not None:
                raw[key] = {t: {int(p): o for p, o in parts.items()}
                            for t, parts in raw[key].items()}
        return cls(**raw)


def _dataclass_fields(obj: Any) -> dict[str, Any]:
    if is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: getattr(obj, f.name) for f in fields(obj)}
    raise TypeError(f"{type(obj).__name__} is not JSON serializable")


class MarkerStore:
    """Local directory + compacted topic; the newest copy of a marker wins."""

    def __init__(self, state_dir: Path, topic: str, cluster: ClusterClients | None) -> None:
        self.dir = state_dir / "markers"
        self.topic = topic
        self.cluster = cluster
        # One producer per store: a command saves its marker after every step, and a new
        # producer costs a connection and its metadata each time.
        self._producer: Producer | None = None
        self._topic_ready = False

    def save(self, marker: FailoverMarker) -> None:
        marker.updated_at = _now()
        self.dir.mkdir(parents=True, exist_ok=True)
        path = self.dir / f"{marker.incident}.json"
        tmp = path.with_suffix(".tmp")
        with tmp.open("w") as fh:
            fh.write(marker.to_json())
            fh.flush()
            os.fsync(fh.fileno())
        tmp.replace(path)  # atomic: a crash leaves the old or the new marker, never half
        if self.cluster is not None:
            self._publish(marker)

    def _publish(self, marker: FailoverMarker) -> None:
        """The marker into the state topic, acknowledged. A cluster that does not acknowledge
        it (a broker restarting) is asked again within the command's deadline
        (`cluster.deadline_s`), each retry a line naming it, then exit 4 naming it — it was
        exit 1, as if the marker were wrong; a refusal (too large) ends it at once."""
        cluster = self.cluster
        assert cluster is not None
        if not self._topic_ready:
            self._ensure_topic()
            self._topic_ready = True
        value = marker.to_json().encode()
        policy = RetryPolicy(initial_s=0.5, max_s=5).with_deadline(cluster.deadline_s)
        started = time.monotonic()
        copy: dict[str, Any] = {}  # the copy sent and not yet answered ("pending"), or its error

        def delivered(err: Any, _msg: Any) -> None:
            copy["pending"] = False
            copy["error"] = err

        def attempt() -> None:
            if self._producer is None:
                # Not idempotent: every save waits for its acknowledgement before the next
                # is sent, so nothing can overtake it, and a duplicate of a whole marker
                # changes nothing. An idempotent producer first waits for a producer id
                # (half a second on every new producer).
                self._producer = cluster.producer(**{
                    "acks": "all", "compression.type": "zstd", "enable.idempotence": "false",
                    "max.in.flight.requests.per.connection": "1",
                    "message.max.bytes": str(MARKER_MAX_BYTES)})
            if not copy.get("pending"):  # a copy still unanswered is waited for, not sent again
                self._producer.produce(self.topic, key=marker.incident.encode(), value=value,
                                       on_delivery=delivered)
                copy.update(pending=True, error=None)  # answered in flush(), not before
            self._producer.flush(time_left(policy, started, cap_s=30))
            if copy["pending"]:
                raise KafkaException(KafkaError(KafkaError._MSG_TIMED_OUT,
                                                "the marker was not acknowledged"))
            if copy["error"] is not None:
                raise KafkaException(copy["error"])

        def on_retry(attempt_no: int, exc: BaseException, delay: float) -> None:
            if cluster.notify is not None:
                cluster.notify(retry_line(cluster, attempt_no, exc, delay))

        try:
            retry_call(attempt, policy, retry_on=(KafkaException,), on_retry=on_retry,
                       give_up=lambda exc: not transient(exc))
        except RetriesExhausted as exc:
            self._producer = None  # the next save starts afresh (a broker may have moved)
            saved = f"It is saved locally in {self.dir}"
            if transient(exc.last):
                lost = unreachable(cluster, exc)
                raise ClusterUnreachable(
                    lost.cluster, lost.address, lost.cause,
                    f"Could not write the failover marker to {self.topic}: {lost.message}",
                    f"{saved}; run the command again once '{cluster.name}' answers: it "
                    "continues after the last step recorded.",
                    detail=lost.detail).measured_as(lost) from None
            why = reason_text(exc.last)
            hint = f"{saved}; check the cluster."
            if "SIZE_TOO_LARGE" in why.upper().replace(" ", "_"):
                hint = (f"The marker is {len(value) / 1e6:.1f} MB of JSON before compression. "
                        f"Let the topic take it (kafka-configs --alter --entity-type topics "
                        f"--entity-name {self.topic} --add-config "
                        f"max.message.bytes={MARKER_MAX_BYTES}; drctl creates new state topics "
                        f"that way), then run the command again. {saved}.")
            raise DrctlError(f"Could not write the failover marker to {self.topic} on "
                             f"'{cluster.name}': {why}.", hint) from None

    def _ensure_topic(self) -> None:
        assert self.cluster is not None
        if self.topic in cluster_metadata(self.cluster).topics:
            return
        futures = self.cluster.admin().create_topics([NewTopic(
            self.topic, num_partitions=1, replication_factor=-1,
            config={"cleanup.policy": "compact", "min.compaction.lag.ms": "86400000",
                    "max.message.bytes": str(MARKER_MAX_BYTES)})])
        for fut in futures.values():
            try:
                fut.result(30)
            except Exception as exc:
                if "TOPIC_ALREADY_EXISTS" not in str(exc):
                    raise
        wait_for_leaders(self.cluster, [self.topic])

    def load_all(self) -> list[FailoverMarker]:
        markers: dict[str, FailoverMarker] = {}
        if self.dir.exists():
            for path in sorted(self.dir.glob("*.json")):
                m = FailoverMarker.from_json(path.read_text())
                markers[m.incident] = m
        if self.cluster is not None:
            try:
                records = read_all(self.cluster, self.topic, timeout_s=30)  # [] without it
            except (KafkaException, ReadTimeout) as exc:
                # A read that failed is "unknown", never "no incident": a second incident
                # opened on it, or a failback refused for "no marker", would be wrong.
                raise Unreachable(
                    f"Could not read the failover markers in topic {self.topic} on "
                    f"'{self.cluster.name}': {exc}.",
                    f"Check that '{self.cluster.name}' answers (`drctl status`), then run "
                    "the command again; what drctl knows locally is in "
                    f"{self.dir}.") from exc
            for rec in records:
                if rec.value is None:
                    continue
                m = FailoverMarker.from_json(rec.value)
                have = markers.get(m.incident)
                if have is None or m.updated_at >= have.updated_at:
                    markers[m.incident] = m
        return sorted(markers.values(), key=lambda m: m.created_at)

    def open_markers(self, source: str | None = None,
                     target: str | None = None) -> list[FailoverMarker]:
        return [m for m in self.load_all() if m.status == "open"
                and (source is None or m.source == source)
                and (target is None or m.target == target)]

    def the_open_one(self, source: str, target: str, incident: str | None,
                     what: str) -> FailoverMarker:
        """`incident`, or the flow's one open incident; a usage error naming them when none
        is open or several are (`what` says what the caller needs one for)."""
        if incident:
            return self.get(incident)
        opened = self.open_markers(source, target)
        if not opened:
            raise UsageError(f"No open incident for {source} -> {target} to {what}.",
                             "`drctl status` lists the incidents on record.")
        if len(opened) > 1:
            names = ", ".join(f"{m.incident} ({m.phase})" for m in opened)
            raise UsageError(f"{len(opened)} open incidents for {source} -> {target}: "
                             f"{names}.", f"Pass --incident ID to say which one to {what}.")
        return opened[0]

    def returned(self, source: str, target: str) -> list[FailoverMarker]:
        """The flow's incidents closed by a return to protection, in the order their
        cut-overs were taken (incidents side by side return in any order)."""
        done = [m for m in self.load_all() if m.status == "closed" and m.source == source
                and m.target == target and m.done("reprotect:cut-over")]
        return sorted(done, key=lambda m: (m.steps["reprotect:cut-over"].at, m.created_at))

    def get(self, incident: str) -> FailoverMarker:
        for m in self.load_all():
            if m.incident == incident:
                return m
        raise UsageError(f"No failover marker '{incident}'.",
                         "List incidents with `drctl status`.")


def marker_store(config: Config, cluster: str | None,
                 clients: ClusterClients | None = None) -> MarkerStore:
    """The store for `config`: the local state dir, plus the state topic on `cluster`
    (reached with `clients` when given)."""
    if cluster and clients is None:
        clients = ClusterClients.for_cluster(config, cluster)
    return MarkerStore(config.state.dir, config.state.topic, clients if cluster else None)
