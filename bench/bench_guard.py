"""`drctl guard` and the failover it serves, on a bench lab (issue 14, item 5).

Three sub-benchmarks, chosen with --only (default: all), on one lab:

  redelivery  A steady producer (--rate records/s over 4 partitions) and five groups consuming
              on the primary, committing every record, every 100, every 1,000, a laggard at half
              speed, and one that stops halfway; `drctl guard` runs beside them. The primary is
              SIGKILLed mid-stream. With the source down, translate-offsets --method checkpoint
              and --method snapshot (dry runs, same state), then `failover` (auto: snapshot),
              then the primary comes back and the audit runs. Re-delivered and skipped records
              per group and method are counted independently from the records themselves
              (each value names its partition and sequence number) and checked against the
              audit. Once per MirrorMaker 2 setting (--mm2): `lab` (the lab's test-speed
              intervals), `defaults` (Kafka's: emit.checkpoints.interval.seconds=60,
              refresh.groups.interval.seconds=600, refresh.topics.interval.seconds=600,
              offset.lag.max=100, set on the running connectors after the groups exist) and
              `defaults-young` (the same, but the groups start after MirrorMaker 2's last group
              refresh, as a group created minutes before an outage).
  guard-cost  Guard's CPU seconds per round and its RSS at --guard-groups x 16 partitions,
              moving --move-fraction of the groups between rounds (read from /proc).
  failover    translate-offsets --method exact --yes for --fo-groups x 16 partitions, source
              up (median of --repeat), then `failover` itself once, beside
              `kafka-consumer-groups --reset-offsets --to-datetime` per group (timed on a sample,
              extrapolated: one JVM per group).

Usage: .venv/bin/python -m bench.bench_guard [--only redelivery,guard-cost,failover] [--quick]
       [--mm2 lab,defaults] [--run-s-lab 40] [--run-s-defaults 150] [--rate 400]
       [--guard-interval 5] [--guard-groups 1000] [--guard-rounds 8] [--fo-groups 10000]
       [--fo-records 200000] [--tool-sample 10] [--repeat 3] [--port-base 25100]
"""

from __future__ import annotations

import argparse
import dataclasses
import multiprocessing
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, KafkaException, TopicPartition

from bench.common import (
    exit_on_sigterm,
    print_table,
    replicated,
    scoped_topic,
    time_kafka_reset_to_datetime,
    wait,
)
from drctl.config import StateSettings, load_config
from drctl.context import OpsContext
from drctl.errors import Unreachable
from drctl.kafka.checkpoints import read_checkpoints
from drctl.kafka.clients import ClusterClients
from drctl.kafka.groups import alter_offsets_many, committed_offsets
from drctl.kafka.offsets import watermarks
from drctl.kafka.records import read_all
from drctl.lab.lab import Lab, LabPorts, LabState
from drctl.ops.one_way.failover import run_failover
from drctl.ops.steps.audit import audit_incident
from drctl.ops.steps.failover_point import FailoverOptions
from drctl.translate.engine import TranslateRequest, translate_offsets
from drctl.translate.model import TranslateMethod, TranslationReport

REPO = Path(__file__).resolve().parents[1]
PARTITIONS = 4
WIDE = 16  # partitions of the guard-cost and failover topics


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# -- the workload -------------------------------------------------------------------------


@dataclass(frozen=True)
class GroupSpec:
    name: str
    commit_every: int  # records between commits
    speed: float = 1.0  # fraction of the producer's rate it can read (1: keeps up)
    stop_at: float = 1.0  # fraction of the run after which it stops reading


GROUPS = (GroupSpec("every1", 1), GroupSpec("every100", 100), GroupSpec("every1000", 1000),
          GroupSpec("laggard", 100, speed=0.5), GroupSpec("stopped", 100, stop_at=0.5))


def steady_producer(clients: ClusterClients, topic: str, rate: float,
                    stop: threading.Event) -> threading.Thread:
    """`rate` records/s round robin; each value is "<partition>:<sequence>", the sequence
    counting that partition's records, so a record is found by value on either cluster."""
    def run() -> None:
        producer = clients.producer(**{"linger.ms": "5", "acks": "all",
                                       "enable.idempotence": "true"})
        started, n = time.monotonic(), 0
        while not stop.is_set():
            due = int((time.monotonic() - started) * rate)
            while n < due:
                p = n % PARTITIONS
                try:
                    producer.produce(topic, key=f"k{n % 97}".encode(),
                                     value=f"{p}:{n // PARTITIONS}".encode(), partition=p)
                except BufferError:
                    break  # the primary is gone: records queue up until purged
                n += 1
            producer.poll(0.01)
        producer.purge()
        producer.flush(1)
    thread = threading.Thread(target=run, name="producer", daemon=True)
    thread.start()
    return thread


def paced_consumer(clients: ClusterClients, topic: str, group: str, spec: GroupSpec, rate: float,
                   run_s: float, stop: threading.Event) -> threading.Thread:
    """Reads the topic from the start (assigned partitions: no group membership to leave when
    the primary dies) and commits what it has read every `commit_every` records."""
    def run() -> None:
        consumer = clients.consumer(**{"group.id": group, "enable.auto.commit": "false",
                                       "fetch.wait.max.ms": "50"})
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        started, read = time.monotonic(), 0
        position: dict[int, int] = {}
        try:
            while not stop.is_set() and (spec.stop_at >= 1
                                         or time.monotonic() - started < spec.stop_at * run_s):
                allowed = int((time.monotonic() - started) * rate * spec.speed) - read \
                    if spec.speed < 1 else 500
                if allowed <= 0:
                    time.sleep(0.05)
                    continue
                for msg in consumer.consume(num_messages=min(500, allowed), timeout=0.2):
                    partition, offset = msg.partition(), msg.offset()
                    if msg.error() or partition is None or offset is None:
                        continue
                    position[partition] = offset + 1
                    read += 1
                    if read % spec.commit_every == 0:
                        try:
                            consumer.commit(offsets=[TopicPartition(topic, p, o)
                                                     for p, o in position.items()],
                                            asynchronous=True)
                        except KafkaException:
                            pass  # the primary is gone
        finally:
            consumer.close()
    thread = threading.Thread(target=run, name=group, daemon=True)
    thread.start()
    return thread


def run_workload(config_file: Path, topic: str, ns: str, rate: float, run_s: float) -> None:
    """The producer and the groups, in a process of their own (killed, never stopped)."""
    clients = ClusterClients.for_cluster(load_config(config_file), "primary")
    never = threading.Event()
    threads = [steady_producer(clients, topic, rate, never)]
    threads += [paced_consumer(clients, topic, f"{ns}-{g.name}", g, rate, run_s, never)
                for g in GROUPS]
    for t in threads:
        t.join()


# -- guard as the operator runs it ---------------------------------------------------------

ROUND = re.compile(r"guard: (\d+) positions of (\d+) groups, (\d+) moved, (\d+) snapshot")


@dataclass
class GuardRun:
    """`drctl guard` in its own process; every round's log line is timed and its CPU and RSS
    read from /proc right then."""

    proc: subprocess.Popen[str]
    rounds: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    _reader: threading.Thread | None = None

    @classmethod
    def start(cls, config_file: Path, groups: str, interval_s: float) -> GuardRun:
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        proc = subprocess.Popen([sys.executable, "-m", "drctl", "--config", str(config_file),
                                 "guard", "--groups", groups, "--interval", f"{interval_s}s"],
                                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                text=True)
        run = cls(proc)
        run._reader = threading.Thread(target=run._read, daemon=True)
        run._reader.start()
        return run

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            m = ROUND.search(line)
            if m is None:
                if "round failed" in line:
                    self.errors.append(line.strip())
                continue
            cpu, rss, peak = proc_usage(self.proc.pid)
            secs = re.search(r"\(([\d.]+)s\)\s*$", line)
            self.rounds.append({"at": time.monotonic(), "positions": int(m[1]),
                                "groups": int(m[2]), "moved": int(m[3]),
                                "written": int(m[4]), "seconds": float(secs[1]) if secs else None,
                                "cpu_s": cpu, "rss": rss, "peak_rss": peak})

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self._reader is not None:
            self._reader.join(10)
        return self.proc.returncode


def proc_usage(pid: int) -> tuple[float, int, int]:
    """CPU seconds (user + system), RSS and peak RSS in bytes of a process, from /proc."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0.0, 0, 0
    ticks = os.sysconf("SC_CLK_TCK")
    cpu = (int(fields[11]) + int(fields[12])) / ticks

    def kib(name: str) -> int:
        m = re.search(rf"^{name}:\s+(\d+) kB", status, re.M)
        return int(m[1]) * 1024 if m else 0
    return cpu, kib("VmRSS"), kib("VmHWM")


# -- helpers on the lab --------------------------------------------------------------------


def set_mm2_defaults(lab: Lab, state: LabState) -> None:
    """Kafka's default intervals on the running connectors (a config update restarts their
    tasks, which discover topics and groups once at start)."""
    client = lab.connect_client(state)
    for name, cfg in dataclasses.replace(lab.flow(state), fast=False).connectors().items():
        client.put_config(name, cfg)
    wait(lambda: all(client.connector_state(n) == ("RUNNING", ["RUNNING"])
                     for n in lab.flow(state).connectors()), 120, "connectors restarted")


def coordinator_ready(clients: ClusterClients, group: str) -> bool:
    """A restarted broker answers offset reads only once it has loaded __consumer_offsets."""
    try:
        committed_offsets(clients, [group], deadline_s=10)
        return True
    except Unreachable:
        return False


# -- (a) re-delivery per method ------------------------------------------------------------


def exact_positions(src: ClusterClients, dst: ClusterClients, topic: str,
                    commits: dict[str, dict[tuple[str, int], int]],
                    target_end: dict[int, int]) -> dict[tuple[str, int], int]:
    """The independent count: right after the copy (found by value) of the last record each
    group read on the source; the target's end at failover when the copy never arrived."""
    source_value = {(r.partition, r.offset): r.value for r in read_all(src, topic)}
    target_offset = {(r.partition, r.value): r.offset for r in read_all(dst, topic)}
    out = {}
    for group, offsets in commits.items():
        for (_t, p), committed in offsets.items():
            if committed == 0:
                out[(group, p)] = 0
                continue
            copy = target_offset.get((p, source_value[(p, committed - 1)]))
            out[(group, p)] = copy + 1 if copy is not None else target_end[p]
    return out


def method_rows(name: str, report: TranslationReport, exact: dict[tuple[str, int], int],
                low: dict[int, int]) -> dict[str, dict[str, Any]]:
    """Per group: records re-delivered and skipped if the method's positions were applied; a
    position the method has none for starts at auto.offset.reset=earliest."""
    applied = {(p.group, p.partition): p for p in report.partitions
               if p.target_offset is not None}
    out: dict[str, dict[str, Any]] = {}
    for (group, part), want in sorted(exact.items()):
        row = out.setdefault(group, {"redelivered": 0, "skipped": 0, "worst_partition": 0,
                                     "none": 0, "over_bound": 0, "method": name})
        p = applied.get((group, part))
        got = low[part] if p is None else p.target_offset
        row["none"] += p is None
        redelivered = max(0, want - (got or 0))
        row["redelivered"] += redelivered
        row["skipped"] += max(0, (got or 0) - want)
        row["worst_partition"] = max(row["worst_partition"], redelivered)
        if p is not None and p.max_redelivered is not None and redelivered > p.max_redelivered:
            row["over_bound"] += 1
    return out


def bench_redelivery(lab: Lab, state: LabState, root: Path, setting: str, run_s: float,
                     rate: float, guard_interval: float) -> list[list[Any]]:
    ns = f"bg-{setting}-{int(time.time()) % 100000}"
    config_file, config, src, dst, topic = scoped_topic(lab, root, ns, "orders", PARTITIONS)
    if setting == "defaults-young":
        # MirrorMaker 2 refreshed its topics and groups before any of these groups existed.
        wait(lambda: replicated(src, dst, topic, PARTITIONS, 0), 120, "topic mirrored")
        set_mm2_defaults(lab, state)
    workload = multiprocessing.get_context("fork").Process(
        target=run_workload, args=(config_file, topic, ns, rate, run_s), daemon=True)
    workload.start()
    started = time.monotonic()
    guard = GuardRun.start(config_file, f"{ns}-.*", guard_interval)
    try:
        wait(lambda: replicated(src, dst, topic, PARTITIONS, 0), 120, "topic mirrored")
        if setting == "defaults":
            wait(lambda: len(committed_offsets(src, [f"{ns}-{g.name}" for g in GROUPS]
                                               )) == len(GROUPS), 60, "groups committed")
            set_mm2_defaults(lab, state)
            started = time.monotonic()  # the run counts from the connectors' restart
        log(f"{setting}: running {run_s:.0f} s at {rate:.0f} records/s")
        time.sleep(max(0.0, run_s - (time.monotonic() - started)))
        lab.fail("primary")
        log(f"{setting}: primary killed, and the applications with it")
    finally:
        # SIGKILL, like the datacenter: a consumer closing cleanly would flush its last
        # commits to the primary once it is back, after the audit read them.
        if workload.pid is not None:
            os.kill(workload.pid, signal.SIGKILL)
        workload.join(30)
        guard_status = guard.stop()
    log(f"{setting}: guard ended ({guard_status}), {len(guard.rounds)} rounds, "
        f"{len(guard.errors)} failed")
    reports = {}
    log(f"{setting}: translating with the source down")
    for method in (TranslateMethod.CHECKPOINT, TranslateMethod.SNAPSHOT):
        reports[str(method)] = translate_offsets(OpsContext.from_config(config), TranslateRequest(
            "primary", "secondary", groups=f"{ns}-.*", method=method, source_deadline_s=2))
    fo_started = time.monotonic()
    ctx = OpsContext.from_config(config, log)
    result = run_failover(ctx, FailoverOptions(groups=f"{ns}-.*", source_deadline_s=2))
    fo_s = time.monotonic() - fo_started
    applied = result.translation_report
    tps = [(topic, p) for p in range(PARTITIONS)]
    marks = watermarks(dst.admin(), tps)
    lab.heal("primary")
    # New clients: the old ones' metadata carries the leader epochs from before the restart.
    src = ClusterClients.for_cluster(config, "primary")
    wait(lambda: coordinator_ready(src, f"{ns}-{GROUPS[0].name}"), 120, "group coordinator")
    _, audit = audit_incident(ctx, result.marker.incident)
    commits = committed_offsets(src, [f"{ns}-{g.name}" for g in GROUPS])
    exact = exact_positions(src, dst, topic, commits, {p: marks[(topic, p)][1]
                                                       for p in range(PARTITIONS)})
    low = {p: marks[(topic, p)][0] for p in range(PARTITIONS)}
    lab.up(ports=state.ports)  # connectors running again, at the lab's intervals
    by_method = {m: method_rows(m, r, exact, low) for m, r in reports.items()}
    if applied is not None:
        by_method["failover"] = method_rows(
            f"failover ({applied.method})", applied, exact, low)
    audited = (audit["totals"]["redelivered"], audit["totals"]["skipped"])
    counted = (sum(r["redelivered"] for r in by_method["failover"].values()),
               sum(r["skipped"] for r in by_method["failover"].values()))
    log(f"{setting}: failover {fo_s:.1f} s; audit {audited} vs independent count {counted}")
    for row in audit["positions"]:
        mine = exact.get((row["group"], row["partition"]))
        if row["exact"] != mine:
            log(f"  audit and count differ at {row['group']}[{row['partition']}]: applied "
                f"{row['applied']} ({row['confidence']}), audit's exact {row['exact']}, "
                f"counted {mine} ({row['note'] or ''})")
    checkpoints = read_checkpoints(dst, "primary.checkpoints.internal")
    ours = sum(1 for (g, _, _) in checkpoints if g.startswith(ns))
    read = sum(commits.get(g, {}).get((topic, p), 0) for g in commits for p in range(PARTITIONS))

    rows: list[list[Any]] = []
    walls = [r["seconds"] for r in guard.rounds if r["seconds"] is not None]
    print(f"\n### {setting}: per group (MM2 checkpoints for these groups: {ours}; guard rounds "
          f"{len(guard.rounds)}, median {statistics.median(walls) if walls else 0:.1f} s each, "
          f"{len(guard.errors)} failed; records the groups had committed: {read:,})\n")
    print_table(["group", "method", "re-delivered", "worst partition", "skipped",
                 "positions without one", "over bound"],
                [[g, m, r["redelivered"], r["worst_partition"], r["skipped"], r["none"],
                  r["over_bound"]]
                 for m, groups in by_method.items() for g, r in groups.items()])
    for m, groups in by_method.items():
        total = sum(r["redelivered"] for r in groups.values())
        worst = max(groups.items(), key=lambda kv: kv[1]["redelivered"])
        rows.append([setting, m, total, f"{worst[0].rsplit('-', 1)[-1]} "
                                        f"{worst[1]['redelivered']:,}",
                     max(r["worst_partition"] for r in groups.values()),
                     sum(r["skipped"] for r in groups.values()),
                     sum(r["none"] for r in groups.values()),
                     sum(r["over_bound"] for r in groups.values()),
                     f"{audited[0]:,}/{audited[1]:,}" if m == "failover" else ""])
    return rows


# -- (b) guard's cost -----------------------------------------------------------------------


def bench_guard_cost(lab: Lab, root: Path, groups: int, rounds: int, interval_s: float,
                     move_fraction: float, records: int) -> None:
    ns = f"bgc-{int(time.time()) % 100000}"
    config_file, config, src, dst, topic = scoped_topic(lab, root, ns, "wide", WIDE, records)
    tps = [(topic, p) for p in range(WIDE)]
    ends = watermarks(src.admin(), tps)
    rng = random.Random(5)
    names = [f"{ns}-{i:05d}" for i in range(groups)]
    positions = {g: {tp: rng.randrange(1, ends[tp][1] // 2) for tp in tps} for g in names}
    commit_in_chunks(src, positions)
    wait(lambda: replicated(src, dst, topic, WIDE), 600, "topic replicated")
    log(f"guard-cost: {groups} groups x {WIDE} partitions committed; guard every "
        f"{interval_s:g} s, moving {move_fraction:.0%} of the groups between rounds")
    guard = GuardRun.start(config_file, f"{ns}-.*", interval_s)
    try:
        seen = 0
        deadline = time.monotonic() + 600 + rounds * (interval_s + 60)
        while len(guard.rounds) < rounds and time.monotonic() < deadline \
                and guard.proc.poll() is None:
            if len(guard.rounds) > seen:
                seen = len(guard.rounds)
                moved = {g: {tp: o + rng.randrange(1, 200) for tp, o in positions[g].items()}
                         for g in rng.sample(names, int(groups * move_fraction))}
                positions.update(moved)
                commit_in_chunks(src, moved)
            time.sleep(0.2)
    finally:
        guard.stop()
    rows, before = [], 0.0
    for i, r in enumerate(guard.rounds):
        rows.append([str(i + 1), r["positions"], r["moved"], r["written"], r["seconds"],
                     round(r["cpu_s"] - before, 2), r["rss"] // 2**20])
        before = r["cpu_s"]
    print(f"\n### guard cost: {groups} groups x {WIDE} partitions, interval {interval_s:g} s, "
          f"{move_fraction:.0%} of groups moved per interval\n")
    print_table(["round", "positions", "moved", "written", "round wall s",
                 "CPU s since last round", "RSS MiB"], rows)
    steady = [r[5] for r in rows[1:]]
    peak = max((r["peak_rss"] for r in guard.rounds), default=0)
    print(f"first round (everything new) CPU {rows[0][5] if rows else '-'} s; later rounds "
          f"median CPU {statistics.median(steady) if steady else '-'} s per {interval_s:g} s "
          f"interval; peak RSS {peak / 2**20:.0f} MiB; failed rounds {len(guard.errors)}\n")


def commit_in_chunks(clients: ClusterClients, commits: dict[str, dict[tuple[str, int], int]],
                     chunk: int = 1000) -> None:
    names = list(commits)
    for i in range(0, len(names), chunk):
        failed = alter_offsets_many(clients, {g: commits[g] for g in names[i:i + chunk]})
        if failed:
            raise SystemExit(f"commits failed: {next(iter(failed.items()))}")


# -- (c) failover at production size -----------------------------------------------------


def bench_failover(lab: Lab, state: LabState, root: Path, groups: int, records: int,
                   repeat: int, tool_sample: int, profile: Path | None) -> None:
    ns = f"bfo-{int(time.time()) % 100000}"
    config_file, config, src, dst, topic = scoped_topic(lab, root, ns, "wide", WIDE, records)
    tps = [(topic, p) for p in range(WIDE)]
    ends = watermarks(src.admin(), tps)
    rng = random.Random(7)
    names = [f"{ns}-{i:05d}" for i in range(groups)]
    t0 = time.monotonic()
    commit_in_chunks(src, {g: {tp: rng.randrange(1, ends[tp][1]) for tp in tps}
                           for g in names})
    log(f"failover: committed {groups} groups x {WIDE} partitions in "
        f"{time.monotonic() - t0:.0f} s")
    wait(lambda: replicated(src, dst, topic, WIDE), 600, "topic replicated")
    rows: list[list[Any]] = []
    runs = []
    for i in range(repeat):
        started = time.monotonic()
        if profile is not None and i == 0:
            import cProfile

            prof = cProfile.Profile()
            request = TranslateRequest("primary", "secondary", groups=f"{ns}-.*",
                                       method=TranslateMethod.EXACT, apply=True)
            report = prof.runcall(translate_offsets, OpsContext.from_config(config), request)
            prof.dump_stats(profile)
        else:
            report = translate_offsets(OpsContext.from_config(config), TranslateRequest(
                "primary", "secondary", groups=f"{ns}-.*", method=TranslateMethod.EXACT,
                apply=True))
        runs.append(time.monotonic() - started)
        log(f"failover: translate exact --yes {runs[-1]:.1f} s")
    s = report.summary()
    rows.append([f"drctl translate-offsets --method exact --yes (median of {len(runs)})",
                 statistics.median(runs),
                 f"{s['partitions']:,} positions, {s['exact']:,} exact, {s['applied']:,} "
                 f"groups applied; runs {', '.join(f'{r:.1f}' for r in runs)} s"])
    # The failover itself (stops MirrorMaker 2, marker, translation, report), each run an
    # incident of its own with the connectors running again.
    fo_runs, note = [], ""
    for i in range(repeat):
        run_config = dataclasses.replace(config, state=StateSettings(
            root / ns / f"state-{i}", f"_drctl_state_{ns}_{i}"))
        lab.up(ports=state.ports)
        started = time.monotonic()
        try:
            run_ctx = OpsContext.from_config(run_config, log)
            result = run_failover(run_ctx, FailoverOptions(groups=f"{ns}-.*"))
            result.write_reports(run_ctx)
            summary = (result.translation or {}).get("summary", {})
            note = (f"{summary.get('partitions')} positions, {summary.get('exact')} exact, "
                    f"{summary.get('applied')} groups applied")
        except Exception as exc:  # noqa: BLE001 - a finding to report, not the end of the bench
            note = f"FAILED: {type(exc).__name__}: {exc}"
            log(f"failover: {note}")
        fo_runs.append(time.monotonic() - started)
        log(f"failover: {fo_runs[-1]:.1f} s")
    rows.append([f"drctl failover (source up: exact, median of {len(fo_runs)})",
                 statistics.median(fo_runs),
                 f"{note}; runs {', '.join(f'{r:.1f}' for r in fo_runs)} s"])
    times = time_kafka_reset_to_datetime(lab, state, names[:tool_sample])
    if times:
        per_group = statistics.median(times)
        rows.append([f"kafka-consumer-groups --to-datetime per group (median {per_group:.2f} s"
                     f" x {groups:,}, extrapolated)", per_group * groups,
                     f"sampled {len(times)} JVM runs, min {min(times):.2f} s, max "
                     f"{max(times):.2f} s; timestamp, not exact"])
    lab.up(ports=state.ports)  # connectors running again
    print(f"\n### failover at size: {groups:,} groups x {WIDE} partitions, {records:,} "
          "records, source up (goal: <= 60 s)\n")
    print_table(["what", "wall s", "notes"], rows)


# -- main ---------------------------------------------------------------------------------


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default="redelivery,guard-cost,failover")
    ap.add_argument("--quick", action="store_true", help="a smoke run: small and short")
    ap.add_argument("--mm2", default="lab,defaults",
                    help="MirrorMaker 2 settings for redelivery: lab,defaults,defaults-young")
    ap.add_argument("--run-s-lab", type=float, default=40)
    ap.add_argument("--run-s-defaults", type=float, default=150)
    ap.add_argument("--rate", type=float, default=400)
    ap.add_argument("--guard-interval", type=float, default=5)
    ap.add_argument("--guard-groups", type=int, default=1000)
    ap.add_argument("--guard-rounds", type=int, default=8)
    ap.add_argument("--guard-records", type=int, default=200_000)
    ap.add_argument("--move-fraction", type=float, default=0.1)
    ap.add_argument("--fo-groups", type=int, default=10_000)
    ap.add_argument("--fo-records", type=int, default=200_000)
    ap.add_argument("--tool-sample", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--profile", type=Path, help="cProfile the first exact translation here")
    ap.add_argument("--port-base", type=int, default=25100)
    args = ap.parse_args()
    exit_on_sigterm()
    if args.quick:
        args.run_s_lab, args.run_s_defaults = 20, 70
        args.guard_groups, args.guard_rounds, args.guard_records = 100, 3, 20_000
        args.fo_groups, args.fo_records, args.tool_sample, args.repeat = 300, 20_000, 2, 1
    only = set(args.only.split(","))
    root = Path(tempfile.mkdtemp(prefix="drctl-bench-guard-"))
    lab = Lab(root / "lab")
    b = args.port_base
    try:
        state = lab.up(ports=LabPorts(b, b + 2, b + 4, b + 6))
        print(f"# bench_guard on {os.cpu_count()} cores, load average "
              f"{os.getloadavg()[0]:.1f} at start, Kafka {state.kafka_version}\n", flush=True)
        if "redelivery" in only:
            summary: list[list[Any]] = []
            settings = args.mm2.split(",")
            for i, setting in enumerate(settings, 1):
                run_s = args.run_s_lab if setting == "lab" else args.run_s_defaults
                rows = bench_redelivery(lab, state, root, setting, run_s, args.rate,
                                        args.guard_interval)
                if settings.count(setting) > 1:  # repeated: each run's ratio on its own
                    rows = [[f"{setting} (run {i})", *row[1:]] for row in rows]
                summary += rows
            print(f"\n### re-delivery per method ({len(GROUPS)} groups, {args.rate:.0f} "
                  f"records/s over {PARTITIONS} partitions, guard every "
                  f"{args.guard_interval:g} s; goal at Kafka's defaults: snapshot <= 1/10 of "
                  "checkpoint, 0 skipped)\n")
            print_table(["MM2 setting", "method", "re-delivered", "worst group",
                         "worst partition", "skipped", "positions without one",
                         "over stated bound", "audit re-delivered/skipped"], summary)
            for setting in dict.fromkeys(r[0] for r in summary):
                got = {r[1]: r[2] for r in summary if r[0] == setting}
                if got.get("checkpoint"):
                    print(f"{setting}: snapshot / checkpoint = "
                          f"{got['snapshot'] / got['checkpoint']:.3f}")
        if "guard-cost" in only:
            bench_guard_cost(lab, root, args.guard_groups, args.guard_rounds,
                             args.guard_interval, args.move_fraction, args.guard_records)
        if "failover" in only:
            bench_failover(lab, state, root, args.fo_groups, args.fo_records, args.repeat,
                           args.tool_sample, args.profile)
        print(f"load average at the end {os.getloadavg()[0]:.1f}")
    finally:
        lab.down(purge=True)
        shutil.rmtree(root, ignore_errors=True)  # the runs' scoped configs


if __name__ == "__main__":
    main()
