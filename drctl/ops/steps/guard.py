"""`drctl guard`: keep exact offset snapshots on the target while the source answers, so a
failover with the source gone starts every group where it really was (translate/snapshots.py).

Each round reads the committed offsets of the groups in scope on the source, translates only
the positions that moved since the last round (exact method), and writes them to the
compacted snapshot topic on the target. A position is remembered as done only once its
snapshot is acknowledged and exact; a group ahead of replication (clamped) is translated again
next round. A cluster that does not answer costs the round, never the process: the error is
reported and the next round tries again, paced by the one retry policy.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from confluent_kafka import Producer

from drctl.context import OpsContext
from drctl.errors import DrctlError
from drctl.kafka.causes import Cause
from drctl.kafka.clients import ClusterClients, cause_of, describe_with_retry, reason_text
from drctl.kafka.topics import TP
from drctl.metrics import (
    Metrics,
    flow_name,
    record_guard_round,
    set_open_incidents,
    set_protection,
    set_replication_lag,
)
from drctl.ops.steps.flow_status import FlowReading, read_flow
from drctl.timeparse import format_duration
from drctl.translate.engine import TranslateRequest, translate_offsets, wanted_group
from drctl.translate.inventory import keep_inventory, source_groups
from drctl.translate.model import Confidence, TranslateMethod
from drctl.translate.snapshots import (
    GuardRound,
    OffsetSnapshot,
    ensure_snapshot_topic,
    snapshot_producer,
    write_snapshots,
)

# How long a round waits for the flow's lag, forward state and incidents (metrics only).
_FLOW_DEADLINE_S = 10.0


@dataclass
class RoundResult:
    groups: int = 0
    positions: int = 0  # committed positions in scope
    moved: int = 0  # of them, translated this round
    written: int = 0  # snapshots written
    pending: int = 0  # not exact yet (ahead of replication): again next round
    # Groups the source listed that no request can name, and groups its list left out that
    # the round took in from the inventory (translate/inventory.py SourceGroups).
    notes: list[str] = field(default_factory=list)
    error: str | None = None
    seconds: float = 0.0
    # The flow's lag, protection and incidents, read each round for the metrics.
    flow: FlowReading | None = None

    def as_dict(self) -> dict[str, Any]:
        out = dict(self.__dict__)
        if self.flow is None:
            del out["flow"]
        else:
            out["flow"] = self.flow.as_dict()
        return out


@dataclass
class Guard:
    """The state one guard keeps between rounds: the positions it has snapshotted."""

    # The command's context: its clients are kept between rounds, so a round does not pay
    # for new connections (and a producer id); a failed round reconnects them, since a
    # restarted broker wants fresh metadata.
    ctx: OpsContext = field(repr=False)
    groups: str = ".*"
    interval_s: float = 5.0
    deadline_s: float = 30.0  # how long a round retries a cluster before it fails
    watch_flow: bool = False  # read the flow's lag, protection and incidents each round
    snapshotted: dict[tuple[str, TP], int] = field(default_factory=dict)
    first_seen_ms: dict[tuple[str, TP], tuple[int, int]] = field(default_factory=dict)
    topic_ready: bool = False
    connected: bool = False  # both clusters answered since the start or the last failure
    _producer: Producer | None = field(default=None, repr=False)
    # The cluster the round is talking to: a failed round's line names it and its address.
    _at: ClusterClients | None = field(default=None, repr=False)
    _said: list[str] = field(default_factory=list, repr=False)  # the last round's notes

    def run_round(self) -> RoundResult:
        """One round; errors are caught and reported in the result."""
        started = time.monotonic()
        result = RoundResult()
        self._at = None
        try:
            self._round(result)
        except DrctlError as exc:
            result.error = exc.message  # an unreachable cluster's names it and its address
        except Exception as exc:  # noqa: BLE001 - a client error must not end the guard
            where = f"{self._at.name} ({self._at.bootstrap}): " if self._at else ""
            cause = cause_of(exc)  # in words; librdkafka's own text when it says more
            result.error = f"{where}{cause}" if cause is not Cause.NO_ANSWER \
                else f"{where}{type(exc).__name__}: {reason_text(exc)}"
        if self.watch_flow:
            # Also after a failed round: what cannot be read now is unknown, not as before.
            result.flow = self._read_flow()
        if result.error:
            self.ctx.reconnect()
            self.connected, self._producer = False, None
        result.seconds = round(time.monotonic() - started, 3)
        return result

    def _round(self, result: RoundResult) -> None:
        ctx = self.ctx
        config, rep = ctx.config, ctx.rep
        if not self.connected:
            # The first round, or one after a failure: both clusters must answer within the
            # deadline, each retry said on stderr with the cluster's address.
            policy = config.retry.with_deadline(self.deadline_s)
            for clients in (ctx.source, ctx.target):
                self._at = clients
                describe_with_retry(clients, policy, notify=ctx.notify)
            self.connected = True
        src, dst = ctx.source, ctx.target
        if not self.topic_ready:
            self._at = dst
            ensure_snapshot_topic(dst, config.state.snapshots_topic)
            self.topic_ready = True
        self._at = src
        # Every wait of a round on a cluster is the guard's --deadline: a cluster that does
        # not answer fails the round then, and the next round tries again.
        found = source_groups(config, src, lambda g: wanted_group(config, self.groups, g),
                              deadline_s=self.deadline_s)
        commits = found.commits
        result.notes = found.notes()
        if result.notes != self._said:  # said when it changes, not every round
            for line in result.notes:
                ctx.notify(line)
            self._said = result.notes
        now_ms = int(time.time() * 1000)
        moved: dict[str, dict[TP, int]] = {}
        for group, offsets in commits.items():
            for tp, offset in offsets.items():
                if not rep.topics.matches(tp[0]):
                    continue
                result.positions += 1
                key = (group, tp)
                if self.first_seen_ms.get(key, (None, 0))[0] != offset:
                    self.first_seen_ms[key] = (offset, now_ms)
                if self.snapshotted.get(key) != offset:
                    moved.setdefault(group, {})[tp] = offset
        result.groups = len(commits)
        result.moved = sum(len(o) for o in moved.values())
        # Forget what no longer exists, so memory follows the groups in scope.
        live = {(g, tp) for g, offs in commits.items() for tp in offs}
        for key in [k for k in {*self.snapshotted, *self.first_seen_ms} if k not in live]:
            self.snapshotted.pop(key, None)
            self.first_seen_ms.pop(key, None)
        if moved:
            self._snapshot(dst, moved, now_ms, result)
        # The commits just read are the inventory's too; it reads only what they leave out.
        self._at = src
        inventory = keep_inventory(config, src, dst, known=commits, listing=found.listing,
                                   now_ms=now_ms)
        if inventory.error:
            raise DrctlError(f"Source inventory {inventory.error}")
        # That this round happened, for `drctl check` (guard running, how old its positions).
        self._at = dst
        if self._producer is None:
            self._producer = snapshot_producer(dst)
        write_snapshots(dst, config.state.snapshots_topic, [], producer=self._producer,
                        timeout_s=self.deadline_s,
                        guard_round=GuardRound(int(time.time() * 1000), self.interval_s,
                                               result.positions, socket.gethostname()))

    def _read_flow(self) -> FlowReading:
        """The flow through the round's clients; a failure here never fails the round."""
        try:
            return read_flow(self.ctx, deadline_s=_FLOW_DEADLINE_S)
        except Exception as exc:  # noqa: BLE001 - it makes the flow unknown, nothing more
            why = exc.message if isinstance(exc, DrctlError) else f"{type(exc).__name__}: {exc}"
            return FlowReading(None, why, {"state": "unknown", "why": why}, None, why,
                               int(time.time() * 1000))

    def _snapshot(self, dst: ClusterClients, moved: dict[str, dict[TP, int]], now_ms: int,
                  result: RoundResult) -> None:
        """Translate the positions that moved exactly and write their snapshots."""
        config, rep = self.ctx.config, self.ctx.rep
        snaps: list[OffsetSnapshot] = []
        done: list[tuple[tuple[str, TP], int]] = []
        self._at = None  # both clusters; an unreachable one is named by the error
        report = translate_offsets(self.ctx, TranslateRequest(
            rep.source, rep.target, method=TranslateMethod.EXACT, positions=moved,
            source_deadline_s=self.deadline_s))
        for g in report.groups:
            for p in g.partitions:
                if p.target_offset is None:
                    result.pending += 1
                    continue
                key = (g.group, (p.topic, p.partition))
                proof = p.proof or {}
                snaps.append(OffsetSnapshot(
                    g.group, p.topic, p.partition, p.source_offset, p.target_offset,
                    p.confidence, proof.get("fingerprint"),
                    self.first_seen_ms.get(key, (0, now_ms))[1], now_ms,
                    ahead=proof.get("ahead"), occurrence=proof.get("occurrence"),
                    fingerprint_ts=proof.get("fingerprint_ts", True)))
                if p.confidence in (Confidence.EXACT, Confidence.START):
                    done.append((key, p.source_offset))
                else:
                    result.pending += 1
        self._at = dst
        if self._producer is None:
            self._producer = snapshot_producer(dst)
        result.written = write_snapshots(dst, config.state.snapshots_topic, snaps,
                                         producer=self._producer, timeout_s=self.deadline_s)
        self.snapshotted.update(done)


def record_round(metrics: Metrics, flow: str, result: RoundResult) -> None:
    """A round into the metrics: its duration and outcome, and the flow it read."""
    record_guard_round(metrics, flow, seconds=result.seconds, ok=result.error is None)
    reading = result.flow
    if reading is None:
        return
    set_replication_lag(metrics, flow, reading.lag, error=reading.lag_error,
                        now_ms=reading.read_ms)
    set_protection(metrics, flow, reading.protection)
    set_open_incidents(metrics, flow, reading.incident_ages_s, error=reading.incidents_error)


def run_guard(ctx: OpsContext, *, groups: str = ".*", interval_s: float = 5.0,
              once: bool = False, stop: threading.Event | None = None,
              on_round: Callable[[RoundResult], None] | None = None,
              metrics: Metrics | None = None,
              deadline_s: float = 30.0) -> list[RoundResult]:
    """Rounds every `interval_s` until `stop` is set (SIGTERM) — or one round with `once`.
    Returns the rounds' results with `once`, else the last one. A round retries a cluster
    for `deadline_s` before it fails. With `metrics`, each round also reads the flow's lag,
    protection and open incidents, and records all of it there. Rounds and their retries
    are said through the context's notify."""
    config, notify = ctx.config, ctx.notify
    guard = Guard(ctx, groups, interval_s, deadline_s, watch_flow=metrics is not None)
    if metrics is not None:
        rep = ctx.rep
        flow = flow_name(rep.source, rep.target)
        on_round = _both(partial(record_round, metrics, flow), on_round)
    stop = stop or threading.Event()
    results: list[RoundResult] = []
    backoff = None  # the retry policy's waits, while rounds keep failing
    failures = 0
    while True:
        result = guard.run_round()
        if on_round:
            on_round(result)
        # Rounds start every interval (a snapshot is at most one interval plus one round
        # old); a round longer than the interval is followed at once by the next.
        wait = max(0.0, interval_s - result.seconds)
        if result.error and once:
            notify(f"guard: the round failed ({result.error})")  # and nothing follows it
        elif result.error:
            # The one retry policy paces a cluster that does not answer; past its attempts
            # guard keeps trying at its longest wait (a guard never gives up).
            failures += 1
            backoff = backoff or config.retry.delays()
            wait = max(interval_s, next(backoff, config.retry.max_s))
            notify(f"guard: round failed ({result.error}); attempt {failures}, "
                   f"retrying in {format_duration(wait)}")
        else:
            if failures:
                notify(f"guard: recovered after {failures} failed round(s)")
            backoff, failures = None, 0
            notify(f"guard: {result.positions} positions of {result.groups} groups, "
                   f"{result.moved} moved, {result.written} snapshot(s) written"
                   + (f", {result.pending} not exact yet" if result.pending else "")
                   + f" ({result.seconds:.1f}s)")
        results = [result] if not once else results + [result]
        if once or stop.wait(wait):
            return results


def _both(first: Callable[[RoundResult], None],
          then: Callable[[RoundResult], None] | None) -> Callable[[RoundResult], None]:
    def call(result: RoundResult) -> None:
        first(result)
        if then is not None:
            then(result)
    return call
