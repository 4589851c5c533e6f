"""A warm gap job on the lab's Spark Connect server, small gap and large gap, this tree
against another (`--before DIR`, a checkout of an earlier commit) alternated in one run.

    .venv/bin/python -m bench.bench_gap_warm --before /tmp/before --repeat 5

On a lab of its own with its own Spark Connect server (replication stopped: the bench writes
both sides itself), per size a topic whose last --gap records are only on the source. Each
job is a process of its own, as a failback's or `drctl gap-analysis`'s is: the plan (tail
scope, --check-order, post-failover writes on the target), then `run_gap_analysis` on the
server. The server is warmed first by --warm jobs of each tree; then every round runs each
size under each tree, trees alternated (before, after, after, before, …). Per size and
tree, medians over --repeat of: the job (`run_gap_analysis`, its session and its summary
included), the Spark work inside it (its `elapsed_s`), the process's wall time; and the
server's CPU per job; then the Spark work by phase. Every job must find exactly the gap.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import exit_on_sigterm, print_table
from drctl.config import load_config
from drctl.kafka.clients import ClusterClients
from drctl.lab.lab import OWN_SERVER, Lab, LabPorts
from drctl.lab.workload import create_topics

# One job in a process of its own, against whichever drctl is first on sys.path (this tree,
# or --before's through PYTHONPATH): only APIs both have.
_JOB = r"""
import json, sys, time
from pathlib import Path
started = time.monotonic()
from drctl.config import load_config
from drctl.context import OpsContext
from drctl.gap.planner import plan_gap_analysis
from drctl.gap.runner import run_gap_analysis
config_file, topic, at_failover, out = sys.argv[1:5]
f = {topic: {int(p): end for p, end in json.loads(at_failover).items()}}
config = load_config(Path(config_file))
ctx = OpsContext.from_config(config)
imported = time.monotonic()
plan = plan_gap_analysis(ctx, [topic], check_order=True, out_dir=Path(out), target_end=f,
                         post_failover_start=f)
planned = time.monotonic()
with run_gap_analysis(plan, config.spark, deadline_s=60) as result:
    done = time.monotonic()
    phases = json.loads((Path(out) / "summary.json").read_text()).get("phases_s", {})
    print(json.dumps({"import_s": imported - started, "plan_s": planned - imported,
                      "job_s": done - planned, "elapsed_s": result.elapsed_s,
                      "phases": phases,
                      "unreplicated": result.totals["unreplicated"],
                      "safe": result.totals.get("safe"),
                      "conflict": result.totals.get("conflict")}))
"""


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def _produce(clients: list[ClusterClients], topic: str, count: int, partitions: int,
             only_first_after: int) -> None:
    """`count` keyed 100-byte records; from `only_first_after` on, on the first cluster
    only (the gap)."""
    producers = [c.producer(**{"linger.ms": "50", "batch.size": "1000000",
                               "compression.type": "lz4"}) for c in clients]
    base = int(time.time() * 1000) - count
    for i in range(count):
        for p in producers if i < only_first_after else producers[:1]:
            while True:
                try:
                    p.produce(topic, key=b"k%d" % (i % 50_000), value=b"v%09d" % i + b"x" * 90,
                              partition=i % partitions, timestamp=base + i // 20)
                    break
                except BufferError:
                    p.poll(0.05)
        if i % 10_000 == 0:
            for p in producers:
                p.poll(0)
    for p in producers:
        assert p.flush(300) == 0


def _post_failover_writes(clients: ClusterClients, topic: str, partitions: int,
                          count: int) -> dict[str, int]:
    """The target's ends before `count` post-failover writes (some keys the gap has too):
    the failover point of the plan's order check."""
    from drctl.kafka.offsets import watermarks

    ends = {str(p): hi for (_, p), (_, hi) in watermarks(
        clients.admin(), [(topic, p) for p in range(partitions)]).items()}
    producer = clients.producer()
    for i in range(count):
        producer.produce(topic, key=b"k%d" % (49_999 - i), value=b"post", partition=i % partitions)
    producer.flush(60)
    return ends


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", type=Path, default=None,
                        help="a checkout of the earlier commit (omit: this tree only)")
    parser.add_argument("--small", default="2000:30", help="records per side : gap")
    parser.add_argument("--large", default="400000:100000", help="records per side : gap")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--warm", type=int, default=3, help="warm-up jobs per tree first")
    parser.add_argument("--port-base", type=int, default=27900)
    args = parser.parse_args()
    exit_on_sigterm()
    trees = {"after": Path(__file__).resolve().parents[1]}
    if args.before is not None:
        trees = {"before": args.before.resolve(), **trees}
    sizes = {"small": tuple(int(x) for x in args.small.split(":")),
             "large": tuple(int(x) for x in args.large.split(":"))}
    root = Path(tempfile.mkdtemp(prefix="drctl-bench-gap-warm-"))
    lab = Lab(root / "lab")
    base = args.port_base
    runs: dict[tuple[str, str], list[dict[str, Any]]] = {}
    try:
        lab.up(ports=LabPorts(base, base + 2, base + 4, spark_connect=base + 5),
               spark_connect=OWN_SERVER, notify=lambda m: print(m, file=sys.stderr))
        lab.fail("replication")  # both sides written by the bench
        config = load_config(lab.config_file)
        primary = ClusterClients.for_cluster(config, "primary")
        secondary = ClusterClients.for_cluster(config, "secondary")
        ends = {}
        for size, (records, gap) in sizes.items():
            topic = f"warm-{size}"
            for c in (primary, secondary):
                create_topics(c, (topic,), args.partitions)
            _produce([primary, secondary], topic, records, args.partitions, records - gap)
            ends[size] = _post_failover_writes(secondary, topic, args.partitions, 20)
        server = lab.spark_server(lab.load_state().ports).process().pid()
        assert server is not None

        def job(tree: str, size: str) -> dict[str, Any]:
            out = root / "out" / f"{tree}-{size}-{time.monotonic_ns()}"
            env = {**os.environ, "PYTHONPATH": str(trees[tree])}
            cpu = _cpu_s(server)
            began = time.monotonic()
            done = subprocess.run([sys.executable, "-c", _JOB, str(lab.config_file),
                                   f"warm-{size}", json.dumps(ends[size]), str(out)],
                                  capture_output=True, text=True, env=env, timeout=900,
                                  cwd=trees[tree])
            wall = time.monotonic() - began
            if done.returncode != 0:
                raise SystemExit(f"{tree} {size}: exit {done.returncode}: "
                                 f"{done.stderr[-3000:]}")
            shown = json.loads(done.stdout.strip().splitlines()[-1])
            want = sizes[size][1]
            assert shown["unreplicated"] == want, (tree, size, shown)
            shutil.rmtree(out, ignore_errors=True)
            shown.update(wall_s=wall, server_cpu_s=_cpu_s(server) - cpu)
            print(f"{tree:>6} {size:>5}: job {shown['job_s']:.2f} s (Spark "
                  f"{shown['elapsed_s']:.2f} s), process {wall:.2f} s, server CPU "
                  f"{shown['server_cpu_s']:.2f} s", file=sys.stderr)
            return shown

        for _ in range(args.warm):
            for tree in trees:
                for size in sizes:
                    job(tree, size)
        order = list(trees)
        for i in range(args.repeat):
            for tree in order if i % 2 == 0 else reversed(order):
                for size in sizes:
                    runs.setdefault((size, tree), []).append(job(tree, size))
    finally:
        lab.down()
        shutil.rmtree(root, ignore_errors=True)

    def med(rs: list[dict[str, Any]], key: str) -> float:
        return statistics.median(r[key] for r in rs)

    rows = []
    for size in sizes:
        for tree in trees:
            rs = runs[(size, tree)]
            rows.append([f"{size} ({sizes[size][0]:,} / {sizes[size][1]:,})", tree,
                         f"{med(rs, 'job_s'):.2f}", f"{med(rs, 'elapsed_s'):.2f}",
                         f"{med(rs, 'wall_s'):.2f}", f"{med(rs, 'server_cpu_s'):.2f}"])
        if "before" in trees:
            b, a = runs[(size, "before")], runs[(size, "after")]
            rows.append(["", "after / before", f"{med(a, 'job_s') / med(b, 'job_s'):.2f}",
                         f"{med(a, 'elapsed_s') / med(b, 'elapsed_s'):.2f}",
                         f"{med(a, 'wall_s') / med(b, 'wall_s'):.2f}",
                         f"{med(a, 'server_cpu_s') / med(b, 'server_cpu_s'):.2f}"])
    print_table(["gap (records/side / gap)", "tree", "job s", "Spark work s", "process s",
                 "server CPU s"], rows)
    # Where the Spark work goes: the job's phases (gap/job.py JobEvents), medians per phase.
    phases = sorted({name for rs in runs.values() for r in rs for name in r["phases"]})
    print_table(["gap", "tree", *(f"{name} s" for name in phases)],
                [[size, tree, *(f"{statistics.median(r['phases'].get(name, 0.0) for r in rs):.2f}"
                                for name in phases)]
                 for (size, tree), rs in sorted(runs.items())])
    print(f"medians of {args.repeat} alternated runs after {args.warm} warm-up jobs per tree; "
          "job: run_gap_analysis in its own process (session, job, summary); Spark work: "
          "the job's own elapsed_s; process: the whole process (imports, plan, job)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
