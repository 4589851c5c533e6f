"""Reverse replication (target -> source) that starts at the failover point: only
post-failover data flows back, never what was already replicated (the Replicator guide's
second failback prerequisite)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from drctl.config import Config
from drctl.errors import DrctlError
from drctl.kafka.clients import ClusterClients
from drctl.kafka.connect_rest import ConnectorMissing
from drctl.kafka.groups import alter_offsets
from drctl.kafka.mm2_connectors import MirrorFlow
from drctl.kafka.offsets import watermarks
from drctl.ops.replication import connect_client
from drctl.progress import Notify
from drctl.reports import render
from drctl.state import FailoverMarker, Offsets
from drctl.translate.locate import MatchQuery, Side, last_records, match_records
from drctl.translate.reader import BatchReader

RECONCILED_HEADER = "drctl-reconciled"


def start_points(config: Config, marker: FailoverMarker) -> Offsets:
    """Where reverse replication starts: the failover topics' ends at failover."""
    rep = config.require_replication()
    if rep.names_kept:
        return {t: dict(parts) for t, parts in marker.failover_point.items()}
    return {t: dict(parts) for t, parts in marker.failover_topics_end.items()}


def reverse_flow(config: Config, marker: FailoverMarker) -> MirrorFlow:
    rep = config.require_replication()
    topics = sorted(start_points(config, marker))
    return MirrorFlow(rep.target_alias, rep.source_alias,
                      config.cluster(rep.target)["bootstrap.servers"],
                      config.cluster(rep.source)["bootstrap.servers"],
                      names_kept=rep.names_kept,
                      topics="|".join(t.replace(".", r"\.") for t in topics) or "^$")


def reverse_topic(config: Config, failover_topic: str) -> str:
    """Where a failover topic's records land on the source cluster."""
    rep = config.require_replication()
    return failover_topic if rep.names_kept else f"{rep.target_alias}.{failover_topic}"


def reverse_connector_config(flow: MirrorFlow) -> dict[str, str]:
    cfg = flow.source_connector()
    # Records drctl copied into the target during reconcile are already on the source (they
    # are the gap's originals): never copy them back.
    cfg.update({
        "transforms": "dropReconciled",
        "transforms.dropReconciled.type": "org.apache.kafka.connect.transforms.Filter",
        "transforms.dropReconciled.predicate": "isReconciled",
        "predicates": "isReconciled",
        "predicates.isReconciled.type":
            "org.apache.kafka.connect.transforms.predicates.HasHeaderKey",
        "predicates.isReconciled.name": RECONCILED_HEADER,
        "refresh.topics.interval.seconds": "5",
    })
    return cfg


def start_reverse_replication(config: Config, marker: FailoverMarker, out_dir: Path,
                              notify: Notify = lambda _: None) -> dict[str, Any]:
    rep = config.require_replication()
    starts = start_points(config, marker)
    if rep.kind == "mirrormaker2":
        return _start_mm2(config, marker, starts, notify)
    out_dir.mkdir(parents=True, exist_ok=True)
    if rep.kind == "replicator":
        group = rep.replicator_group or f"replicator-{rep.target_alias}-to-{rep.source_alias}"
        admin = ClusterClients.for_cluster(config, rep.target).admin()
        for topic, parts in starts.items():
            alter_offsets(admin, group, {(topic, p): off for p, off in parts.items()})
        path = out_dir / f"{marker.incident}-replicator-reverse.json"
        path.write_text(render("replicator-connector.json.j2", config.redactor,
                               name=f"replicator-{rep.target_alias}-to-{rep.source_alias}",
                               group=group, topics=sorted(starts),
                               source_bootstrap=config.cluster(rep.target)["bootstrap.servers"],
                               target_bootstrap=config.cluster(rep.source)["bootstrap.servers"],
                               source_cluster=rep.target, target_cluster=rep.source))
        notify(f"Committed the reverse Replicator group '{group}' at the failover point on "
               f"{rep.target}; deploy {path}")
        return {"kind": "replicator", "group": group, "start": starts, "config": str(path)}
    path = out_dir / f"{marker.incident}-identity-reverse.md"
    path.write_text(render("identity-reverse.md.j2", config.redactor, starts=starts,
                           source=rep.target, target=rep.source, incident=marker.incident))
    notify(f"Reverse mirroring for an offset-preserving link is manual: follow {path}")
    return {"kind": "identity", "start": starts, "steps": str(path)}


def _start_mm2(config: Config, marker: FailoverMarker, starts: Offsets,
               notify: Notify) -> dict[str, Any]:
    rep = config.require_replication()
    client = connect_client(rep)
    if client is None:
        raise DrctlError("Reverse replication needs replication.connect.url in the config.",
                         "Or start the reverse MirrorMaker 2 flow yourself from the failover "
                         "point shown in the report.")
    flow = reverse_flow(config, marker)
    name = flow.connector_names()["source"]
    cfg = reverse_connector_config(flow)
    try:
        state, _ = client.connector_state(name)
    except ConnectorMissing:
        state = None
    offsets = [{"partition": {"cluster": rep.target_alias, "topic": topic, "partition": p},
                # Connect stores the last copied offset; the task resumes at stored + 1.
                "offset": {"offset": off - 1} if off > 0 else None}
               for topic, parts in sorted(starts.items()) for p, off in sorted(parts.items())]
    if state is None:
        notify(f"Creating {name} (stopped) and setting its start to the failover point")
        client.create(name, cfg, initial_state="STOPPED")
        _wait_state(client, name, "STOPPED")
        client.alter_offsets(name, offsets)
    elif state == "STOPPED":
        client.alter_offsets(name, offsets)
    notify(f"Starting {name}: {rep.target_alias} -> {rep.source_alias}, post-failover data only")
    client.resume(name)
    _wait_state(client, name, "RUNNING")
    return {"kind": "mirrormaker2", "connector": name, "start": starts}


def _wait_state(client: Any, name: str, want: str, deadline_s: float = 60) -> None:
    end = time.monotonic() + deadline_s
    while True:
        try:
            state, tasks = client.connector_state(name)
        except ConnectorMissing:  # just created: no status yet
            state, tasks = "UNASSIGNED", []
        if state == want and (want != "RUNNING" or all(t == "RUNNING" for t in tasks)):
            return
        if "FAILED" in (state, *tasks):
            raise DrctlError(f"Connector {name} failed.", "Read the Connect worker's log.")
        if time.monotonic() > end:
            raise DrctlError(f"Connector {name} is {state}, not {want}, after {deadline_s:.0f} s.",
                             "Read the Connect worker's log.")
        time.sleep(0.5)


def wait_reverse_caught_up(config: Config, marker: FailoverMarker, *, deadline_s: float = 300,
                           notify: Notify = lambda _: None) -> None:
    """Until the last record of every failover topic partition is on the source."""
    rep = config.require_replication()
    if rep.kind != "mirrormaker2":
        return
    tgt = ClusterClients.for_cluster(config, rep.target)
    src = ClusterClients.for_cluster(config, rep.source)
    tgt_admin, src_admin = tgt.admin(), src.admin()
    tps = [(t, p) for t, parts in start_points(config, marker).items() for p in parts]
    notify("Waiting for reverse replication to catch up")
    end = time.monotonic() + deadline_s
    while True:
        marks = watermarks(tgt_admin, tps)
        a = Side(BatchReader(tgt), tgt_admin, marks)
        tails = last_records(a, [(tp, marks[tp][1]) for tp in tps])
        queries = [MatchQuery(last, (reverse_topic(config, tp[0]), tp[1]))
                   for tp, (last, _) in zip(tps, tails, strict=True)
                   if last is not None and last.offset >= _start(marker, config, tp)
                   and not any(k == RECONCILED_HEADER for k, _ in last.headers)]
        existing = src_admin.list_topics(timeout=30).topics
        if all(q.tp_b[0] in existing for q in queries):
            b_tps = [q.tp_b for q in queries]
            b = Side(BatchReader(src), src_admin, watermarks(src_admin, b_tps))
            if all(m.offset is not None for m in match_records(a, b, queries)):
                return
        if time.monotonic() > end:
            raise DrctlError("Reverse replication did not catch up in time.",
                             "Check the reverse connector's status and the Connect log.")
        time.sleep(1)


def _start(marker: FailoverMarker, config: Config, tp: tuple[str, int]) -> int:
    return start_points(config, marker).get(tp[0], {}).get(tp[1], 0)
