"""Metrics for alerting (drctl/metrics.py): the documented names, unknown never 0, the alert
rules' metrics exist, guard's rounds recorded, the HTTP endpoint."""

from __future__ import annotations

import math
import re
import socket
import threading
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from drctl.errors import UsageError
from drctl.metrics import (
    SPECS,
    Metrics,
    exposition_text,
    flow_name,
    record_guard_round,
    serve,
    set_open_incidents,
    set_protection,
    set_readiness_findings,
    set_replication_lag,
)

ROOT = Path(__file__).resolve().parents[2]
FLOW = flow_name("dc1", "dc2")


def samples(metrics: Metrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of the exposition, parsed back: (name, sorted labels) -> value."""
    out = {}
    for family in text_string_to_metric_families(exposition_text(metrics)):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(metrics: Metrics, name: str, **labels: str) -> float | None:
    return samples(metrics).get((name, tuple(sorted(labels.items()))))


def filled(now: list[float] | None = None) -> Metrics:
    clock = now or [100.0]
    metrics = Metrics(clock=lambda: clock[0])
    set_replication_lag(metrics, FLOW, [
        {"topic": "orders", "behind": 7, "oldest_unreplicated_ms": 1_000},
        {"topic": "audit", "behind": 0, "oldest_unreplicated_ms": None}], now_ms=31_000)
    set_protection(metrics, FLOW, {"state": "exposed", "why": "mm2-source is STOPPED"})
    set_open_incidents(metrics, FLOW, [3600.0, 60.0])
    set_readiness_findings(metrics, FLOW, {"acl": 2, "topic_config": 1})
    record_guard_round(metrics, FLOW, seconds=1.5, ok=True)
    record_guard_round(metrics, FLOW, seconds=0.5, ok=False)
    return metrics


def test_a_lag_whose_age_or_count_cannot_be_told_reads_nan_never_0() -> None:
    metrics = Metrics()
    part = {"partition": 0, "behind": 3, "oldest_unreplicated_ms": 40_000}
    set_replication_lag(metrics, FLOW, [
        {"topic": "future", "behind": 3, "oldest_unreplicated_ms": 40_000,
         "by_partition": [part]},
        {"topic": "deleted", "behind": 0, "oldest_unreplicated_ms": None,
         "by_partition": [{"partition": 0, "behind": 0, "oldest_unreplicated_ms": None,
                           "deleted": 9}]},
        {"topic": "unknown", "behind": 0, "oldest_unreplicated_ms": None,
         "by_partition": [{"partition": 1, "behind": 0, "oldest_unreplicated_ms": None,
                           "unknown": "why"}]}], now_ms=31_000)
    for topic in ("future", "deleted", "unknown"):
        seconds = value(metrics, "drctl_replication_lag_seconds", flow=FLOW, topic=topic)
        assert seconds is not None and math.isnan(seconds), topic
    assert value(metrics, "drctl_replication_lag_records", flow=FLOW, topic="future") == 3
    records = value(metrics, "drctl_replication_lag_records", flow=FLOW, topic="unknown")
    assert records is not None and math.isnan(records)


def test_exposition_carries_every_documented_metric_with_its_help_and_values() -> None:
    metrics = filled()
    text = exposition_text(metrics)
    for spec in SPECS:
        assert f"# HELP {spec.name} {spec.help}" in text, spec.name
        assert f"# TYPE {spec.name} {spec.type}" in text, spec.name
        assert re.search(rf"^{spec.name}(\{{|\s)", text, re.M), spec.name
    assert value(metrics, "drctl_replication_lag_records", flow=FLOW, topic="orders") == 7
    assert value(metrics, "drctl_replication_lag_seconds", flow=FLOW, topic="orders") == 30
    assert value(metrics, "drctl_replication_lag_seconds", flow=FLOW, topic="audit") == 0
    assert {s: value(metrics, "drctl_replication_protection", flow=FLOW, state=s)
            for s in ("protected", "exposed", "incident", "unknown")} == {
        "protected": 0, "exposed": 1, "incident": 0, "unknown": 0}
    assert value(metrics, "drctl_open_incidents", flow=FLOW) == 2
    assert value(metrics, "drctl_open_incident_age_seconds", flow=FLOW) == 3600
    assert value(metrics, "drctl_readiness_findings", flow=FLOW, kind="acl") == 2
    assert value(metrics, "drctl_guard_round_duration_seconds") == 0.5
    assert value(metrics, "drctl_guard_rounds_total", result="ok") == 1
    assert value(metrics, "drctl_guard_rounds_total", result="failed") == 1
    assert value(metrics, "drctl_read_failed", flow=FLOW, source="replication_lag") == 0
    assert value(metrics, "drctl_read_errors_total", flow=FLOW, source="replication_lag") == 0


def test_a_lag_that_could_not_be_read_is_unknown_never_zero() -> None:
    metrics = Metrics()
    # Never read: no lag series at all, and the failed read says so.
    set_replication_lag(metrics, FLOW, None, error="Kafka Connect did not answer")
    got = samples(metrics)
    assert not [k for k in got if k[0].startswith("drctl_replication_lag")], got
    assert value(metrics, "drctl_read_failed", flow=FLOW, source="replication_lag") == 1
    assert value(metrics, "drctl_read_errors_total", flow=FLOW, source="replication_lag") == 1
    # Read once, then not: the topic's series read NaN until a read succeeds again.
    set_replication_lag(metrics, FLOW, [{"topic": "orders", "behind": 0,
                                         "oldest_unreplicated_ms": None}])
    assert value(metrics, "drctl_read_failed", flow=FLOW, source="replication_lag") == 0
    set_replication_lag(metrics, FLOW, None, error="no answer within 10 s")
    for name in ("drctl_replication_lag_records", "drctl_replication_lag_seconds"):
        got_value = value(metrics, name, flow=FLOW, topic="orders")
        assert got_value is not None and math.isnan(got_value), name
    assert value(metrics, "drctl_read_failed", flow=FLOW, source="replication_lag") == 1
    assert value(metrics, "drctl_read_errors_total", flow=FLOW, source="replication_lag") == 2
    assert metrics.last_errors[(FLOW, "replication_lag")] == "no answer within 10 s"
    # Back: values again; a topic gone from the rows loses its series.
    set_replication_lag(metrics, FLOW, [{"topic": "billing", "behind": 3,
                                         "oldest_unreplicated_ms": 0}], now_ms=2_000)
    assert value(metrics, "drctl_replication_lag_records", flow=FLOW, topic="orders") is None
    assert value(metrics, "drctl_replication_lag_seconds", flow=FLOW, topic="billing") == 2
    assert value(metrics, "drctl_read_failed", flow=FLOW, source="replication_lag") == 0


def test_unreadable_incidents_and_unknown_protection() -> None:
    metrics = Metrics()
    set_open_incidents(metrics, FLOW, None, error="state topic unreadable")
    count = value(metrics, "drctl_open_incidents", flow=FLOW)
    assert count is not None and math.isnan(count)
    assert value(metrics, "drctl_read_failed", flow=FLOW, source="incidents") == 1
    set_open_incidents(metrics, FLOW, [])
    assert value(metrics, "drctl_open_incidents", flow=FLOW) == 0
    assert value(metrics, "drctl_open_incident_age_seconds", flow=FLOW) == 0
    set_protection(metrics, FLOW, None)
    assert value(metrics, "drctl_replication_protection", flow=FLOW, state="unknown") == 1
    set_protection(metrics, FLOW, {"state": "protected"})
    assert value(metrics, "drctl_replication_protection", flow=FLOW, state="unknown") == 0
    assert value(metrics, "drctl_replication_protection", flow=FLOW, state="protected") == 1


def test_readiness_findings_of_a_kind_no_longer_found_read_zero() -> None:
    metrics = Metrics()
    set_readiness_findings(metrics, FLOW, {"acl": 2, "hanging_transaction": 1})
    set_readiness_findings(metrics, FLOW, {"acl": 1})
    assert value(metrics, "drctl_readiness_findings", flow=FLOW, kind="acl") == 1
    assert value(metrics, "drctl_readiness_findings", flow=FLOW,
                 kind="hanging_transaction") == 0


def test_the_snapshot_age_grows_between_rounds_and_starts_at_the_good_rounds_start() -> None:
    now = [100.0]
    metrics = Metrics(clock=lambda: now[0])
    record_guard_round(metrics, FLOW, seconds=2.0, ok=False)
    assert value(metrics, "drctl_guard_snapshot_age_seconds", flow=FLOW) is None
    record_guard_round(metrics, FLOW, seconds=2.0, ok=True)  # started at 98
    now[0] = 130.0  # no round since: scraped later, older
    assert value(metrics, "drctl_guard_snapshot_age_seconds", flow=FLOW) == 32
    record_guard_round(metrics, FLOW, seconds=1.0, ok=False)  # a failed round resets nothing
    assert value(metrics, "drctl_guard_snapshot_age_seconds", flow=FLOW) == 32


def test_every_metric_of_the_sample_alert_rules_exists() -> None:
    rules = yaml.safe_load((ROOT / "docs/prometheus/drctl-alerts.yml").read_text())
    exprs = [r["expr"] for g in rules["groups"] for r in g["rules"]]
    assert exprs and all("alert" in r for g in rules["groups"] for r in g["rules"])
    used = {name for expr in exprs for name in re.findall(r"\bdrctl_[a-z_]+", str(expr))}
    exposed = {name for name, _ in samples(filled())}
    assert used and used <= exposed, used - exposed
    # ...and every label the rules select on is one the metric has.
    labels = {spec.name: set(spec.labels) for spec in SPECS}
    for expr in exprs:
        for name, selector in re.findall(r"\b(drctl_[a-z_]+)\{([^}]*)\}", str(expr)):
            for label in re.findall(r"(\w+)\s*=", selector):
                assert label in labels[name], (name, label)


def test_operations_doc_lists_every_metric_with_its_labels_and_help() -> None:
    doc = (ROOT / "docs/operations.md").read_text()
    for spec in SPECS:
        labels = ", ".join(f"`{label}`" for label in spec.labels) or "—"
        assert f"| `{spec.name}` | {spec.type} | {labels} | {spec.help} |" in doc, spec.name
    assert "prometheus/drctl-alerts.yml" in doc


def test_metrics_are_served_over_http_until_stopped() -> None:
    metrics = filled()
    server = serve(metrics, "127.0.0.1", 0)
    try:
        url = f"http://127.0.0.1:{server.port}/metrics"
        body = urllib.request.urlopen(url, timeout=10).read().decode()
        assert 'drctl_replication_lag_records{flow="dc1->dc2",topic="orders"} 7.0' in body
        # Its own registry: nothing of prometheus_client's default collectors.
        assert "process_cpu_seconds_total" not in body and "python_info" not in body
        # A second server on the same port is a usage error naming it.
        with pytest.raises(UsageError, match=f"127.0.0.1:{server.port}"):
            serve(Metrics(), "127.0.0.1", server.port)
    finally:
        server.stop()
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", server.port), 2):
        pass


def test_guard_records_each_round_and_the_flow_it_read(monkeypatch: pytest.MonkeyPatch) -> None:
    from drctl.config import parse_config
    from drctl.context import OpsContext
    from drctl.ops.steps.flow_status import FlowReading
    from drctl.ops.steps.guard import Guard, RoundResult, run_guard

    config = parse_config({
        "clusters": {"dc1": {"bootstrap.servers": "x"}, "dc2": {"bootstrap.servers": "y"}},
        "replication": {"kind": "mirrormaker2", "source": "dc1", "target": "dc2"},
        "retry": {"initial_s": 0.001, "max_s": 0.001}})
    good = FlowReading([{"topic": "orders", "behind": 5, "oldest_unreplicated_ms": 1_000}],
                       None, {"state": "protected"}, [], None, 11_000)
    unread = FlowReading(None, "Kafka Connect did not answer", {"state": "unknown"}, None,
                         "state topic unreadable", 12_000)
    rounds = iter([RoundResult(groups=1, seconds=0.2, flow=good),
                   RoundResult(error="no answer", seconds=0.3, flow=unread)])
    stop = threading.Event()
    watched: list[bool] = []

    def next_round(self: Guard) -> RoundResult:
        watched.append(self.watch_flow)
        result = next(rounds)
        if result.error:
            stop.set()
        return result

    monkeypatch.setattr(Guard, "run_round", next_round)
    metrics = Metrics()
    seen: list[Any] = []
    run_guard(OpsContext.from_config(config), interval_s=0.001, stop=stop, metrics=metrics,
              on_round=seen.append)
    assert watched == [True, True] and len(seen) == 2
    assert value(metrics, "drctl_guard_rounds_total", result="ok") == 1
    assert value(metrics, "drctl_guard_rounds_total", result="failed") == 1
    assert value(metrics, "drctl_guard_round_duration_seconds") == 0.3
    lag = value(metrics, "drctl_replication_lag_records", flow=FLOW, topic="orders")
    assert lag is not None and math.isnan(lag)
    assert value(metrics, "drctl_read_failed", flow=FLOW, source="replication_lag") == 1
    assert value(metrics, "drctl_replication_protection", flow=FLOW, state="unknown") == 1
    assert value(metrics, "drctl_guard_snapshot_age_seconds", flow=FLOW) is not None
    assert seen[0].as_dict()["flow"]["lag"][0]["behind"] == 5
    assert "flow" not in RoundResult().as_dict()


def test_a_guard_round_with_a_lag_read_that_fails_still_succeeds() -> None:
    """Guard's own reading of the flow: the lag read raises, the round's result is fine and
    the reading says unknown, with the protection computed from what did answer."""
    from drctl.context import OpsContext
    from drctl.ops.steps.flow_status import read_flow
    from drctl.replication.base import FlowState
    from tests.unit.ops.support import _config

    class Kind:
        lag_measured = True

        def replicated_upto(self, ctx: Any) -> None:
            raise TimeoutError("Connect did not answer")

        def forward_state(self, rep: Any) -> FlowState:
            return FlowState(True, {"mm2-source": "RUNNING"}, copying=("mm2-source",))

    class Markers:
        def open_markers(self, source: str, target: str) -> list[Any]:
            return []

    config = _config()
    ctx = OpsContext(config, lambda name: object(),  # type: ignore[arg-type,return-value]
                     lambda cluster: Markers(), Kind())  # type: ignore[arg-type,return-value]
    reading = read_flow(ctx, deadline_s=5)
    assert reading.lag is None and reading.lag_error == "TimeoutError: Connect did not answer"
    assert reading.incident_ages_s == [] and reading.incidents_error is None
    # Connect answered that the source connector copies: protected, lag unknown.
    assert reading.protection["state"] == "protected", reading.protection
    assert "lag_records" not in reading.protection
