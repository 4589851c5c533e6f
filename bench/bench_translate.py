"""translate-offsets at scale: 1,000 groups x 16 partitions on a bench lab.

Compares, in one run on the same data:
  - drctl translate-offsets --method exact --yes (all groups), a new process per run as an
    operator runs it; with --before DIR (a checkout, e.g. the main branch's) the runs
    alternate between DIR's code and this checkout's, and a before/after table follows
  - drctl translate-offsets --method checkpoint (all groups)
  - what operators run today: kafka-consumer-groups --reset-offsets --to-datetime --execute,
    one JVM per group (timed on a sample of groups; the per-group median x groups gives the
    loop's cost, since every run is independent).

Usage: .venv/bin/python -m bench.bench_translate [--groups 1000] [--partitions 16]
       [--records 200000] [--tool-sample 15] [--port-base 45100] [--repeat 3]
       [--methods exact,checkpoint] [--before /work/main]
--tool-sample 0 leaves the kafka-consumer-groups loop out.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from bench.common import (
    drctl_argv_env,
    exit_on_sigterm,
    print_before_after,
    produce_keyed,
    sides,
    time_kafka_reset_to_datetime,
)
from drctl.config import load_config
from drctl.context import OpsContext
from drctl.kafka.checkpoints import read_checkpoints
from drctl.kafka.groups import alter_offsets_many
from drctl.kafka.offsets import watermarks
from drctl.lab.lab import Lab, LabPorts
from drctl.lab.workload import create_topics
from drctl.translate.engine import TranslateRequest, translate_offsets
from drctl.translate.model import TranslateMethod


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--groups", type=int, default=1000)
    ap.add_argument("--partitions", type=int, default=16)
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--tool-sample", type=int, default=15)
    ap.add_argument("--port-base", type=int, default=45100)
    ap.add_argument("--methods", default="exact,checkpoint")
    ap.add_argument("--repeat", type=int, default=3, help="runs per drctl method; median shown")
    ap.add_argument("--before", type=Path, default=None,
                    help="a checkout whose code the 'before' runs of exact --yes use")
    args = ap.parse_args()
    exit_on_sigterm()

    root = Path(tempfile.mkdtemp(prefix="drctl-bench-translate-"))
    lab = Lab(root / "lab")
    b = args.port_base
    try:
        state = lab.up(ports=LabPorts(b, b + 2, b + 4))
        config = load_config(lab.config_file)
        from drctl.kafka.clients import ClusterClients

        src = ClusterClients.for_cluster(config, "primary")
        dst = ClusterClients.for_cluster(config, "secondary")
        topic = "bench-orders"
        create_topics(src, (topic,), args.partitions)
        t0 = time.monotonic()
        produce_keyed(src, topic, args.partitions, args.records)
        print(f"produced {args.records} records in {time.monotonic() - t0:.1f} s")
        tps = [(topic, p) for p in range(args.partitions)]
        src_marks = watermarks(src.admin(), tps)
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            if topic in dst.admin().list_topics(timeout=10).topics:
                dst_marks = watermarks(dst.admin(), tps)
                if sum(h for _, h in dst_marks.values()) >= sum(h for _, h in
                                                                src_marks.values()):
                    break
            time.sleep(1)
        rng = random.Random(1)
        groups = [f"bench-g{i:04d}" for i in range(args.groups)]
        failed = alter_offsets_many(src, {g: {tp: rng.randrange(1, src_marks[tp][1])
                                                for tp in tps} for g in groups})
        if failed:
            raise SystemExit(f"{len(failed)} groups could not be committed")
        print(f"committed {args.groups} groups x {args.partitions} partitions")
        # Let MirrorMaker 2 find the groups and checkpoint them.
        want = args.groups * args.partitions
        deadline = time.monotonic() + (600 if "checkpoint" in args.methods else 0)
        have = 0
        while time.monotonic() < deadline:
            have = len(read_checkpoints(dst, "primary.checkpoints.internal"))
            if have >= want:
                break
            time.sleep(5)
        print(f"checkpoints available: {have}/{want}")

        rows = []
        if "exact" in args.methods:
            walls: dict[str, list[float]] = {}
            summary: dict = {}
            for _ in range(args.repeat):
                for side, tree in sides(args.before):
                    argv, env = drctl_argv_env(tree)
                    started = time.monotonic()
                    proc = subprocess.run(
                        [*argv, "--config", str(lab.config_file), "-o", "json",
                         "translate-offsets", "--source", "primary", "--target", "secondary",
                         "--groups", "bench-g.*", "--method", "exact", "--yes"],
                        capture_output=True, text=True, timeout=1800, env=env)
                    walls.setdefault(side, []).append(time.monotonic() - started)
                    if proc.returncode != 0:
                        raise SystemExit(f"{side}: exit {proc.returncode}: {proc.stderr[-2000:]}")
                    summary = json.loads(proc.stdout)["summary"]
            print_before_after("drctl translate-offsets --method exact --yes", walls)
            runs = walls["after"]
            rows.append((f"drctl exact --yes (median of {len(runs)})", statistics.median(runs),
                         f"{summary['partitions']} positions, {summary['exact']} exact, "
                         f"{summary['applied']} groups applied; runs "
                         f"{', '.join(f'{r:.1f}' for r in runs)} s"))
        if "checkpoint" in args.methods:
            runs = []
            for _ in range(args.repeat):
                started = time.monotonic()
                report = translate_offsets(OpsContext.from_config(config), TranslateRequest(
                    "primary", "secondary", groups="bench-g.*",
                    method=TranslateMethod.CHECKPOINT))
                runs.append(time.monotonic() - started)
            s = report.summary()
            rows.append((f"drctl checkpoint (median of {len(runs)})", statistics.median(runs),
                         f"{s['partitions']} positions; runs "
                         f"{', '.join(f'{r:.1f}' for r in runs)} s"))

        if not args.tool_sample:
            return
        times = time_kafka_reset_to_datetime(lab, state, groups[: args.tool_sample])
        per_group = statistics.median(times)
        loop = per_group * args.groups
        rows.append((f"kafka-consumer-groups loop (median {per_group:.2f} s x {args.groups})",
                     loop, f"sampled {len(times)} runs, min {min(times):.2f} s, "
                           f"max {max(times):.2f} s"))

        print()
        print(f"{'what':58} {'wall s':>9}  {'vs exact':>9}  notes")
        exact_s = rows[0][1]
        for name, secs, note in rows:
            print(f"{name:58} {secs:9.2f}  {secs / exact_s:8.1f}x  {note}")
        print(f"\nspeed-up of drctl exact --yes over the loop: {loop / exact_s:.0f}x")
    finally:
        lab.down(purge=True)


if __name__ == "__main__":
    main()
