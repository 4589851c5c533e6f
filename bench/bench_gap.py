"""Gap analysis against a plain read of both topics, on a lab of its own.

    .venv/bin/python bench/bench_gap.py --sizes 1000000,10000000 --scopes tail,full

For each size: one topic with that many records on both clusters (8 partitions, 100-byte
values; the last --gap records only on the source), then
  * plain read: both topics once with confluent-kafka batch consume (the fastest plain
    consumer; one thread per cluster), every record's value touched;
  * gap-analysis per scope (tail: from the proven alignment; full: every record) and master:
    plan + the Spark job (JVM start included).
Runs are alternated so every variant sees the same machine noise; medians are printed with
peak memory (RSS of the whole process tree) side by side.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import resource
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from confluent_kafka import TopicPartition

from bench.common import exit_on_sigterm
from drctl.config import load_config
from drctl.context import OpsContext
from drctl.gap.plan import GapScope
from drctl.gap.planner import plan_gap_analysis
from drctl.gap.result import SUMMARY_FILE
from drctl.gap.runner import run_gap_analysis
from drctl.kafka.clients import ClusterClients
from drctl.lab.lab import Lab, LabPorts
from drctl.lab.workload import create_topics


def produce(clients: list[ClusterClients], topic: str, count: int, partitions: int,
            value_bytes: int, only_first_after: int) -> None:
    producers = [c.producer(**{"enable.idempotence": "false", "acks": "1", "linger.ms": "50",
                               "batch.size": "1000000", "compression.type": "lz4",
                               "queue.buffering.max.messages": "1000000"}) for c in clients]
    pad = os.urandom(value_bytes)
    base_ts = int(time.time() * 1000) - count
    for i in range(count):
        key = b"k%d" % (i % 100_000)
        value = (b"%d:" % i + pad)[:value_bytes]
        targets = producers if i < only_first_after else producers[:1]
        for p in targets:
            while True:
                try:
                    p.produce(topic, value=value, key=key, partition=i % partitions,
                              timestamp=base_ts + i)
                    break
                except BufferError:
                    p.poll(0.05)
        if i % 10_000 == 0:
            for p in targets:
                p.poll(0)
    for p in producers:
        assert p.flush(300) == 0


def plain_read(clients: ClusterClients, topic: str, partitions: int, expected: int) -> int:
    consumer = clients.consumer(**{"fetch.max.bytes": "52428800",
                                   "max.partition.fetch.bytes": "10485760",
                                   "queued.min.messages": "1000000"})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    seen = 0
    size = 0
    try:
        while seen < expected:
            for msg in consumer.consume(num_messages=100_000, timeout=1.0):
                if msg.error() is None:
                    seen += 1
                    size += len(msg.value() or b"")
    finally:
        consumer.close()
    return seen


class PeakRss(threading.Thread):
    """Samples the RSS of this process's descendants (the gap job and its JVM)."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.peak = 0
        self._halt = threading.Event()

    @staticmethod
    def tree_rss() -> int:
        children: dict[int, list[int]] = {}
        rss: dict[int, int] = {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            children.setdefault(int(fields[1]), []).append(int(entry))
            rss[int(entry)] = int(fields[21]) * os.sysconf("SC_PAGE_SIZE")
        # The job's processes (its Python and JVM), not this one: the plain reads' buffers
        # stay in this process's RSS and would be counted against the job.
        total, todo = 0, list(children.get(os.getpid(), []))
        while todo:
            pid = todo.pop()
            total += rss.get(pid, 0)
            todo.extend(children.get(pid, []))
        return total

    def run(self) -> None:
        while not self._halt.wait(0.25):
            self.peak = max(self.peak, self.tree_rss())

    def stop(self) -> int:
        self._halt.set()
        self.join()
        return self.peak


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="2000000,10000000")
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--gap", type=int, default=1000)
    parser.add_argument("--scopes", default="tail,full")
    parser.add_argument("--masters", default="local[2]",
                        help="comma-separated Spark masters; 'lab' is the lab's standalone "
                             "cluster (needs --spark-workers)")
    parser.add_argument("--spark-workers", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=3, help="runs per size; medians shown")
    parser.add_argument("--driver-memory", default="2g")
    parser.add_argument("--port-base", type=int,
                        default=int(os.environ.get("DRCTL_BENCH_PORT_BASE", "43170")))
    args = parser.parse_args()
    exit_on_sigterm()
    sizes = [int(s) for s in args.sizes.split(",")]
    scopes = [GapScope(s).value for s in args.scopes.split(",")]
    masters = args.masters.split(",")
    root = Path(tempfile.mkdtemp(prefix="drctl-bench-gap-"))
    lab = Lab(root / "lab")
    rows = []
    try:
        base = args.port_base
        lab.up(ports=LabPorts(base, base + 2, base + 4, spark_master=base + 5),
               spark_workers=args.spark_workers, notify=lambda m: print(m, file=sys.stderr))
        lab.fail("connect")  # the bench writes both sides itself
        config = load_config(lab.config_file)
        lab_master = config.spark.master

        def master_url(master: str) -> str:
            return lab_master if master == "lab" else master

        config = dataclasses.replace(config, spark=dataclasses.replace(
            config.spark, conf={**config.spark.conf,
                                "spark.driver.memory": args.driver_memory}))
        primary = ClusterClients.for_cluster(config, "primary")
        secondary = ClusterClients.for_cluster(config, "secondary")
        for n in sizes:
            topic = f"bench-{n}"
            for c in (primary, secondary):
                create_topics(c, (topic,), args.partitions)
            t0 = time.monotonic()
            produce([primary, secondary], topic, n, args.partitions, args.value_bytes,
                    n - args.gap)
            print(f"{topic}: produced in {time.monotonic() - t0:.0f} s", file=sys.stderr)

            variants = [(scope, master) for master in masters for scope in scopes]
            plain_runs: list[float] = []
            runs: dict[tuple[str, str], list[tuple[float, float, int]]] = {
                v: [] for v in variants}
            plain_mem = 0
            for _ in range(args.repeat):  # alternated, so all see the same machine noise
                t0 = time.monotonic()
                threads = [threading.Thread(target=plain_read,
                                            args=(c, topic, args.partitions, e))
                           for c, e in ((primary, n), (secondary, n - args.gap))]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
                plain_runs.append(time.monotonic() - t0)
                plain_mem = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
                for scope, master in variants:
                    spark = dataclasses.replace(config.spark, master=master_url(master))
                    sampler = PeakRss()
                    sampler.start()
                    t0 = time.monotonic()
                    plan = plan_gap_analysis(OpsContext.from_config(config), [topic],
                                             scope=GapScope(scope))
                    planned = time.monotonic() - t0
                    with run_gap_analysis(plan, spark) as result:
                        took = time.monotonic() - t0
                        phases = json.loads((result.out_dir / SUMMARY_FILE).read_text()).get(
                            "phases_s", {})
                        print(f"{topic} {scope}/{master}: {took:.1f} s: plan {planned:.1f} s, "
                              f"job {result.elapsed_s:.1f} s {phases}", file=sys.stderr)
                        found = result.totals["unreplicated"]
                        runs[(scope, master)].append((took, result.elapsed_s, sampler.stop()))
                    assert found == args.gap, \
                        f"{scope}/{master}: expected {args.gap} unreplicated, got {found}"
            plain_s = statistics.median(plain_runs)
            print(f"{topic}: plain {[round(x, 1) for x in plain_runs]} s; " + "; ".join(
                f"{s}/{m} {[round(r[0], 1) for r in rs]} s" for (s, m), rs in runs.items()),
                file=sys.stderr)
            for (scope, master), rs in runs.items():
                rows.append((n, scope, master, plain_s, plain_mem,
                             statistics.median(r[0] for r in rs),
                             statistics.median(r[1] for r in rs), max(r[2] for r in rs)))
    finally:
        lab.down()
        shutil.rmtree(root, ignore_errors=True)

    print(f"\n{'records/side':>12} {'scope':>5} {'master':>22} {'plain read s':>12} "
          f"{'plain MiB':>9} {'gap s':>7} {'job s':>7} {'gap MiB':>8} {'ratio':>6}")
    for n, scope, master, plain_s, plain_mem, gap_s, job_s, gap_mem in rows:
        print(f"{n:>12,} {scope:>5} {master:>22} {plain_s:>12.1f} {plain_mem / 2**20:>9.0f} "
              f"{gap_s:>7.1f} {job_s:>7.1f} {gap_mem / 2**20:>8.0f} {gap_s / plain_s:>6.2f}")
    print(f"medians of {args.repeat} alternated runs, {args.gap:,} unreplicated records found "
          "by every run; gap s: plan + Spark job incl. JVM start; job s: inside the job after "
          "Spark started; gap MiB: the highest peak of the job's process tree (its Python and JVM; "
          "Spark workers of a standalone cluster run outside it); ratio: gap s / plain read s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
