"""Failover at scale: groups x 16 partitions on a bench lab, wall time from start to report.

Each run is `drctl failover --yes` (unplanned, source reachable: exact offsets), as an
operator runs it (a new process, JSON to a pipe), from the same state: the lab's connectors
running again and a state directory and topic of its own (a new incident). With --before DIR
(a checkout, e.g. the main branch's) the runs alternate between DIR's code and this
checkout's, and a before/after table follows. --planned adds the planned switchover (quiet
source, catch-up, stop, offsets, report), this checkout's code only.

Usage: .venv/bin/python -m bench.bench_failover [--groups 200] [--partitions 16]
       [--records 100000] [--port-base 46100] [--repeat 1] [--before /work/main] [--planned]
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

import yaml

from bench.common import drctl_argv_env, exit_on_sigterm, print_before_after, produce_keyed, sides
from drctl.config import load_config
from drctl.kafka.clients import ClusterClients
from drctl.kafka.groups import alter_offsets_many
from drctl.kafka.offsets import watermarks
from drctl.lab.lab import Lab, LabPorts
from drctl.lab.workload import create_topics


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--groups", type=int, default=200)
    ap.add_argument("--partitions", type=int, default=16)
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--port-base", type=int, default=46100)
    ap.add_argument("--repeat", type=int, default=1, help="runs per side; median shown")
    ap.add_argument("--before", type=Path, default=None,
                    help="a checkout whose code the 'before' runs use")
    ap.add_argument("--planned", action="store_true", help="also a planned switchover")
    args = ap.parse_args()
    exit_on_sigterm()
    root = Path(tempfile.mkdtemp(prefix="drctl-bench-failover-"))
    lab = Lab(root / "lab")
    b = args.port_base
    try:
        lab.up(ports=LabPorts(b, b + 2, b + 4))
        config = load_config(lab.config_file)
        src = ClusterClients.for_cluster(config, "primary")
        dst = ClusterClients.for_cluster(config, "secondary")
        topic = "bench-fo"
        create_topics(src, (topic,), args.partitions)
        produce_keyed(src, topic, args.partitions, args.records)
        tps = [(topic, p) for p in range(args.partitions)]
        ends = watermarks(src.admin(), tps)
        rng = random.Random(3)
        failed = alter_offsets_many(src, {f"bench-fo-{i:05d}": {
            tp: rng.randrange(1, ends[tp][1]) for tp in tps} for i in range(args.groups)})
        if failed:
            raise SystemExit(f"{len(failed)} groups could not be committed")
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            if topic in dst.admin().list_topics(timeout=10).topics and sum(
                    e for _, e in watermarks(dst.admin(), tps).values()) >= args.records:
                break
            time.sleep(1)
        print(f"{args.groups} groups x {args.partitions} partitions on {args.records} records")

        walls: dict[str, list[float]] = {}
        kinds: list[tuple[str, list[str]]] = [("failover", [])]
        if args.planned:
            kinds.append(("planned", ["--planned"]))
        run = 0
        for kind, extra in kinds:
            for _ in range(args.repeat):
                for side, tree in sides(args.before if kind == "failover" else None):
                    run += 1
                    lab.up(ports=LabPorts(b, b + 2, b + 4))  # connectors running again
                    config_file = _config_of_its_own(lab.config_file, root, run)
                    argv, env = drctl_argv_env(tree)
                    started = time.monotonic()
                    proc = subprocess.run(
                        [*argv, "--config", str(config_file), "-o", "json", "failover",
                         "--yes", "--groups", "bench-fo-.*", *extra],
                        capture_output=True, text=True, timeout=3600, env=env)
                    wall = time.monotonic() - started
                    if proc.returncode != 0:
                        raise SystemExit(f"{kind} {side}: exit {proc.returncode}: "
                                         f"{proc.stderr[-2000:]}")
                    summary = (json.loads(proc.stdout).get("translation") or {}).get(
                        "summary", {})
                    if summary.get("exact") != args.groups * args.partitions:
                        raise SystemExit(f"{kind} {side}: not every position exact: {summary}")
                    walls.setdefault(f"{kind} ({side})" if kind == "planned" else side,
                                     []).append(wall)
                    print(f"{kind} {side}: {wall:.1f} s, {summary.get('partitions')} "
                          "positions exact", flush=True)
        print_before_after("drctl failover --yes (source reachable, exact)",
                           {k: v for k, v in walls.items() if k in ("before", "after")})
        for key, runs in walls.items():
            if key.startswith("planned"):
                print(f"planned switchover: median {statistics.median(runs):.1f} s of "
                      f"{', '.join(f'{r:.1f}' for r in runs)}")
    finally:
        lab.down(purge=True)


def _config_of_its_own(config_file: Path, root: Path, run: int) -> Path:
    """The lab's config with a state directory and topic of this run's: a new incident."""
    raw = yaml.safe_load(config_file.read_text())
    raw["state"] = {"dir": str(root / f"state-{run}"), "topic": f"_drctl_state_bench_{run}"}
    path = root / f"drctl-{run}.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


if __name__ == "__main__":
    main()
