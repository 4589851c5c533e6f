"""What the benchmarks share: filling a topic fast with realistic timestamps, and timing
Kafka's own offset-reset tool for comparison."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Sequence
from datetime import UTC, datetime

from drctl.kafka.clients import ClusterClients
from drctl.lab.lab import Lab, LabState


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
