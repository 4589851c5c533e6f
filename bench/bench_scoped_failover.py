"""One application's failover beside the whole flow's, at size: 1,000 topics and 10,000 groups
on a bench lab, one application of 100 of the topics and the 1,000 groups that read them.

Every topic is mirrored by the lab's MirrorMaker 2 and every group committed on the primary,
each on one topic (both partitions). The application `app` names its topics and its groups
in the config's `applications:`. Each run times, side by side and in alternating order,
`drctl failover --app app` and `drctl failover` (the whole flow), each as an operator runs it
(a new process, JSON to a file), from the same state: before each one the lab's connectors
are put back as `lab up` configures them (which takes an application's exclusions out
again), the groups' positions on the secondary are deleted, and the run has a state
directory and marker topic of its own (a new incident). Per run: wall seconds, the drctl
process's CPU seconds, the Kafka requests it sent (`DRCTL_REQUEST_COUNT`, librdkafka's
statistics) and what its JSON says it failed over. With `--ungrouped`, one more run of an
application that names only its topics (its groups are found by reading every group's
commits).

The lab's checkpoint connector runs at MirrorMaker 2's default intervals here (checkpoints
every 60 s, groups listed every 10 min) instead of the lab's test-speed ones: at one second it
reads all 10,000 groups' commits every second and keeps a core busy throughout.

Usage: .venv/bin/python -m bench.bench_scoped_failover [--topics 1000] [--groups 10000]
       [--app-topics 100] [--partitions 2] [--runs 3] [--unplanned] [--ungrouped]
       [--port-base 48100]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from confluent_kafka.admin import NewTopic

from bench.common import exit_on_sigterm, fmt, print_table, scoped_config, wait
from drctl.kafka.clients import ClusterClients
from drctl.kafka.connect_rest import CONNECT_RETRY, ConnectClient
from drctl.kafka.groups import alter_offsets_many, delete_groups, list_groups
from drctl.kafka.offsets import watermarks
from drctl.kafka.request_count import ENV as REQUEST_COUNT_ENV
from drctl.kafka.request_count import UNITEMIZED
from drctl.lab.lab import Lab, LabPorts, LabState
from drctl.replication.connect import reconfigure, wait_connector_state

NS = "bs"
APP = "app"
# MirrorMaker 2's own defaults for the checkpoint connector (see the module's docstring).
CALM_CHECKPOINTS = {"emit.checkpoints.interval.seconds": "60",
                    "refresh.groups.interval.seconds": "600",
                    "refresh.topics.interval.seconds": "600"}
# Request types worth a column: group offsets read and committed (an admin client's, which
# librdkafka does not itemize), group look-ups, offset look-ups, record reads, metadata.
COLUMNS = (UNITEMIZED, "FindCoordinator", "DescribeGroups", "ListOffsets", "Fetch", "Metadata")


def topic_names(total: int, in_app: int) -> list[str]:
    """The application's topics first (`bs-app-t…`), then the others (`bs-t…`)."""
    return [f"{NS}-{'app-' if i < in_app else ''}t{i:04d}" for i in range(total)]


def group_topic(g: int, topics: list[str]) -> str:
    return topics[g % len(topics)]


def group_name(g: int, topics: list[str]) -> str:
    """A group reading one of the application's topics is one of its groups (`bs-app-g…`)."""
    app = group_topic(g, topics).startswith(f"{NS}-app-")
    return f"{NS}-{'app-' if app else ''}g{g:05d}"


def write_config(lab: Lab, root: Path, run: str) -> Path:
    """The lab's config for this flow's topics and groups, with the applications, a state
    directory and marker topic of the run's own (each run a new incident)."""
    return scoped_config(lab, root, run, names=NS, applications={
        APP: {"topics": [f"{NS}-app-.*"], "groups": [f"{NS}-app-.*"]},
        f"{APP}-ungrouped": {"topics": [f"{NS}-app-.*"]}})


def set_up(src: ClusterClients, topics: list[str], partitions: int, groups: int) -> None:
    for i in range(0, len(topics), 200):
        futures = src.admin().create_topics(
            [NewTopic(t, partitions, 1) for t in topics[i:i + 200]])
        for f in futures.values():
            f.result(60)
    producer = src.producer()
    for t in topics:
        for p in range(partitions):
            for k in range(5):
                producer.produce(t, key=f"k{k}".encode(), value=b"v" * 50, partition=p)
        producer.poll(0)
    producer.flush(120)
    failed = alter_offsets_many(src, {
        group_name(g, topics): {(group_topic(g, topics), p): 3 for p in range(partitions)}
        for g in range(groups)})
    if failed:
        raise SystemExit(f"{len(failed)} group commits failed on the primary")


def mirrored(src: ClusterClients, dst: ClusterClients, topics: list[str],
             partitions: int) -> bool:
    if not set(topics) <= set(dst.admin().list_topics(timeout=30).topics):
        return False
    tps = [(t, p) for t in topics for p in range(partitions)]
    want = watermarks(src.admin(), tps)
    have = watermarks(dst.admin(), tps)
    return all(have[tp][1] >= want[tp][1] for tp in tps)


def reset(lab: Lab, state: LabState, ports: LabPorts, dst: ClusterClients) -> None:
    """The connectors as `lab up` configures them (an application's exclusions taken out,
    stopped ones resumed), the checkpoint connector calm, no group positions on the
    secondary."""
    lab.up(ports=ports)
    client = ConnectClient(lab.connect_url(state), policy=CONNECT_RETRY.with_deadline(60))
    names = lab.flow(state).connector_names()
    reconfigure(client, names["checkpoint"], lambda cfg: {**cfg, **CALM_CHECKPOINTS})
    for name in names.values():
        wait_connector_state(client, name, "RUNNING")
    want = lab.flow(state).source_connector()["topics.exclude"]
    have = client.config(names["source"]).get("topics.exclude")
    if have != want:
        raise SystemExit(f"the reset left the source connector's topics.exclude at {have!r}")
    ours = [g for g in list_groups(dst) if g.startswith(f"{NS}-")]
    refused = delete_groups(dst, ours)
    if refused:
        raise SystemExit(f"groups not deleted: {next(iter(refused.items()))}")


def run_failover(config_file: Path, root: Path, run: str, args: list[str]) -> dict[str, Any]:
    """`drctl failover ARGS --yes -o json` in a process of its own: wall and CPU seconds,
    the requests it sent, what its JSON says."""
    counts = root / run / "requests.json"
    out, err = root / run / "stdout.json", root / run / "stderr.txt"
    env = {**os.environ, REQUEST_COUNT_ENV: str(counts)}
    cmd = [sys.executable, "-m", "drctl", "--config", str(config_file), "-o", "json",
           "failover", *args, "--yes"]
    started = time.monotonic()
    with out.open("w") as stdout, err.open("w") as stderr:
        proc = subprocess.Popen(cmd, stdout=stdout, stderr=stderr, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    data = json.loads(out.read_text() or "{}")
    if proc.returncode != 0:
        print(err.read_text()[-3000:], file=sys.stderr)
        raise SystemExit(f"{' '.join(cmd[3:])} exited {proc.returncode}")
    sent = json.loads(counts.read_text())
    summary = (data.get("translation") or {}).get("summary") or {}
    this_run = (data.get("timing") or {}).get("this_run") or {}
    return {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime,
            "requests": sent["requests"], "by_api": sent["by_api"],
            "topics": len((data.get("marker") or {}).get("topics") or {}),
            "groups": summary.get("groups"), "positions": summary.get("partitions"),
            "applied": summary.get("applied"),
            "phases": {p["phase"]: p["seconds"] for p in this_run.get("phases", [])}}


def row(label: str, r: dict[str, Any]) -> list[Any]:
    return [label, r["wall"], r["cpu"], r["requests"],
            *(r["by_api"].get(api, 0) for api in COLUMNS),
            r["topics"], r["groups"], r["positions"]]


def median_row(label: str, runs: list[dict[str, Any]]) -> list[Any]:
    def med(values: list[float]) -> float:
        return statistics.median(values)

    return [label, med([r["wall"] for r in runs]), med([r["cpu"] for r in runs]),
            int(med([r["requests"] for r in runs])),
            *(int(med([r["by_api"].get(api, 0) for r in runs])) for api in COLUMNS),
            None, None, None]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--topics", type=int, default=1000)
    ap.add_argument("--groups", type=int, default=10_000)
    ap.add_argument("--app-topics", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=2)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--unplanned", action="store_true",
                    help="fail over without --planned (the source is up all the same)")
    ap.add_argument("--ungrouped", action="store_true",
                    help="one more run: an application that names only its topics")
    ap.add_argument("--port-base", type=int, default=48100)
    args = ap.parse_args()
    exit_on_sigterm()
    root = Path(tempfile.mkdtemp(prefix="drctl-bench-scoped-"))
    lab = Lab(root / "lab")
    b = args.port_base
    ports = LabPorts(b, b + 2, b + 4)
    mode = [] if args.unplanned else ["--planned"]
    try:
        state = lab.up(ports=ports)
        config_file = write_config(lab, root, "setup")
        src = lab.clients(state, "primary")
        dst = lab.clients(state, "secondary")
        topics = topic_names(args.topics, args.app_topics)
        started = time.monotonic()
        set_up(src, topics, args.partitions, args.groups)
        print(f"set up {args.topics} topics and {args.groups} groups in "
              f"{time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)
        wait(lambda: mirrored(src, dst, topics, args.partitions), 1800,
             "MirrorMaker 2 to mirror every topic")
        print(f"mirrored after {time.monotonic() - started:.0f} s; config {config_file}",
              file=sys.stderr, flush=True)
        kinds = {"app": ["--app", APP, *mode], "whole": mode}
        results: dict[str, list[dict[str, Any]]] = {k: [] for k in kinds}
        rows = []
        for n in range(args.runs):
            order = list(kinds) if n % 2 == 0 else list(reversed(kinds))
            for kind in order:
                run = f"{kind}{n + 1}"
                reset(lab, state, ports, dst)
                result = run_failover(write_config(lab, root, run), root, run, kinds[kind])
                results[kind].append(result)
                rows.append(row(f"{kind} {n + 1}", result))
                print(f"{run}: {fmt(result['wall'])} s, {result['requests']:,} requests, "
                      f"phases {result['phases']}, requests {result['by_api']}",
                      file=sys.stderr, flush=True)
        for kind in kinds:
            rows.append(median_row(f"{kind} median", results[kind]))
        if args.ungrouped:
            reset(lab, state, ports, dst)
            run = "ungrouped"
            result = run_failover(write_config(lab, root, run), root, run,
                                  ["--app", f"{APP}-ungrouped", *mode])
            rows.append(row("app, groups not named", result))
            print(f"{run}: phases {result['phases']}, requests {result['by_api']}",
                  file=sys.stderr, flush=True)
        print_table(["run", "wall s", "CPU s", "requests", *COLUMNS, "topics in F",
                     "groups", "positions"], rows)
    finally:
        lab.down(purge=True)


if __name__ == "__main__":
    main()
