"""Failover at scale: 200 groups x 16 partitions on a bench lab, wall time from start to report.

Times `run_failover` (unplanned, source reachable: exact offsets) plus writing the report, and
the planned switchover (quiet source, catch-up, stop, offsets, report) on the same data after a
reset of the lab's connectors.

Usage: .venv/bin/python -m bench.bench_failover [--groups 200] [--partitions 16]
       [--records 100000] [--port-base 46100]
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import tempfile
import time
from pathlib import Path

from bench.common import produce_keyed
from drctl.config import StateSettings, load_config
from drctl.context import OpsContext
from drctl.kafka.clients import ClusterClients
from drctl.kafka.groups import alter_offsets
from drctl.kafka.offsets import watermarks
from drctl.lab.lab import Lab, LabPorts
from drctl.lab.workload import create_topics
from drctl.ops.failover import FailoverOptions, run_failover


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--groups", type=int, default=200)
    ap.add_argument("--partitions", type=int, default=16)
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--port-base", type=int, default=46100)
    args = ap.parse_args()
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
        for i in range(args.groups):
            alter_offsets(src, f"bench-fo-{i:03d}",
                          {tp: rng.randrange(1, ends[tp][1]) for tp in tps})
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            if topic in dst.admin().list_topics(timeout=10).topics and sum(
                    e for _, e in watermarks(dst.admin(), tps).values()) >= args.records:
                break
            time.sleep(1)
        rows = []
        for planned in (False, True):
            state = StateSettings(root / f"state-{planned}", f"_drctl_state_bench_{planned}")
            cfg = dataclasses.replace(config, state=state)
            lab.up(ports=LabPorts(b, b + 2, b + 4))  # connectors running again
            started = time.monotonic()
            run_ctx = OpsContext.from_config(cfg)
            result = run_failover(run_ctx, FailoverOptions(planned=planned, groups="bench-fo-.*"))
            result.write_reports(run_ctx)
            elapsed = time.monotonic() - started
            summary = (result.translation or {}).get("summary", {})
            rows.append(("planned switchover" if planned else "failover (source reachable)",
                         elapsed, f"{summary.get('partitions')} positions, "
                                  f"{summary.get('exact')} exact, "
                                  f"{summary.get('applied')} groups applied"))
        print(f"\n{'what':32} {'wall s':>8}  notes")
        for name, secs, note in rows:
            print(f"{name:32} {secs:8.2f}  {note}")
    finally:
        lab.down(purge=True)


if __name__ == "__main__":
    main()
