"""The CPU the lab's Spark Connect server costs with the full JIT (C1 and C2) or C1 only
(`SparkConnectServer(quick_jit=True)`, the lab's default since this measurement).

Per run: a Spark Connect server started; --jobs small gap analyses run on it in turn (the
sizes of the suite's: a topic of --records records, two partitions, on a lab of its own);
the server stopped. Variants alternate in one run (full, quick, full, quick, …); the table
gives, per variant, medians over --runs of: the server's CPU until it answers, its CPU for
the jobs, the jobs' median wall time, and its CPU in all.

Usage: .venv/bin/python -m bench.bench_spark_connect_jit [--runs 3] [--jobs 8]
       [--records 2000] [--port-base 27800] [--root DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from bench.common import exit_on_sigterm, fmt, print_table, produce_keyed
from drctl.lab.lab import Lab, LabPorts
from drctl.lab.spark_connect import SparkConnectServer
from drctl.lab.workload import create_topics

TOPIC = "jit-bench"


def _cpu_s(pid: int) -> float:
    """A process's CPU seconds (its own and its reaped children's)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def _one_run(quick: bool, root: Path, port: int, config: Path, jobs: int) -> dict[str, float]:
    server = SparkConnectServer(root, port, quick_jit=quick)
    started = time.monotonic()
    server.up()
    up_wall = time.monotonic() - started
    pid = server.process().pid()
    assert pid is not None
    up_cpu = _cpu_s(pid)
    cfg = yaml.safe_load(config.read_text())
    cfg["spark"] = {"remote": server.url}
    mine = root / "drctl.yaml"
    mine.write_text(yaml.safe_dump(cfg))
    walls = []
    try:
        for i in range(jobs):
            began = time.monotonic()
            done = subprocess.run([sys.executable, "-m", "drctl", "--config", str(mine), "-o",
                                   "json", "gap-analysis", "--topics", TOPIC, "--report-dir",
                                   str(root / f"gap-{i}")], capture_output=True, text=True,
                                  timeout=600)
            if done.returncode != 0:
                raise SystemExit(f"gap-analysis exit {done.returncode}: {done.stderr[-2000:]}")
            walls.append(time.monotonic() - began)
        total = _cpu_s(pid)
    finally:
        server.down()
    return {"up_wall": up_wall, "up_cpu": up_cpu, "jobs_cpu": total - up_cpu,
            "job_wall": statistics.median(walls), "cpu": total}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=8)
    parser.add_argument("--records", type=int, default=2000)
    parser.add_argument("--port-base", type=int, default=27800)
    parser.add_argument("--root", type=Path, default=None)
    args = parser.parse_args()
    exit_on_sigterm()
    root = args.root or Path(tempfile.mkdtemp(prefix="drctl-bench-jit-"))
    lab = Lab(root / "lab")
    base = args.port_base
    try:
        state = lab.up(ports=LabPorts(base, base + 2, base + 4))
        clients = lab.clients(state, "primary")
        create_topics(clients, (TOPIC,), 2)
        produce_keyed(clients, TOPIC, 2, args.records)
        time.sleep(5)  # replicated (the jobs compare whatever is there)
        results: dict[str, list[dict[str, float]]] = {"full": [], "quick": []}
        for run in range(args.runs):
            for variant in ("full", "quick"):
                where = root / f"{variant}-{run}"
                where.mkdir()
                results[variant].append(_one_run(variant == "quick", where, base + 6,
                                                 lab.config_file, args.jobs))
                print(variant, run, {k: round(v, 2) for k, v in results[variant][-1].items()},
                      file=sys.stderr)
    finally:
        lab.down()
        if args.root is None:
            shutil.rmtree(root, ignore_errors=True)

    def med(variant: str, key: str) -> float:
        return statistics.median(r[key] for r in results[variant])

    keys = [("up_wall", "server up, wall s"), ("up_cpu", "server up, CPU s"),
            ("jobs_cpu", f"{args.jobs} jobs, server CPU s"),
            ("job_wall", "a job, wall s (median)"), ("cpu", "server CPU in all, s")]
    print_table([f"median of {args.runs}", "full JIT", "C1 only", "C1 / full"],
                [[label, fmt(med("full", k)), fmt(med("quick", k)),
                  f"{med('quick', k) / med('full', k):.2f}"] for k, label in keys])


if __name__ == "__main__":
    main()
