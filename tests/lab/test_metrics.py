"""`drctl guard --metrics-port` against the real lab: scraped over HTTP, the lag in records and
seconds is what the test wrote and measured, the protection state follows the replicator, and
the server stops with guard."""

from __future__ import annotations

import math
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import TopicPartition
from prometheus_client.parser import text_string_to_metric_families

from drctl.config import load_config
from drctl.lab.workload import commit_offsets, create_topics
from drctl.metrics import flow_name
from tests.conftest import RunningLab
from tests.lab.support import produce, stop_forward_quietly, wait_replicated
from tests.lab.test_guard import _guard_config

pytestmark = pytest.mark.lab

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _scrape(port: int) -> Samples:
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read()
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(body.decode())
            for s in family.samples}


def _get(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))


def test_guard_serves_lag_in_records_and_seconds_protection_and_rounds(
        lab: RunningLab, ns: str, tmp_path: Path) -> None:
    base, fresh = f"{ns}-base", f"{ns}-fresh"
    create_topics(lab.primary, (base,), 2)
    produce(lab.primary, base, [(i % 2, None, f"b{i}".encode()) for i in range(40)])
    wait_replicated(lab, base, 40)
    commit_offsets(lab.primary, f"{ns}-reader", [TopicPartition(base, p, 10) for p in (0, 1)])
    config = _guard_config(lab, ns, tmp_path)
    rep = load_config(config).require_replication()
    flow = flow_name(rep.source, rep.target)
    port = _free_port()
    log = tmp_path / "guard.log"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    with log.open("w") as err:
        proc = subprocess.Popen([sys.executable, "-m", "drctl", "--config", str(config),
                                 "guard", "--interval", "1", "--metrics-port", str(port)],
                                env=env, stderr=err, stdout=subprocess.DEVNULL)
    stopped = False

    def until(what: str, holds: Callable[[Samples], bool], deadline_s: float = 90) -> Samples:
        """Scrape until `holds`; the last scrape and guard's log when it never does."""
        end = time.monotonic() + deadline_s
        got: Samples = {}
        while time.monotonic() < end:
            assert proc.poll() is None, f"guard exited {proc.returncode}: {log.read_text()}"
            try:
                got = _scrape(port)
            except (urllib.error.URLError, ConnectionError):
                got = {}  # not listening yet
            if got and holds(got):
                return got
            time.sleep(0.5)
        raise AssertionError(f"{what}: not seen in {deadline_s} s\n"
                             + "\n".join(f"{n}{dict(sorted(k))} {v}" for (n, k), v
                                         in sorted(got.items(), key=str) if "drctl" in n)
                             + "\n" + log.read_text()[-3000:])

    def ok_rounds(s: Samples) -> float:
        return _get(s, "drctl_guard_rounds_total", result="ok") or 0

    try:
        # Replication runs and has copied everything: protected, lag 0 records and 0 s.
        first = until("caught up and protected", lambda s: (
            _get(s, "drctl_replication_lag_records", flow=flow, topic=base) == 0
            and _get(s, "drctl_replication_lag_seconds", flow=flow, topic=base) == 0
            and _get(s, "drctl_replication_protection", flow=flow, state="protected") == 1
            and ok_rounds(s) >= 1))
        assert _get(first, "drctl_read_failed", flow=flow, source="replication_lag") == 0
        assert _get(first, "drctl_open_incidents", flow=flow) == 0
        assert (_get(first, "drctl_guard_snapshot_age_seconds", flow=flow) or -1) >= 0
        assert (_get(first, "drctl_guard_round_duration_seconds") or 0) > 0

        # The replicator stops; records are written to a topic it has never copied.
        stop_forward_quietly(lab, base)
        stopped = True
        create_topics(lab.primary, (fresh,), 2)
        count = 30
        written_from = time.time()
        produce(lab.primary, fresh, [(i % 2, None, f"f{i}".encode()) for i in range(count)])
        written_by = time.time()  # the oldest record was stamped in [written_from, written_by]
        time.sleep(3)
        mark = time.time()
        rounds_at_mark = ok_rounds(_scrape(port))
        # Two more rounds: the second started after the mark, so its lag was read after it.
        lagging = until("lag of the fresh topic", lambda s: (
            _get(s, "drctl_replication_lag_records", flow=flow, topic=fresh) == count
            and ok_rounds(s) >= rounds_at_mark + 2))
        seconds = _get(lagging, "drctl_replication_lag_seconds", flow=flow, topic=fresh)
        assert seconds is not None and not math.isnan(seconds)
        assert seconds >= mark - written_by, (seconds, mark - written_by)
        assert seconds <= time.time() - written_from + 0.01, seconds
        assert _get(lagging, "drctl_replication_lag_records", flow=flow, topic=base) == 0
        assert _get(lagging, "drctl_replication_protection", flow=flow, state="exposed") == 1
        assert _get(lagging, "drctl_replication_protection", flow=flow,
                    state="protected") == 0
        assert _get(lagging, "drctl_read_failed", flow=flow, source="replication_lag") == 0

        # Replication resumes: the fresh topic is copied, the lag back to 0, protected again.
        lab.lab.up(ports=lab.state.ports, names_kept=lab.names_kept)
        stopped = False
        wait_replicated(lab, fresh, count)
        last = until("caught up again", lambda s: (
            _get(s, "drctl_replication_lag_records", flow=flow, topic=fresh) == 0
            and _get(s, "drctl_replication_lag_seconds", flow=flow, topic=fresh) == 0
            and _get(s, "drctl_replication_protection", flow=flow, state="protected") == 1))
        assert ok_rounds(last) > ok_rounds(lagging) > ok_rounds(first)
        assert _get(last, "drctl_guard_rounds_total", result="failed") == 0, log.read_text()

        # SIGTERM ends guard with 0, and its metrics server with it.
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0, log.read_text()[-3000:]
        assert f"metrics on http://127.0.0.1:{port}/metrics" in log.read_text()
        with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), 2):
            pass
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if stopped:
            lab.lab.up(ports=lab.state.ports, names_kept=lab.names_kept)
