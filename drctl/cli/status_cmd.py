"""`drctl status`."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from drctl.cli.options import OutputOption, deadline_option
from drctl.cli.state import CURRENT
from drctl.errors import ExitStatus
from drctl.ops.steps.flow_status import collect_status, status_verdict
from drctl.terminal import OutputFormat, Terminal


def status_command(
    deadline: Annotated[float, deadline_option(
        "a row that says so. Every cluster and Connect worker is asked at once. Shorter "
        "than the other commands' 30s: status is run again and again while a cluster is "
        "down.", default="5s")] = 5.0,
    output: Annotated[OutputFormat | None, OutputOption] = None,
) -> None:
    """Clusters, replication and whether it protects the source now, open incidents,
    consumer groups.

    Per flow: PROTECTED (forward copying; lag in records and seconds), EXPOSED (forward
    stopped or failing) or INCIDENT (which step, what to run next); with a schema registry
    per cluster, schema-id parity: in parity, N ids missing, or unknown.

    \b
    Examples:
      drctl status
      drctl status -o json | jq .replication.protection
      drctl status --deadline 30s     # a slow link: wait longer for an answer

    \b
    Exit status: 0 every answer in, no incident open, the flow not exposed;
    2 the Connect worker refuses drctl (credentials or TLS); 3 an open
    incident, a pending replication stop or an exposed flow; 4 no cluster
    answered."""
    term = CURRENT.terminal(output)
    if CURRENT.config().topology is not None:
        pair_status(deadline, output)
        return
    st = collect_status(CURRENT.context(deadline), deadline)
    verdict, why = status_verdict(st)
    if term.json_mode:
        term.emit_json(st)
        raise typer.Exit(verdict)
    render_clusters(term, st["clusters"])
    rep = st["replication"]
    if rep:
        render_flow(rep)
    if st["open_failovers"]:
        render_incidents(st)
        for m in st["open_failovers"]:
            if m.get("late_copies"):
                term.info(f"{m['incident']}: late copies — {m['late_copies']}")
            if m["fence"].get("state") == "fenced":
                term.info(f"{m['incident']}: fenced for {m['fence']['principal']} on "
                          + ", ".join(m["fence"]["topics"]))
    elif not (rep or {}).get("markers_unreadable"):
        term.info("No open incidents.")
    else:
        term.warn(f"Open incidents: unknown — {rep['markers_unreadable']}")
    if not st["markers_from"].startswith("unknown"):
        term.info(f"Failover markers read from the {st['markers_from']}.")
    for cluster, groups in st["groups"].items():
        counts: dict[str, int] = {}
        for g in groups.values():
            counts[g["state"]] = counts.get(g["state"], 0) + 1
        term.info(f"{cluster}: {len(groups)} groups "
                  f"({', '.join(f'{k.lower()} {v}' for k, v in sorted(counts.items()))})")
    if why:
        term.warn(why)
    raise typer.Exit(verdict)


def render_flow(rep: dict[str, Any]) -> None:
    """One flow's part of `drctl status`: its connectors, protection, RPO, lag."""
    term = CURRENT.terminal()
    term.table(f"Replication {rep['source']} -> {rep['target']} ({rep['kind']})",
               ["connector", "state"], [[n, s] for n, s in rep["connectors"].items()])
    protection = rep.get("protection")
    if protection:
        term.emit_text(protection_line(f"{rep['source']} -> {rep['target']}", protection))
    for app, state in (rep.get("applications") or {}).items():
        term.emit_text(protection_line(f"  application {app}", state))
    if rep.get("rpo"):
        term.info(f"RPO now: {rep['rpo']['text']}")
    if rep.get("schemas"):
        line = rep["schemas"]["summary"].removeprefix("schemas").lstrip(": ")
        say = term.info if rep["schemas"]["state"] == "in parity" else term.warn
        say(f"Schemas: {line}")
    if rep.get("lag"):
        term.table("Replication lag (offsets behind)",
                   ["topic", "partitions", "behind", "oldest record missing"],
                   [[r["topic"], r["partitions"], r["behind"],
                     _age(r.get("oldest_unreplicated_ms"))] for r in rep["lag"]])
    copies = rep.get("reverse_copies")
    if isinstance(copies, str):
        term.warn(f"Reverse copies on {rep['source']}: {copies}")
    elif copies:
        term.table(f"Reverse copies on {rep['source']} (retired reverse flows: never "
                   "replicated, kept while read)",
                   ["topic", "copies of", "records", "readers"],
                   [[c["topic"], c["origin"], c["records"],
                     ", ".join(f"{g} ({n} unread)" if n else f"{g} (read all)"
                               for g, n in c["readers"].items()) or "-"]
                    for c in copies])
    inventory = rep.get("inventory")
    if inventory:
        term.info(inventory["summary"])
    costs = rep.get("translation_costs")
    if costs:
        term.table("What a failover with the source gone would cost", ["setting"],
                   [[line] for line in costs["lines"]])


def render_incidents(st: dict[str, Any]) -> None:
    term = CURRENT.terminal()
    term.table("Open incidents", ["incident", "from", "to", "since", "phase",
                                  "replication stop", "fence", "next"],
               [[m["incident"], m["source"], m["target"], m["created_at"], m["phase"],
                 m["replication_stop"], _fence_cell(m["fence"]), m["next_command"]]
                for m in st["open_failovers"]])


def pair_status(deadline: float, output: OutputFormat | None) -> None:
    """`drctl status` of an active-active pair: both flows, and where each region's
    applications run."""
    from drctl.ops.active_active.pair import Pair
    from drctl.ops.active_active.status import collect_pair_status

    term = CURRENT.terminal(output)
    st = collect_pair_status(Pair(CURRENT.config()), term.step, deadline)
    verdict = ExitStatus(st["verdict"]["exit_status"])
    if term.json_mode:
        term.emit_json(st)
        raise typer.Exit(verdict)
    render_clusters(term, st["clusters"])
    for flow in st["flows"]:
        render_flow(flow)
    for region, where in st["regions"].items():
        if where["applications_on"] == "unknown":
            term.warn(f"Where {region}'s applications run is unknown: {where['why']}")
        elif where["incident"]:
            term.emit_text(f"{region}'s applications run on {where['applications_on']} "
                           f"(incident {where['incident']}, {where['phase']}; next: "
                           f"{where['next_command']})")
        else:
            term.emit_text(f"{region}'s applications run on {region}")
    if st["open_failovers"]:
        render_incidents(st)
    if st["verdict"]["why"]:
        term.warn(st["verdict"]["why"])
    raise typer.Exit(verdict)


def protection_line(label: str, protection: dict[str, Any]) -> str:
    """e.g. `primary -> secondary: protected (lag 12 records, 0.8 s)`."""
    lag = ""
    if protection.get("lag_records") is not None:
        seconds = protection.get("lag_s", 0)
        age = "age unknown" if seconds is None else f"{seconds:g} s"
        lag = f"lag {protection['lag_records']:,} records, {age}"
    state = protection["state"]
    detail = {"protected": lag,
              "exposed": f"{protection['why']}" + (f"; {lag}" if lag else "")
              + (f"; next: {protection['next_command']}" if protection.get("next_command")
                 else ""),
              "incident": f"{protection['why']}; next: {protection.get('next_command', '')}",
              "unknown": protection["why"]}[state]
    return f"{label}: {state.upper()}" + (f" ({detail})" if detail else "")


def _age(ms: int | None) -> str:
    if ms is None:
        return "-"
    import time

    return f"{max(0.0, time.time() - ms / 1000):.1f} s ago"


def _fence_cell(fence: dict[str, Any]) -> str:
    state = fence.get("state")
    if state == "fenced":
        return f"fenced ({len(fence['topics'])} topic(s))"
    if state == "unfenced":
        return f"NOT fenced: {fence.get('reason', '')}"
    return state or "-"


def render_clusters(term: Terminal, clusters: dict[str, Any]) -> None:
    """A row per cluster: whether it answered, and how (one flow's status and a pair's)."""
    term.table("Clusters", ["cluster", "reachable", "cluster id", "brokers", "rtt ms", "error"],
               [[n, "yes" if c["reachable"] else "NO", c.get("cluster_id"), c.get("brokers"),
                 c.get("rtt_ms"), c.get("cause")] for n, c in clusters.items()])
