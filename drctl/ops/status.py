"""`drctl status`: clusters, replication, open failovers and groups at a glance."""

from __future__ import annotations

from typing import Any

from drctl.config import Config
from drctl.errors import DrctlError
from drctl.kafka.clients import describe_with_retry
from drctl.kafka.groups import group_states, list_groups
from drctl.ops.context import OpsContext
from drctl.state import marker_store


def pending_stop_warnings(config: Config) -> list[str]:
    """Open incidents whose replication stop is pending (local state only: cheap enough to
    check before every command)."""
    store = marker_store(config, None)
    try:
        markers = store.open_markers()
    except DrctlError:
        return []
    return [f"Incident {m.incident}: replication {m.source} -> {m.target} was never confirmed "
            "stopped. If the replicator comes back it copies stale data behind the new writes "
            "— stop it." for m in markers if m.replication_stop == "pending"]


def collect_status(ctx: OpsContext, deadline_s: float = 5.0) -> dict[str, Any]:
    config = ctx.config
    policy = config.retry.with_deadline(deadline_s)
    clusters: dict[str, dict[str, Any]] = {}
    for name in config.clusters:
        clients = ctx.clients(name)
        try:
            info = describe_with_retry(clients, policy)
            clusters[name] = {"reachable": True, "cluster_id": info.cluster_id,
                              "brokers": info.broker_count, "rtt_ms": round(info.rtt_ms, 1)}
        except DrctlError as exc:
            clusters[name] = {"reachable": False, "error": exc.message}
    rep = config.replication
    replication: dict[str, Any] = {}
    markers: list[dict[str, Any]] = []
    if rep is not None:
        kind = ctx.require_kind()
        replication = {"kind": rep.kind, "source": rep.source, "target": rep.target,
                       "connectors": kind.component_states(rep), "lag": None}
        if clusters[rep.source]["reachable"]:
            try:
                replication["lag"] = kind.replication_lag(rep, ctx.clients(rep.source))
            except DrctlError:
                replication["lag"] = None
        surviving = rep.target if clusters[rep.target]["reachable"] else None
        for m in ctx.markers(surviving).open_markers():
            markers.append({"incident": m.incident, "source": m.source, "target": m.target,
                            "created_at": m.created_at, "replication_stop": m.replication_stop,
                            "steps": list(m.steps)})
    groups: dict[str, dict[str, Any]] = {}
    for name, cluster in clusters.items():
        if not cluster["reachable"]:
            continue
        admin = ctx.clients(name).admin()
        ids = [g for g in list_groups(admin) if config.groups.matches(g)]
        states = group_states(admin, ids)
        groups[name] = {g: {"state": s.state, "members": s.members}
                        for g, s in sorted(states.items())}
    return {"clusters": clusters, "replication": replication, "open_failovers": markers,
            "groups": groups}
