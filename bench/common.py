"""What the benchmarks share: filling a topic fast with realistic timestamps."""

from __future__ import annotations

import time

from drctl.kafka.clients import ClusterClients


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
