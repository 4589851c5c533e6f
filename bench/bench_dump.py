"""dump-consumer-timestamps at scale: 1M synthetic `__consumer_timestamps` records.

Measures, on a bench-owned lab:
  - pure decode rate (no Kafka): decode_consumer_timestamp over pre-encoded records
  - the streaming dump (TopicDump, full history and --latest) over 100k and 1M records
  - the command end to end with --format jsonl, stdout to /dev/null
Each Kafka measurement runs in a fresh child process, which reports its wall time, its CPU time
(librdkafka's threads included; unlike wall time it does not grow when other work shares the
CPUs), its peak RSS, and its RSS at each quarter of the topic: constant memory shows as a flat
line once librdkafka's bounded prefetch queue has filled.

Usage: .venv/bin/python -m bench.bench_dump [--records 1000000] [--partitions 12]
       [--port-base 41130]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import exit_on_sigterm
from drctl.codecs.confluent import (
    ConsumerTimestamp,
    decode_consumer_timestamp,
    encode_consumer_timestamp,
)

LAYOUTS = [("gtp", "ts+delta"), ("gtp", "ts"), ("v+gtp", "v+ts+delta")]
# Internal-looking names: the lab's MirrorMaker 2 leaves `__*` topics alone.
SMALL_TOPIC = "__bench_consumer_timestamps_100k"


def synthetic(i: int, base_ms: int) -> tuple[bytes, bytes]:
    """Commits of 2,000 groups on 20 topics x 12 partitions, mostly the newer layout."""
    key_layout, value_layout = LAYOUTS[0] if i % 10 else LAYOUTS[1 + (i // 10) % 2]
    ct = ConsumerTimestamp(f"service-{i % 2000:04d}", f"topic-{i % 20:02d}", i % 12,
                           base_ms + i, i % 500 if value_layout.endswith("delta") else None,
                           key_layout, value_layout,
                           1 if key_layout == "v+gtp" else None,
                           0 if value_layout.startswith("v+") else None)
    return encode_consumer_timestamp(ct)


def max_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def _status_mib(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field):
            return int(line.split()[1]) / 1024
    return float("nan")


def hwm_mib() -> float:
    """This process's own peak RSS. getrusage's maxrss also counts the parent's size at fork
    (Linux carries it across exec), so children report both."""
    return _status_mib("VmHWM:")


def rss_mib() -> float:
    return _status_mib("VmRSS:")


def cpu_seconds() -> float:
    """User + system time of this process, librdkafka's threads included: unlike wall time,
    it does not grow when other work shares the CPUs."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def pure_decode(n: int) -> list[tuple[str, int, float, float]]:
    """Decode rate without Kafka: the synthetic mix (6,000 distinct keys committed again and
    again, as in a real topic) and a worst case where every key is new."""
    base = int(time.time() * 1000)
    mixes = {
        "pure decode, repeating keys (no Kafka)": [synthetic(i, base) for i in range(n)],
        "pure decode, every key distinct (no Kafka)": [
            encode_consumer_timestamp(ConsumerTimestamp(f"group-{i:07d}", "orders", i % 50,
                                                        base + i, 7, "gtp", "ts+delta"))
            for i in range(n)],
    }
    out = []
    for label, pairs in mixes.items():
        started = time.perf_counter()
        for key, value in pairs:
            decode_consumer_timestamp(key, value)
        elapsed = time.perf_counter() - started
        out.append((label, n, elapsed, n / elapsed))
    return out


def produce(bootstrap: str, topic: str, partitions: int, records: int) -> float:
    from drctl.kafka.clients import ClusterClients
    from drctl.lab.workload import create_topics

    clients = ClusterClients("primary", {"bootstrap.servers": bootstrap})
    create_topics(clients, (topic,), partitions)
    producer = clients.producer(**{"linger.ms": "50", "batch.size": "1000000",
                                   "compression.type": "lz4"})
    base = int(time.time() * 1000) - records
    started = time.monotonic()
    for i in range(records):
        key, value = synthetic(i, base)
        while True:
            try:
                producer.produce(topic, key=key, value=value, partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.1)
        if i % 20_000 == 0:
            producer.poll(0)
    producer.flush(300)
    return time.monotonic() - started


# -- child measurements (each in its own process) ---------------------------------------


def child(mode: str, bootstrap: str, topic: str, config: str) -> None:
    from drctl.dump.reader import TopicDump
    from drctl.dump.rows import DumpKind
    from drctl.kafka.clients import ClusterClients

    rss_before = hwm_mib()
    quarters: list[int] = []
    cpu_started = cpu_seconds()
    started = time.perf_counter()
    if mode == "cli":
        from drctl.cli import dump_cmd
        from drctl.cli.app import app, main

        app.command("dump-consumer-timestamps")(dump_cmd.dump_consumer_timestamps)
        status = main(["--config", config, "-q", "dump-consumer-timestamps", "--format",
                       "jsonl", "--internal-topic", topic])
        assert status == 0, status
        records = -1  # counted by the parent from the summary line
    else:
        dump = TopicDump(ClusterClients("primary", {"bootstrap.servers": bootstrap}),
                         DumpKind.consumer_timestamps, topic, latest=mode == "latest")
        total, seen = [0], [0]

        def start(n: int) -> None:
            total[0] = n

        def progress(n: int) -> None:
            # RSS at each quarter of the topic: a flat line is constant memory.
            before, seen[0] = seen[0], seen[0] + n
            if seen[0] * 4 // max(total[0], 1) > before * 4 // max(total[0], 1):
                quarters.append(round(rss_mib()))

        dump.on_start, dump.on_progress = start, progress
        rows = sum(1 for _ in dump)
        records = dump.stats.records
        assert dump.stats.undecodable == 0 and rows == dump.stats.emitted
    elapsed = time.perf_counter() - started
    report = {"mode": mode, "records": records, "seconds": elapsed,
              "cpu_seconds": cpu_seconds() - cpu_started,
              "rss_before_mib": rss_before, "hwm_mib": hwm_mib(), "max_rss_mib": max_rss_mib(),
              "rss_quarters": quarters}
    print(json.dumps(report), file=sys.stderr if mode == "cli" else sys.stdout)


def run_child(mode: str, bootstrap: str, topic: str, config: Path) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "bench.bench_dump", "--child", mode, "--bootstrap", bootstrap,
           "--topic", topic, "--config", str(config)]
    if mode == "cli":
        out = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             text=True, check=True)
        line = [ln for ln in out.stderr.splitlines() if ln.startswith('{"mode"')][-1]
    else:
        out = subprocess.run(cmd, capture_output=True, text=True, check=True)
        line = out.stdout.strip().splitlines()[-1]
    result: dict[str, Any] = json.loads(line)
    return result


def start_lab(lab: Any, ports: Any, attempts: int = 3) -> Any:
    """The lab's ports lie in Linux's ephemeral range, so a client elsewhere on the machine can
    hold one for a moment; starting again then usually works."""
    from drctl.errors import LabError

    attempt = 1
    while True:
        try:
            return lab.up(ports=ports)
        except LabError as exc:
            lab.down()
            if attempt >= attempts:
                raise
            print(f"lab start failed ({exc.message}); retrying", file=sys.stderr)
            attempt += 1
            time.sleep(5)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--partitions", type=int, default=12)
    ap.add_argument("--port-base", type=int, default=41130)
    ap.add_argument("--child")
    ap.add_argument("--bootstrap")
    ap.add_argument("--topic")
    ap.add_argument("--config")
    args = ap.parse_args()
    exit_on_sigterm()
    if args.child:
        child(args.child, args.bootstrap, args.topic, args.config)
        return

    from drctl.lab.lab import Lab, LabPorts

    decode = pure_decode(200_000)
    root = Path(tempfile.mkdtemp(prefix="drctl-bench-dump-"))
    lab = Lab(root / "lab")
    b = args.port_base
    done = False
    try:
        state = start_lab(lab, LabPorts(b, b + 2, b + 4))
        bootstrap = lab.bootstrap(state, "primary")
        small = min(100_000, args.records)
        t_small = produce(bootstrap, SMALL_TOPIC, args.partitions, small)
        t_big = produce(bootstrap, "__consumer_timestamps", args.partitions, args.records)
        print(f"produced {small:,} + {args.records:,} records in {t_small + t_big:.1f} s "
              f"({os.cpu_count()} CPUs shared with other work)")
        rows = []
        for label, mode, topic, n in (
                (f"dump history, {small:,}", "history", SMALL_TOPIC, small),
                (f"dump history, {args.records:,}", "history", "__consumer_timestamps",
                 args.records),
                (f"dump --latest, {args.records:,}", "latest", "__consumer_timestamps",
                 args.records),
                (f"CLI --format jsonl > /dev/null, {args.records:,}", "cli",
                 "__consumer_timestamps", args.records)):
            r = run_child(mode, bootstrap, topic, lab.config_file)
            rows.append((label, n, r["seconds"], n / r["seconds"], n / r["cpu_seconds"],
                         r["hwm_mib"],
                         r["max_rss_mib"], r["rss_before_mib"],
                         "/".join(str(q) for q in r.get("rss_quarters", []))))
        print()
        load = os.getloadavg()[0]
        print(f"\nload average during the runs: {load:.1f} on {os.cpu_count()} CPUs\n")
        print(f"{'what':44} {'records':>10} {'seconds':>8} {'records/s':>11} "
              f"{'per CPU-s':>11} {'peak MiB':>9} {'maxrss MiB':>11} {'at start':>9}  "
              "RSS at 1/4..4/4")
        for label, n, secs, rate in decode:
            print(f"{label:44} {n:>10,} {secs:8.2f} {rate:>11,.0f} {rate:>11,.0f}")
        for label, n, secs, rate, cpu_rate, peak, maxrss, start, quarters in rows:
            print(f"{label:44} {n:>10,} {secs:8.2f} {rate:>11,.0f} {cpu_rate:>11,.0f} "
                  f"{peak:9.0f} {maxrss:11.0f} {start:9.0f}  {quarters}")
        print("\npeak MiB: the child's own peak RSS (VmHWM); maxrss: getrusage, which also "
              "counts\nthe parent's size when the child was forked; at start: VmHWM after "
              "imports.")
        done = True
    finally:
        lab.down()
        if done:
            shutil.rmtree(root, ignore_errors=True)
        else:  # a failed run keeps its logs
            print(f"lab files kept in {root}", file=sys.stderr)


if __name__ == "__main__":
    main()
