"""`drctl check` at size: 1,000 topics and 10,000 groups on a bench lab, the whole command
timed as an operator runs it (a new process each run, JSON to a pipe).

Every topic is mirrored by the lab's MirrorMaker 2 and every group committed on the primary;
the run waits until MirrorMaker 2 mirrored every topic, then times `drctl check` three times
and prints each run, the median, and what it looked at. With --before DIR (a checkout, e.g.
the main branch's) the runs alternate between DIR's code and this checkout's on the same lab,
and a before/after table follows.

Usage: .venv/bin/python -m bench.bench_check [--topics 1000] [--groups 10000]
       [--partitions 2] [--runs 3] [--port-base 47100] [--before /work/main]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka.admin import NewTopic

from bench.common import (
    drctl_argv_env,
    exit_on_sigterm,
    print_before_after,
    print_table,
    scoped_config,
    sides,
    wait,
)
from drctl.config import load_config
from drctl.kafka.clients import ClusterClients
from drctl.kafka.groups import alter_offsets_many
from drctl.lab.lab import Lab, LabPorts


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--topics", type=int, default=1000)
    ap.add_argument("--groups", type=int, default=10_000)
    ap.add_argument("--partitions", type=int, default=2)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--port-base", type=int, default=47100)
    ap.add_argument("--before", type=Path, default=None,
                    help="a checkout whose code the 'before' runs use (alternating)")
    args = ap.parse_args()
    exit_on_sigterm()
    root = Path(tempfile.mkdtemp(prefix="drctl-bench-check-"))
    lab = Lab(root / "lab")
    b = args.port_base
    ns = "bc"
    try:
        lab.up(ports=LabPorts(b, b + 2, b + 4))
        config_file = scoped_config(lab, root, ns)
        config = load_config(config_file)
        src = ClusterClients.for_cluster(config, "primary")
        dst = ClusterClients.for_cluster(config, "secondary")
        topics = [f"{ns}-t{i:04d}" for i in range(args.topics)]
        started = time.monotonic()
        for i in range(0, len(topics), 200):
            futures = src.admin().create_topics(
                [NewTopic(t, args.partitions, 1) for t in topics[i:i + 200]])
            for f in futures.values():
                f.result(60)
        producer = src.producer()
        for t in topics:
            for p in range(args.partitions):
                for k in range(5):
                    producer.produce(t, key=f"k{k}".encode(), value=b"v" * 50, partition=p)
            producer.poll(0)
        producer.flush(120)
        # Each group commits on one topic (both partitions), spread over all topics.
        commits = {f"{ns}-g{g:05d}": {(topics[g % len(topics)], p): 3
                                      for p in range(args.partitions)}
                   for g in range(args.groups)}
        alter_offsets_many(src, commits)
        print(f"set up {args.topics} topics and {args.groups} groups in "
              f"{time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)
        wait(lambda: sum(1 for t in dst.admin().list_topics(timeout=30).topics
                         if t.startswith(f"{ns}-t")) >= args.topics, 900,
             "MirrorMaker 2 to mirror every topic")
        rows = []
        walls: dict[str, list[float]] = {}
        for run in range(args.runs):
            for side, tree in sides(args.before):
                argv, env = drctl_argv_env(tree)
                t0 = time.monotonic()
                proc = subprocess.run([*argv, "--config", str(config_file), "-o", "json",
                                       "check", "--stale-after", "1h"],
                                      capture_output=True, text=True, timeout=900, env=env)
                wall = time.monotonic() - t0
                walls.setdefault(side, []).append(wall)
                out = json.loads(proc.stdout or "{}")
                rows.append([f"run {run + 1} ({side})", wall, out.get("seconds"),
                             proc.returncode, out.get("checked", {}).get("topics"),
                             out.get("checked", {}).get("positions"),
                             out.get("checked", {}).get("transactions"), out.get("risks")])
        for side, side_walls in walls.items():
            rows.append([f"median ({side})", statistics.median(side_walls), None, None, None,
                         None, None, None])
        print_table(["run", "wall s", "check s (in process)", "exit", "topics",
                     "positions", "partitions (transactions)", "risks"], rows)
        print_before_after("drctl check", walls)
    finally:
        lab.down(purge=True)


if __name__ == "__main__":
    main()
