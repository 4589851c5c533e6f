"""Prometheus metrics for alerting: replication lag in records and seconds, protection state,
open incidents, readiness findings and the guard's rounds (docs/operations.md, "Metrics").

Each process owns one `Metrics`, on its own `CollectorRegistry` (never prometheus_client's
global one, so nothing else a library registers leaks into drctl's exposition). The update
functions take data drctl already computes: the lag rows of
`ops.steps.target_lag.target_lag`, the protection dict of `ops/steps/flow_status.py:
flow_protection`, a guard round's duration and outcome, the finding counts of a readiness
check.

A read that failed is "unknown", never "nothing there": its series read NaN (or are absent
before the first good read), `drctl_read_failed{source}` is 1 and
`drctl_read_errors_total{source}` counts it. A lag of 0 always means caught up.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest, start_http_server
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from drctl.errors import UsageError

PROTECTION_STATES = ("protected", "exposed", "incident", "unknown")
# What a metric reads from a cluster or Connect, named in drctl_read_failed{source}.
LAG, INCIDENTS = "replication_lag", "incidents"
READ_SOURCES = (LAG, INCIDENTS)
ROUND_RESULTS = ("ok", "failed")


class MetricSpec(NamedTuple):
    name: str  # as exposed (a counter's with its `_total`)
    type: str  # gauge | counter
    labels: tuple[str, ...]
    help: str


# Every metric drctl exposes; docs/operations.md lists the same table, a test checks it.
SPECS = (
    MetricSpec("drctl_replication_lag_records", "gauge", ("flow", "topic"),
               "Offsets written to the source topic that the target lacks, measured against "
               "the target (NaN: the last read failed, or a partition cannot be measured)."),
    MetricSpec("drctl_replication_lag_seconds", "gauge", ("flow", "topic"),
               "Age of the oldest source record the target lacks, in seconds; 0 when caught "
               "up (NaN: the last read failed, a partition cannot be measured, or the age "
               "cannot be told: records deleted before they were copied, or stamped in the "
               "future)."),
    MetricSpec("drctl_replication_protection", "gauge", ("flow", "state"),
               "1 for the flow's protection state now (protected, exposed, incident, "
               "unknown), 0 for the others."),
    MetricSpec("drctl_open_incidents", "gauge", ("flow",),
               "Open failover incidents of the flow (NaN: the incidents on record could not "
               "be read)."),
    MetricSpec("drctl_open_incident_age_seconds", "gauge", ("flow",),
               "Seconds since the oldest open incident of the flow was opened; 0 with none "
               "(NaN: unreadable)."),
    MetricSpec("drctl_readiness_findings", "gauge", ("flow", "kind"),
               "Findings of the last readiness check, by kind."),
    MetricSpec("drctl_guard_snapshot_age_seconds", "gauge", ("flow",),
               "Seconds since the start of the last guard round that succeeded (its offset "
               "snapshots written or confirmed), at scrape time."),
    MetricSpec("drctl_guard_round_duration_seconds", "gauge", (),
               "Duration of the last guard round, in seconds."),
    MetricSpec("drctl_guard_rounds_total", "counter", ("result",),
               "Guard rounds by result (ok, failed)."),
    MetricSpec("drctl_read_failed", "gauge", ("flow", "source"),
               "1 when drctl's last read of source (replication_lag, incidents) failed: its "
               "series are unknown (NaN), not 0."),
    MetricSpec("drctl_read_errors_total", "counter", ("flow", "source"),
               "Failed reads of source (replication_lag, incidents) since the process started."),
)
_SPEC = {s.name: s for s in SPECS}


def flow_name(source: str, target: str) -> str:
    """The `flow` label of a replication flow: `primary->secondary`."""
    return f"{source}->{target}"


class _SnapshotAge(Collector):
    """The age of each flow's last good guard round, computed when scraped: a guard that hangs
    mid-round shows a growing age, not the value its last round left."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self.last_ok: dict[str, float] = {}  # flow -> clock() when its last good round started
        self._lock = threading.Lock()

    def _family(self) -> GaugeMetricFamily:
        spec = _SPEC["drctl_guard_snapshot_age_seconds"]
        return GaugeMetricFamily(spec.name, spec.help, labels=spec.labels)

    def describe(self) -> Iterator[GaugeMetricFamily]:
        yield self._family()

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = self._family()
        now = self.clock()
        with self._lock:
            for flow, started in sorted(self.last_ok.items()):
                family.add_metric([flow], max(0.0, now - started))
        yield family

    def mark(self, flow: str, started: float) -> None:
        with self._lock:
            self.last_ok[flow] = started


class Metrics:
    """One process's metrics, on their own registry."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.registry = CollectorRegistry()
        self.clock = clock

        def gauge(name: str) -> Gauge:
            spec = _SPEC[name]
            return Gauge(name, spec.help, spec.labels, registry=self.registry)

        def counter(name: str) -> Counter:
            spec = _SPEC[name]
            # prometheus_client adds the `_total` itself.
            return Counter(name.removesuffix("_total"), spec.help, spec.labels,
                           registry=self.registry)

        self.lag_records = gauge("drctl_replication_lag_records")
        self.lag_seconds = gauge("drctl_replication_lag_seconds")
        self.protection = gauge("drctl_replication_protection")
        self.open_incidents = gauge("drctl_open_incidents")
        self.open_incident_age = gauge("drctl_open_incident_age_seconds")
        self.readiness_findings = gauge("drctl_readiness_findings")
        self.round_duration = gauge("drctl_guard_round_duration_seconds")
        self.rounds = counter("drctl_guard_rounds_total")
        self.read_failed = gauge("drctl_read_failed")
        self.read_errors = counter("drctl_read_errors_total")
        self.snapshot_age = _SnapshotAge(clock)
        self.registry.register(self.snapshot_age)
        for result in ROUND_RESULTS:  # 0 from the start: `increase()` sees the first one
            self.rounds.labels(result=result)
        self._topics: dict[str, set[str]] = {}  # flow -> topics with lag series
        self._kinds: dict[str, set[str]] = {}  # flow -> kinds with findings series
        self.last_errors: dict[tuple[str, str], str] = {}  # (flow, source) -> its last error


def _read(metrics: Metrics, flow: str, source: str, error: str | None) -> None:
    """Record how the last read of `source` went; a failure is also counted."""
    metrics.read_failed.labels(flow=flow, source=source).set(1 if error else 0)
    counted = metrics.read_errors.labels(flow=flow, source=source)  # 0 from the first read
    if error:
        counted.inc()
        metrics.last_errors[(flow, source)] = error
    else:
        metrics.last_errors.pop((flow, source), None)


def set_replication_lag(metrics: Metrics, flow: str,
                        rows: Sequence[Mapping[str, Any]] | None, *,
                        error: str | None = None, now_ms: int | None = None) -> None:
    """Per topic, the lag rows of `ops.steps.target_lag.target_lag` (`topic`, `behind`,
    `oldest_unreplicated_ms`, `by_partition`). With `error`, the lag is unknown: every topic of
    the flow reads NaN and the failure is counted. Rows of None without an error (a kind that
    cannot measure lag) leave no lag series. A topic with a partition that cannot be measured
    reads NaN; one whose missing records carry a future timestamp, or lost records to
    retention before they were copied, reads NaN seconds (their age is unknown, never 0)."""
    known = metrics._topics.setdefault(flow, set())
    if error is not None:
        for topic in known:
            metrics.lag_records.labels(flow=flow, topic=topic).set(math.nan)
            metrics.lag_seconds.labels(flow=flow, topic=topic).set(math.nan)
        _read(metrics, flow, LAG, error)
        return
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    seen: set[str] = set()
    for row in rows or ():
        topic = str(row["topic"])
        seen.add(topic)
        oldest = row.get("oldest_unreplicated_ms")
        parts = row.get("by_partition") or ()
        unknown = any(p.get("unknown") for p in parts)
        # No visible record missing (caught up, or only transaction markers behind): 0 s.
        age_s = 0.0 if oldest is None else (now_ms - int(oldest)) / 1000
        if unknown or age_s < 0 or any(p.get("deleted") for p in parts):
            age_s = math.nan
        metrics.lag_records.labels(flow=flow, topic=topic).set(
            math.nan if unknown else int(row["behind"]))
        metrics.lag_seconds.labels(flow=flow, topic=topic).set(age_s)
    for topic in known - seen:  # deleted, or out of scope now
        metrics.lag_records.remove(flow, topic)
        metrics.lag_seconds.remove(flow, topic)
    metrics._topics[flow] = seen
    _read(metrics, flow, LAG, None)


def set_protection(metrics: Metrics, flow: str,
                   protection: Mapping[str, Any] | None) -> None:
    """The flow's state from `flow_protection`'s dict; None (not computed) is `unknown`."""
    state = (protection or {}).get("state")
    state = state if state in PROTECTION_STATES else "unknown"
    for each in PROTECTION_STATES:
        metrics.protection.labels(flow=flow, state=each).set(1 if each == state else 0)


def set_open_incidents(metrics: Metrics, flow: str, ages_s: Sequence[float] | None, *,
                       error: str | None = None) -> None:
    """The ages (seconds) of the flow's open incidents; with `error` they are unknown."""
    if error is not None or ages_s is None:
        metrics.open_incidents.labels(flow=flow).set(math.nan)
        metrics.open_incident_age.labels(flow=flow).set(math.nan)
        _read(metrics, flow, INCIDENTS, error or "not read")
        return
    metrics.open_incidents.labels(flow=flow).set(len(ages_s))
    metrics.open_incident_age.labels(flow=flow).set(max(ages_s, default=0.0))
    _read(metrics, flow, INCIDENTS, None)


def set_readiness_findings(metrics: Metrics, flow: str, counts: Mapping[str, int]) -> None:
    """The findings of a readiness check by kind; a kind an earlier check reported and this
    one does not reads 0 (fixed), so its alert resolves."""
    known = metrics._kinds.setdefault(flow, set())
    for kind in known - counts.keys():
        metrics.readiness_findings.labels(flow=flow, kind=kind).set(0)
    for kind, count in counts.items():
        metrics.readiness_findings.labels(flow=flow, kind=kind).set(count)
    known.update(counts)


def record_guard_round(metrics: Metrics, flow: str, *, seconds: float, ok: bool) -> None:
    """A guard round that just ended, after `seconds`; a good one resets the snapshot age
    (counted from its start)."""
    metrics.round_duration.set(seconds)
    metrics.rounds.labels(result="ok" if ok else "failed").inc()
    if ok:
        metrics.snapshot_age.mark(flow, metrics.clock() - seconds)


def exposition_text(metrics: Metrics) -> str:
    """The metrics in Prometheus' text format (for `--metrics` on stdout)."""
    return generate_latest(metrics.registry).decode()


@dataclass
class MetricsServer:
    """The /metrics endpoint over HTTP, serving one `Metrics`; `stop()` closes it."""

    address: str
    port: int
    _server: Any
    _thread: threading.Thread

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


def serve(metrics: Metrics, address: str, port: int) -> MetricsServer:
    """Serve `metrics` on http://address:port/metrics from a daemon thread."""
    try:
        server, thread = start_http_server(port, addr=address, registry=metrics.registry)
    except OSError as exc:
        raise UsageError(f"Cannot serve metrics on {address}:{port}: {exc.strerror or exc}.",
                         "Pick a free port with --metrics-port (or another "
                         "--metrics-address).") from exc
    return MetricsServer(address, server.server_port, server, thread)
