"""What the benchmarks share: filling a topic fast with realistic timestamps, a lab config
scoped to one run, waits, the printed tables, and timing Kafka's own offset-reset tool for
comparison."""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from drctl.config import Config, load_config
from drctl.kafka.clients import ClusterClients
from drctl.kafka.offsets import watermarks
from drctl.lab.lab import Lab, LabState
from drctl.lab.workload import create_topics


def exit_on_sigterm() -> None:
    """A benchmark stopped with SIGTERM (a timeout, a kill) leaves by SystemExit, so that its
    `finally` stops the lab it started; Python's default for SIGTERM ends the process at once
    and leaves the lab's brokers, Connect and Spark running."""
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))


def produce_keyed(clients: ClusterClients, topic: str, partitions: int, records: int) -> None:
    """`records` 100-byte records round robin; bursts of 20 share a millisecond, like real
    producers."""
    producer = clients.producer(**{"linger.ms": "50", "batch.size": "1000000",
                                   "compression.type": "lz4"})
    base = int(time.time() * 1000) - records
    for i in range(records):
        while True:
            try:
                producer.produce(topic, key=f"k{i % 5000}".encode(), value=b"v" * 100,
                                 partition=i % partitions, timestamp=base + i // 20)
                break
            except BufferError:
                producer.poll(0.1)  # the local queue is full: let deliveries drain
        if i % 10000 == 0:
            producer.poll(0)
    producer.flush(120)


def time_kafka_reset_to_datetime(lab: Lab, state: LabState, groups: Sequence[str]) -> list[float]:
    """Seconds per group of `kafka-consumer-groups --reset-offsets --to-datetime now
    --execute` on the secondary, one JVM per group as an operator's loop would run it."""
    when = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.000")
    tool = ("org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
            if state.kafka_version.startswith("4") else "kafka.admin.ConsumerGroupCommand")
    times = []
    for g in groups:
        started = time.monotonic()
        subprocess.run(["java", "-Xmx256m", "-cp", f"{state.lib_dir}/*", tool,
                        "--bootstrap-server", lab.bootstrap(state, "secondary"),
                        "--reset-offsets", "--group", g, "--all-topics", "--to-datetime",
                        when, "--execute"], check=True, capture_output=True, timeout=300)
        times.append(time.monotonic() - started)
    return times


def scoped_config(lab: Lab, root: Path, ns: str, *, names: str | None = None,
                  applications: dict[str, Any] | None = None) -> Path:
    """The lab's config limited to this run's topics and groups (`names`-.*, default the
    run's `ns`), with its own marker store and snapshot topic, and `applications` if given."""
    raw = yaml.safe_load(lab.config_file.read_text())
    raw["replication"]["topics"] = {"include": [f"{names or ns}-.*"]}
    raw["groups"] = {"include": [f"{names or ns}-.*"]}
    if applications is not None:
        raw["applications"] = applications
    raw["state"] = {"dir": str(root / ns / "state"), "topic": f"_drctl_state_{ns}",
                    "snapshots_topic": f"_drctl_snapshots_{ns}"}
    raw["retry"] = {"initial_s": 0.2, "max_s": 1}
    (root / ns).mkdir(parents=True, exist_ok=True)
    path = root / ns / "drctl.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def wait(check: Callable[[], bool], deadline_s: float, what: str) -> None:
    end = time.monotonic() + deadline_s
    while not check():
        if time.monotonic() > end:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(1)


def replicated(src: ClusterClients, dst: ClusterClients, topic: str, partitions: int,
               minimum: int = 1) -> bool:
    if topic not in dst.admin().list_topics(timeout=10).topics:
        return False
    tps = [(topic, p) for p in range(partitions)]
    want = sum(e for _, e in watermarks(src.admin(), tps).values())
    have = sum(e for _, e in watermarks(dst.admin(), tps).values())
    return have >= max(minimum, want)


def fmt(n: float | int | None) -> str:
    return "-" if n is None else f"{n:,}" if isinstance(n, int) else f"{n:,.2f}"


def print_table(headers: list[str], rows: list[list[Any]]) -> None:
    print("| " + " | ".join(headers) + " |")
    print("|" + "|".join("---" if i == 0 else "---:" for i in range(len(headers))) + "|")
    for row in rows:
        print("| " + " | ".join(c if isinstance(c, str) else fmt(c) for c in row) + " |")
    print(flush=True)


def scoped_topic(lab: Lab, root: Path, ns: str, name: str, partitions: int, records: int = 0
                 ) -> tuple[Path, Config, ClusterClients, ClusterClients, str]:
    """A config scoped to `ns` and a topic `<ns>-<name>` on the primary holding `records`."""
    config_file = scoped_config(lab, root, ns)
    config = load_config(config_file)
    src = ClusterClients.for_cluster(config, "primary")
    dst = ClusterClients.for_cluster(config, "secondary")
    topic = f"{ns}-{name}"
    create_topics(src, (topic,), partitions)
    if records:
        produce_keyed(src, topic, partitions, records)
    return config_file, config, src, dst, topic


def drctl_argv_env(tree: Path | None) -> tuple[list[str], dict[str, str]]:
    """How to run `python -m drctl` as an operator does (a new process): with the code of
    checkout `tree` (the "before" of a comparison, e.g. the main branch's checkout) put first
    on the path, or this checkout's when None. Both use this venv's libraries.

    `-P`: `python -m` would put the working directory first on the path, ahead of
    PYTHONPATH — run from this checkout, "before" ran this checkout's code too."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(tree if tree is not None else Path(__file__).resolve().parents[1])
    return [sys.executable, "-P", "-m", "drctl"], env


def sides(before: Path | None) -> list[tuple[str, Path | None]]:
    """The code each run uses, in turn: before and after alternate, so that load on the
    machine falls on both alike."""
    return [("before", before), ("after", None)] if before is not None else [("after", None)]


def print_before_after(what: str, runs: dict[str, list[float]]) -> None:
    """One row per side: each run, the median, and after/before of the medians; the spread
    of each side's runs is the noise of the machine during the benchmark."""
    rows = []
    for side, walls in runs.items():
        med = statistics.median(walls)
        spread = (max(walls) - min(walls)) / med if med else 0.0
        rows.append([f"{what} ({side})", ", ".join(f"{w:.1f}" for w in walls), med,
                     f"±{spread / 2:.0%}"])
    if "before" in runs and "after" in runs:
        ratio = statistics.median(runs["after"]) / statistics.median(runs["before"])
        rows.append(["after / before", "", ratio, ""])
    print_table(["what", "runs (s)", "median s", "noise (half the spread)"], rows)
