"""Failback at size: a topic with millions of replicated records and a small gap.

    .venv/bin/python -m bench.bench_failback [--sizes 2000000] [--partitions 8] [--gap 1000]
        [--post 200] [--repeat 1] [--port-base 27100] [--engines remote,spawned]

Per size, on a lab of its own (the lab's MirrorMaker 2 replicates primary -> secondary):
  1. N records (100-byte values, 5,000 keys) produced to the primary and replicated;
  2. replication stops; --gap more records reach only the primary: keys of their own, except
     every tenth, whose key is written again after the failover (a conflict);
  3. the primary is killed; `drctl failover --yes` with the source down;
  4. --post writes on the secondary, the conflicting keys among them; the primary comes back;
  5. `drctl failback --check-order --reconcile copy-safe --yes`, timed as a whole command.
Printed: the command's wall time, the Spark job's (its summary's elapsed_s, JVM start included)
and its phases, the gap it found against what was produced, and the verified range the failback
report states per partition.
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
import threading
import time
from pathlib import Path
from typing import Any

import yaml

from bench.common import exit_on_sigterm, print_table, replicated, scoped_topic, wait
from drctl.kafka.clients import ClusterClients
from drctl.lab.lab import OWN_SERVER, Lab, LabPorts

REPO = Path(__file__).resolve().parents[1]


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def drctl(config: Path, *argv: str) -> tuple[int, dict[str, Any], float, list[str]]:
    """One drctl command as the operator runs it: exit status, its JSON, wall seconds, and
    its progress lines on stderr, each with the second it was printed at."""
    started = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "drctl", "--config", str(config),
                             "--output", "json", *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    stdout: list[str] = []
    reader = threading.Thread(target=lambda: stdout.append(proc.stdout.read()
                                                           if proc.stdout else ""))
    reader.start()
    lines = [f"{time.monotonic() - started:6.1f}s {line.rstrip()}"
             for line in proc.stderr or [] if line.strip()]
    proc.wait(3600)
    reader.join()
    elapsed = time.monotonic() - started
    try:
        data = json.loads("".join(stdout) or "{}")
    except json.JSONDecodeError:
        data = {}
    if proc.returncode not in (0, 3):
        sys.stderr.write("\n".join(lines[-40:]) + "\n")
    return proc.returncode, data, elapsed, lines


def produce_gap(clients: ClusterClients, topic: str, partitions: int, count: int) -> int:
    """The records only the primary gets; returns how many have a key written again later."""
    producer = clients.producer()
    now = int(time.time() * 1000)
    for i in range(count):
        key = f"conflict-{i}" if i % 10 == 0 else f"gap-{i}"
        producer.produce(topic, key=key.encode(), value=f"gap-{i}".encode(),
                         partition=i % partitions, timestamp=now + i)
    producer.flush(60)
    return len(range(0, count, 10))


def produce_post(clients: ClusterClients, topic: str, partitions: int, count: int, gap: int
                 ) -> None:
    """Post-failover writes: the conflicting keys again, then new keys."""
    producer = clients.producer()
    keys = [f"conflict-{i}" for i in range(0, gap, 10)]
    keys += [f"post-{i}" for i in range(max(0, count - len(keys)))]
    for i, key in enumerate(keys):
        gap_index = int(key.split("-")[1]) if key.startswith("conflict-") else i
        producer.produce(topic, key=key.encode(), value=f"post-{i}".encode(),
                         partition=gap_index % partitions)
    producer.flush(60)


def restore(lab: Lab, ports: LabPorts) -> None:
    """Forward replication running again, an earlier run's reverse flow gone (with names kept
    both directions at once would copy records in a loop)."""
    state = lab.load_state()
    client = lab.connect_client(state)
    for name in client.connectors() or []:
        if name.startswith("mm2-secondary-primary"):
            client.delete(name)
    lab.up(ports=ports)


def with_engine(config: Path, engine: str) -> None:
    """The gap job on the lab's Spark Connect server (`remote`: the lab's config as it is) or
    a job of its own (`spawned`)."""
    if engine == "spawned":
        raw = yaml.safe_load(config.read_text())
        raw["spark"] = {"master": "local[2]"}
        config.write_text(yaml.safe_dump(raw))


def one_run(lab: Lab, ports: LabPorts, root: Path, ns: str, size: int, partitions: int,
            gap: int, post: int, engine: str = "remote") -> dict[str, Any]:
    restore(lab, ports)
    log(f"{ns}: producing {size:,} records to the primary")
    config, _, src, dst, topic = scoped_topic(lab, root, ns, "big", partitions, size)
    with_engine(config, engine)
    started = time.monotonic()
    wait(lambda: replicated(src, dst, topic, partitions, size), 3600, "replication")
    log(f"{ns}: replicated in {time.monotonic() - started:.0f} s")
    time.sleep(2.5)  # Connect flushes its source offsets: no re-copy after the kill
    lab.fail("replication")
    conflicts = produce_gap(src, topic, partitions, gap)
    lab.fail("primary")
    lab.heal("replication")  # the Connect worker lives on; its source is gone
    code, out, failover_s, _ = drctl(config, "failover", "--yes", "--deadline", "2")
    if code not in (0, 3):
        raise SystemExit(f"failover exited {code}")
    log(f"{ns}: failover exit {code} in {failover_s:.1f} s")
    produce_post(dst, topic, partitions, post, gap)
    lab.heal("primary")
    log(f"{ns}: failback --check-order")
    code, out, failback_s, progress = drctl(config, "failback", "--check-order", "--reconcile",
                                  "copy-safe", "--yes")
    if code != 0:
        raise SystemExit(f"failback exited {code}: {json.dumps(out)[:2000]}")
    found = out["gap"]
    summary = json.loads((Path(found["out_dir"]) / "summary.json").read_text())
    report = next(Path(p) for p in out["reports"] if p.endswith(".md")).read_text()
    assert all(v["statement"] in report for v in found["verified"]), \
        "the report states every verified range"
    verified = [f"{v['topic']}[{v['partition']}]: {v['statement']}" for v in found["verified"]]
    return {"size": size, "engine": engine, "failback_s": failback_s,
            "spark_s": summary.get("elapsed_s", 0.0),
            "phases": summary.get("phases_s", {}), "source_compared": found["source_records"],
            "gap_found": found["safe"] + found["conflict"] + found["unkeyed"],
            "conflict": found["conflict"], "conflict_made": conflicts, "gap_made": gap,
            "copied": out["reconcile"].get("copy_safe", {}).get("copied", 0),
            "verified": verified, "progress": progress}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="2000000")
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--gap", type=int, default=1000)
    ap.add_argument("--post", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--port-base", type=int, default=27100)
    ap.add_argument("--engines", default="remote",
                    help="remote (the lab's Spark Connect server), spawned (a job of its own) "
                         "or both, comma-separated: alternated per repeat")
    args = ap.parse_args()
    exit_on_sigterm()
    engines = args.engines.split(",")
    root = Path(tempfile.mkdtemp(prefix="drctl-bench-failback-"))
    lab = Lab(root / "lab")
    b = args.port_base
    runs: list[dict[str, Any]] = []
    try:
        ports = LabPorts(b, b + 2, b + 4, b + 6, b + 8)
        state = lab.up(ports=ports,
                       spark_connect=OWN_SERVER if "remote" in engines else None)
        print(f"# bench_failback on {os.cpu_count()} cores, load average "
              f"{os.getloadavg()[0]:.1f} at start, Kafka {state.kafka_version}\n", flush=True)
        for size in (int(s) for s in args.sizes.split(",")):
            for i in range(args.repeat):
                # Alternated, so the machine's drift falls on every engine alike.
                for engine in (engines if i % 2 == 0 else engines[::-1]):
                    runs.append(one_run(lab, ports, root, f"fb{size // 1000}k-{i}-{engine}",
                                        size, args.partitions, args.gap, args.post, engine))
                    r = runs[-1]
                    log(f"{engine}: failback {r['failback_s']:.1f} s, Spark "
                        f"{r['spark_s']:.1f} s, phases {r['phases']}")
        rows = []
        for size, engine in dict.fromkeys((r["size"], r["engine"]) for r in runs):
            mine = [r for r in runs if r["size"] == size and r["engine"] == engine]
            last = mine[-1]
            rows.append([f"{size:,}", engine, f"{args.gap:,}",
                         statistics.median(r["failback_s"] for r in mine),
                         statistics.median(r["spark_s"] for r in mine),
                         f"{last['source_compared']:,}",
                         f"{last['gap_found']:,} ({last['conflict']} conflict)",
                         f"{last['copied']:,}",
                         ", ".join(f"{r['spark_s']:.1f}" for r in mine)])
        print(f"\n### failback --check-order, {args.partitions} partitions (medians of "
              f"{args.repeat})\n")
        print_table(["replicated records", "gap job on", "gap produced", "failback wall s",
                     "Spark job s (JVM start included)", "source records compared",
                     "gap found", "copied (safe)", "Spark job runs s"], rows)
        for r in runs:
            bad = r["gap_found"] != r["gap_made"] or r["conflict"] != r["conflict_made"]
            print(f"{r['size']:,} ({r['engine']}): gap found {r['gap_found']} of "
                  f"{r['gap_made']} produced, "
                  f"{r['conflict']} of {r['conflict_made']} conflicts"
                  + (" — MISMATCH" if bad else ""))
        print("\nThe last failback's progress (seconds since it started):\n")
        for line in runs[-1]["progress"] if runs else []:
            print(f"    {line}")
        print("\nVerified range, as the last failback report states it:")
        for line in runs[-1]["verified"] if runs else []:
            print(f"- {line}")
        print(f"\nload average at the end {os.getloadavg()[0]:.1f}")
    finally:
        lab.down(purge=True)
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
