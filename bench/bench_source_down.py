"""A failover with the source killed under `drctl guard`, as a new user runs it, on Kafka 3.9
and 4.x labs in turn (issue 51, "What to build 1": 3.9 re-delivered far more than 4.3).

Per run: a producer at --rate records/s over 4 partitions; groups consuming live on the
primary (`auto`: subscribed, librdkafka's auto-commit every 5 s, as an application with
defaults; `every1`/`every100`: assigned, committing every record / every 100); `drctl guard`
as a service (its own process, --guard-interval); after --run-s the primary and the
applications are SIGKILLed; `drctl failover --yes` with the source down; the primary back;
`drctl audit`. Then, per group and partition, from the records themselves:

  P            the group's last committed source position (read back once the primary is up)
  snapshot     guard's last snapshot: its source offset and age at the kill
  checkpoint   MirrorMaker 2's newest checkpoint: upstream, downstream, age at the kill, and
               its error (the exact translation of its upstream offset minus its downstream)
  sync         the offset sync the checkpoint was translated from (inferred), and the newest
               sync at or before its upstream among all MirrorMaker 2 wrote
  used         what failover placed and from which (snapshot/checkpoint)
  redelivered  the exact position of P minus what was placed (audit's count, checked here)

Usage: .venv/bin/python -m bench.bench_source_down [--versions 3.9.x,4.3.1] [--runs 3]
       [--run-s 60] [--rate 200] [--guard-interval 5] [--port-base 24300] [--root DIR]
       [--json OUT] [--summary OUT.json]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, KafkaException, TopicPartition

from bench.common import (
    drctl_argv_env,
    exit_on_sigterm,
    print_table,
    replicated,
    scoped_config,
    wait,
)
from drctl.codecs.mm2 import decode_checkpoint, decode_offset_sync
from drctl.config import load_config
from drctl.errors import DecodeError, Unreachable
from drctl.kafka.clients import ClusterClients
from drctl.kafka.groups import committed_offsets
from drctl.kafka.offsets import watermarks
from drctl.kafka.records import read_all
from drctl.kafka.topic_scan import read_batches, topic_ranges
from drctl.lab.lab import Lab, LabPorts
from drctl.lab.workload import create_topics
from drctl.retry import RetryPolicy
from drctl.translate.snapshots import GUARD_ROUND_KEY, INVENTORY_KEY, OffsetSnapshot

PARTITIONS = 4
GROUPS = {"auto": "subscribe", "every1": 1, "every100": 100}


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# -- the applications -----------------------------------------------------------------------


def _producer(clients: ClusterClients, topic: str, rate: float) -> None:
    producer = clients.producer(**{"linger.ms": "5", "acks": "all", "enable.idempotence": "true"})
    started, n = time.monotonic(), 0
    while True:
        due = int((time.monotonic() - started) * rate)
        while n < due:
            p = n % PARTITIONS
            try:
                producer.produce(topic, key=f"k{n % 97}".encode(),
                                 value=f"{p}:{n // PARTITIONS}".encode(), partition=p)
            except BufferError:
                break
            n += 1
        producer.poll(0.01)


def _consumer(clients: ClusterClients, topic: str, group: str, how: str | int,
              commits: Path) -> None:
    out = commits.open("a", buffering=1)

    def on_commit(err: Any, parts: list[TopicPartition]) -> None:
        if err is None:
            now = int(time.time() * 1000)
            for tp in parts:
                if tp.error is None and tp.offset >= 0:
                    out.write(f"{now} {group} {tp.partition} {tp.offset}\n")

    if how == "subscribe":
        consumer = clients.consumer(**{"group.id": group, "auto.offset.reset": "earliest",
                                       "enable.auto.commit": "true",
                                       "on_commit": on_commit})
        consumer.subscribe([topic])
        while True:
            consumer.poll(0.2)
    consumer = clients.consumer(**{"group.id": group, "enable.auto.commit": "false",
                                   "fetch.wait.max.ms": "50", "on_commit": on_commit})
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    position: dict[int, int] = {}
    read = 0
    while True:
        for msg in consumer.consume(num_messages=500, timeout=0.2):
            partition, offset = msg.partition(), msg.offset()
            if msg.error() or partition is None or offset is None:
                continue
            position[partition] = offset + 1
            read += 1
            if read % int(how) == 0:
                try:
                    consumer.commit(offsets=[TopicPartition(topic, p, o)
                                             for p, o in position.items()], asynchronous=True)
                except KafkaException:
                    pass


def applications(config_file: Path, topic: str, ns: str, rate: float, commits: Path) -> None:
    """The producer and the groups, in a process of their own (SIGKILLed with the primary)."""
    clients = ClusterClients.for_cluster(load_config(config_file), "primary")
    threads = [threading.Thread(target=_producer, args=(clients, topic, rate), daemon=True)]
    threads += [threading.Thread(target=_consumer, daemon=True,
                                 args=(clients, topic, f"{ns}-{g}", how, commits))
                for g, how in GROUPS.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


# -- reading what each side kept -------------------------------------------------------------


def timed_records(clients: ClusterClients, topic: str) -> list[tuple[Any, int]]:
    """(message, timestamp ms) of every record of a topic."""
    ranges = topic_ranges(clients, topic, policy=RetryPolicy(attempts=3), missing_hint="")
    out: list[tuple[Any, int]] = []
    for batch in read_batches(clients, topic, ranges):
        out.extend((m, m.timestamp()[1]) for m in batch)
    return out


def snapshot_history(dst: ClusterClients, topic: str) -> list[tuple[OffsetSnapshot, int]]:
    out = []
    for msg, ts in timed_records(dst, topic):
        if msg.value() is None or msg.key() in (INVENTORY_KEY, GUARD_ROUND_KEY):
            continue
        out.append((OffsetSnapshot.decode(msg.value()), ts))
    return out


def checkpoint_history(dst: ClusterClients, topic: str, ns: str) -> list[tuple[Any, int]]:
    out = []
    for msg, ts in timed_records(dst, topic):
        try:
            cp = decode_checkpoint(msg.key(), msg.value())
        except DecodeError:
            continue
        if cp.group.startswith(ns):
            out.append((cp, ts))
    return out


def sync_history(src: ClusterClients, topic: str, source_topic: str) -> list[tuple[Any, int]]:
    out = []
    for msg, ts in timed_records(src, topic):
        try:
            sync = decode_offset_sync(msg.key(), msg.value())
        except DecodeError:
            continue
        if sync.topic == source_topic:
            out.append((sync, ts))
    return out


def run_drctl(config: Path, *argv: str, timeout: float = 600) -> tuple[int, dict[str, Any]]:
    cmd, env = drctl_argv_env(None)
    proc = subprocess.run([*cmd, "--config", str(config), "--output", "json", *argv],
                          env=env, capture_output=True, text=True, timeout=timeout)
    try:
        return proc.returncode, json.loads(proc.stdout)
    except json.JSONDecodeError:
        return proc.returncode, {"stdout": proc.stdout[-3000:], "stderr": proc.stderr[-3000:]}


# -- one run ----------------------------------------------------------------------------------


def one_run(lab: Lab, version: str, root: Path, run_s: float, rate: float,
            guard_interval: float, names_kept: bool) -> dict[str, Any]:
    state = lab.load_state()
    ns = f"sd{version[0]}-{int(time.time()) % 100000}"
    config_file = scoped_config(lab, root, ns)
    config = load_config(config_file)
    rep = config.require_replication()
    src = ClusterClients.for_cluster(config, "primary")
    dst = ClusterClients.for_cluster(config, "secondary")
    topic = f"{ns}-orders"
    mirror = rep.mirror_topic(topic)
    create_topics(src, (topic,), PARTITIONS)
    commits_log = root / ns / "commits.log"
    apps = multiprocessing.get_context("fork").Process(
        target=applications, args=(config_file, topic, ns, rate, commits_log), daemon=True)
    apps.start()
    cmd, env = drctl_argv_env(None)
    guard_log = (root / ns / "guard.log").open("w")
    guard = subprocess.Popen([*cmd, "--config", str(config_file), "guard", "--groups",
                              f"{ns}-.*", "--interval", f"{guard_interval}s"],
                             env=env, stdout=subprocess.DEVNULL, stderr=guard_log)
    try:
        wait(lambda: replicated(src, dst, mirror, PARTITIONS, 0) if mirror == topic
             else mirror in dst.admin().list_topics(timeout=10).topics, 120, "topic mirrored")
        started = time.monotonic()
        time.sleep(run_s)
        kill_ms = int(time.time() * 1000)
        lab.fail("primary")
        if apps.pid is not None:
            os.kill(apps.pid, signal.SIGKILL)
        apps.join(30)
        log(f"{version} {ns}: primary killed after {time.monotonic() - started:.0f} s")
        dst_marks = watermarks(dst.admin(), [(mirror, p) for p in range(PARTITIONS)])
        cps = checkpoint_history(dst, f"{rep.source_alias}.checkpoints.internal", ns)
        t0 = time.monotonic()
        status, failover = run_drctl(config_file, "failover", "--yes", "--groups", f"{ns}-.*",
                                     "--deadline", "2")
        failover_s = time.monotonic() - t0
        log(f"{version} {ns}: failover exit {status} in {failover_s:.1f} s")
    finally:
        guard.send_signal(signal.SIGTERM)
        try:
            guard.wait(60)
        except subprocess.TimeoutExpired:
            guard.kill()
            guard.wait()
        guard_log.close()
        if apps.is_alive() and apps.pid is not None:
            os.kill(apps.pid, signal.SIGKILL)
    snaps = snapshot_history(dst, config.state.snapshots_topic)
    lab.heal("primary")
    src = ClusterClients.for_cluster(config, "primary")

    def coordinator_ready() -> bool:
        try:
            committed_offsets(src, [f"{ns}-every1"], deadline_s=10)
            return True
        except Unreachable:
            return False
    wait(coordinator_ready, 120, "group coordinator")
    audit_status, audit = run_drctl(config_file, "audit")
    groups = [f"{ns}-{g}" for g in GROUPS]
    committed = committed_offsets(src, groups)
    syncs = sync_history(src, f"mm2-offset-syncs.{rep.target_alias}.internal", topic)
    source_value = {(r.partition, r.offset): r.value for r in read_all(src, topic)}
    target_offset = {(r.partition, r.value): r.offset for r in read_all(dst, mirror)}
    src_ends = {p: e for (_t, p), (_l, e) in
                watermarks(src.admin(), [(topic, p) for p in range(PARTITIONS)]).items()}
    commit_times: dict[tuple[str, int], list[tuple[int, int]]] = {}
    for line in commits_log.read_text().splitlines() if commits_log.exists() else []:
        ms, g, part, o = line.split()
        commit_times.setdefault((g, int(part)), []).append((int(ms), int(o)))
    guard_text = (root / ns / "guard.log").read_text()
    lab.up(ports=state.ports, names_kept=names_kept)  # connectors running again

    def exact(p: int, upstream: int) -> int | None:
        """The target position right after the copy of source record upstream - 1."""
        if upstream == 0:
            return 0
        value = source_value.get((p, upstream - 1))
        return None if value is None else target_offset.get((p, value))

    placed: dict[tuple[str, int], dict[str, Any]] = {}
    for g in failover.get("translation", {}).get("groups", []):
        for part in g["partitions"]:
            placed[(g["group"], part["partition"])] = part
    audited = {(r["group"], r["partition"]): r for r in audit.get("positions", [])}
    rows = []
    for group in groups:
        for p in range(PARTITIONS):
            pos = committed.get(group, {}).get((topic, p))
            ex = exact(p, pos) if pos else None
            ex = ex + 1 if ex is not None and pos else ex
            mine = [s for s, _ts in snaps if (s.group, s.partition) == (group, p)]
            snap = max(mine, key=lambda s: s.snapshot_ms) if mine else None
            cp_hist = [(c, ts) for c, ts in cps if (c.group, c.partition) == (group, p)]
            cp, cp_ts = max(cp_hist, key=lambda x: x[1]) if cp_hist else (None, None)
            cp_exact = None
            if cp is not None:
                e = exact(p, cp.upstream_offset)
                cp_exact = e + 1 if e is not None and cp.upstream_offset else e
            part_syncs = sorted(((s.upstream_offset, s.downstream_offset, ts)
                                 for s, ts in syncs if s.partition == p), key=lambda x: x[2])
            best = None
            used_sync = None
            if cp is not None:
                before = [s for s in part_syncs if s[0] <= cp.upstream_offset]
                best = max(before, key=lambda s: s[0]) if before else None
                step_down = [s for s in part_syncs if s[1] + (0 if s[0] == cp.upstream_offset
                                                               else 1) == cp.downstream_offset
                             and s[0] <= cp.upstream_offset]
                used_sync = step_down[-1] if step_down else None
            pl = placed.get((group, p), {})
            au = audited.get((group, p), {})
            times = commit_times.get((group, p), [])
            last_commit_ms = max((ms for ms, o in times if o == pos), default=None)
            rows.append({
                "version": version, "ns": ns, "group": group.rsplit("-", 1)[-1], "partition": p,
                "P": pos, "P_exact": ex, "last_commit_age_ms":
                    None if last_commit_ms is None else kill_ms - last_commit_ms,
                "source_end": src_ends.get(p), "target_end": dst_marks[(mirror, p)][1],
                "snap_source": snap.source_offset if snap else None,
                "snap_target": snap.target_offset if snap else None,
                "snap_conf": snap.confidence if snap else None,
                "snap_age_ms": kill_ms - snap.snapshot_ms if snap else None,
                "snap_seen_age_ms": kill_ms - snap.seen_ms if snap else None,
                "cp_up": cp.upstream_offset if cp else None,
                "cp_down": cp.downstream_offset if cp else None,
                "cp_age_ms": kill_ms - cp_ts if cp_ts else None,
                "cp_exact": cp_exact,
                "cp_error": None if cp is None or cp_exact is None
                else cp_exact - cp.downstream_offset,
                "cp_count": len(cp_hist),
                "sync_used": used_sync[:2] if used_sync else None,
                "sync_used_age_at_cp_ms": cp_ts - used_sync[2] if used_sync and cp_ts else None,
                "sync_best": best[:2] if best else None,
                "syncs": len(part_syncs),
                "used": pl.get("confidence"), "placed": pl.get("target_offset"),
                "redelivered": au.get("redelivered"), "skipped": au.get("skipped"),
                "max_redelivered": pl.get("max_redelivered"),
            })
    # Sync spacing: records and seconds between consecutive syncs of each partition in the
    # last 30 s before the kill.
    spacing: list[int] = []
    spacing_s: list[float] = []
    for p in range(PARTITIONS):
        recent = sorted((s for s, ts in syncs if s.partition == p and ts > kill_ms - 30_000),
                        key=lambda s: s.upstream_offset)
        ts_recent = sorted(ts for s, ts in syncs if s.partition == p and ts > kill_ms - 30_000)
        spacing += [b.upstream_offset - a.upstream_offset
                    for a, b in zip(recent, recent[1:], strict=False)]
        spacing_s += [(b - a) / 1000 for a, b in zip(ts_recent, ts_recent[1:], strict=False)]
    # Every checkpoint of the run: its error against the exact translation of its upstream
    # offset, and how long before it the partition's newest offset sync was written (the
    # phase of the checkpoint task's loop against the source task's sync flushes).
    errors: dict[str, list[tuple[int, int, int]]] = {}
    for cp, ts in cps:
        e = exact(cp.partition, cp.upstream_offset)
        if e is None:
            continue
        want = e + 1 if cp.upstream_offset else e
        older = [sts for s, sts in syncs if s.partition == cp.partition and sts <= ts]
        errors.setdefault(cp.group.rsplit("-", 1)[-1], []).append(
            (ts - kill_ms, want - cp.downstream_offset, ts - max(older) if older else -1))
    cp_errors = {g: {"n": len(v), "median": statistics.median(e for _, e, _ in v),
                     "max": max(e for _, e, _ in v),
                     "sync_phase_ms_median": statistics.median(ph for _, _, ph in v)}
                 for g, v in errors.items()}
    round_times = sorted({s.snapshot_ms for s, _ in snaps})
    rounds = [line for line in guard_text.splitlines() if "positions of" in line]
    return {"version": version, "ns": ns, "failover_status": status, "failover_s": failover_s,
            "audit_status": audit_status, "audit_totals": audit.get("totals"), "rows": rows,
            "sync_spacing_records": statistics.median(spacing) if spacing else None,
            "sync_spacing_s": statistics.median(spacing_s) if spacing_s else None,
            "guard_rounds": len(rounds), "guard_last_rounds": rounds[-3:],
            "guard_failed": guard_text.count("round failed"), "cp_errors": cp_errors,
            "cp_error_series": errors,
            "snapshot_rounds_ms_before_kill": [kill_ms - t for t in round_times[-4:]]}


def group_summary(results: list[dict[str, Any]]) -> list[list[Any]]:
    """Per run and group: what failover used, what was re-delivered, and how much of it is the
    checkpoint's own error (offset-sync spacing) against what the group read after the
    position used was taken (the age of the snapshot or checkpoint at the kill); ages and the
    group's last commit in seconds before the kill."""
    out: list[list[Any]] = []
    for i, r in enumerate(results):
        by_group: dict[str, list[dict[str, Any]]] = {}
        for row in r["rows"]:
            by_group.setdefault(row["group"], []).append(row)
        for group, rows in by_group.items():
            sync_error = sum(row["cp_error"] or 0 for row in rows if row["used"] == "checkpoint")
            redelivered = sum(row["redelivered"] or 0 for row in rows)
            used = "/".join(sorted({str(row["used"]) for row in rows}))
            ages = {"snapshot": "snap_age_ms", "checkpoint": "cp_age_ms"}
            age = max((row[ages[row["used"]]] or 0 for row in rows if row["used"] in ages),
                      default=None)
            out.append([r["version"], r.get("run", i + 1), group, used, redelivered, sync_error,
                        redelivered - sync_error,
                        None if age is None else round(age / 1000, 1),
                        max(row["snap_age_ms"] or 0 for row in rows) / 1000,
                        max(row["cp_age_ms"] or 0 for row in rows) / 1000,
                        min((row["last_commit_age_ms"] for row in rows
                             if row["last_commit_age_ms"] is not None), default=0) / 1000])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--versions", default="3.9.x,4.3.1")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--run-s", type=float, default=60)
    ap.add_argument("--rate", type=float, default=200)
    ap.add_argument("--guard-interval", type=float, default=5)
    ap.add_argument("--port-base", type=int, default=24300)
    ap.add_argument("--prefixed", action="store_true")
    ap.add_argument("--root", type=Path, default=Path("/tmp/bench-source-down"))
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--summary", type=Path, default=None,
                    help="Print the tables of an earlier run's --json file; run nothing.")
    args = ap.parse_args()
    exit_on_sigterm()
    if args.summary:
        print_results(json.loads(args.summary.read_text()))
        return
    versions = args.versions.split(",")
    labs = {}
    for i, v in enumerate(versions):
        base = args.port_base + 40 * i
        labs[v] = (Lab(args.root / f"lab-{v}"), LabPorts(base, base + 10, base + 20, base + 30,
                                                          base + 35))
    results: list[dict[str, Any]] = []
    try:
        for run in range(args.runs):
            for v in versions:
                lab, ports = labs[v]
                for other, (olab, _) in labs.items():
                    if other != v and olab.state_file.exists():
                        olab.down()
                log(f"run {run + 1}: Kafka {v}")
                lab.up(ports=ports, kafka_version=v, names_kept=not args.prefixed)
                results.append(one_run(lab, v, args.root, args.run_s, args.rate,
                                       args.guard_interval, not args.prefixed))
                r = results[-1]
                r["run"] = run + 1
                log(f"run {run + 1} {v}: audit {r['audit_totals']}")
                if args.json:
                    args.json.write_text(json.dumps(results, indent=1))
    finally:
        for lab, _ in labs.values():
            if lab.state_file.exists():
                lab.down(purge=True)
    print_results(results)


def print_results(results: list[dict[str, Any]]) -> None:
    for r in results:
        print(f"\n### Kafka {r['version']} ({r['ns']}): failover exit {r['failover_status']}, "
              f"audit {r['audit_totals']}; offset syncs every {r['sync_spacing_records']} "
              f"records / {r['sync_spacing_s']} s; guard rounds {r['guard_rounds']}\n")
        cols = ["group", "partition", "P", "last_commit_age_ms", "snap_source", "snap_age_ms",
                "cp_up", "cp_down", "cp_age_ms", "cp_error", "sync_used", "sync_best", "used",
                "redelivered", "skipped", "max_redelivered"]
        print_table(cols, [[str(row[c]) if isinstance(row[c], (list, tuple)) or row[c] is None
                            else row[c] for c in cols] for row in r["rows"]])
    print("\n### Per group\n")
    print_table(["Kafka", "run", "group", "used", "redelivered", "checkpoint sync error",
                 "read after the position used", "age of what was used s",
                 "snapshot age s", "checkpoint age s", "its last commit s"],
                group_summary(results))


if __name__ == "__main__":
    main()
