"""`drctl check`."""

from __future__ import annotations

from typing import Annotated

import typer

from drctl.cli.durations import duration_option
from drctl.cli.options import DEFAULT_DEADLINE_S, App, Deadline, Groups, OutputOption
from drctl.cli.state import CURRENT
from drctl.errors import ExitStatus
from drctl.findings import Readiness, Severity
from drctl.readiness.check import CheckOptions, run_check
from drctl.terminal import OutputFormat, Terminal


def check_command(
    app: App = None,
    topics: Annotated[str, typer.Option(
        metavar="REGEX", help="Only these of the flow's topics (a regex on the whole name).")]
    = ".*",
    groups: Groups = ".*",
    stale_after: Annotated[float, duration_option(
        "A group position on the target (checkpoint, guard snapshot) behind its commit and "
        "older than this is stale.", default="5m")] = 300.0,
    transaction_age: Annotated[float | None, duration_option(
        "An open transaction older than this is hanging (default: the brokers' "
        "transaction.max.timeout.ms).", default=None)] = None,
    deadline: Deadline = DEFAULT_DEADLINE_S,
    notes: Annotated[bool, typer.Option(
        "--notes", help="Also list notes: what settings cost, nothing to fix.")] = False,
    metrics: Annotated[bool, typer.Option(
        "--metrics", help="Print Prometheus metrics (findings by area, lag) on stdout "
        "instead, e.g. for node_exporter's textfile collector.")] = False,
    output: Annotated[OutputFormat | None, OutputOption] = None,
) -> None:
    """Readiness: would a failover of the flow work now? One finding per object, with the
    difference, the risk and the fix.

    Topic parity (mirror, partitions, timestamp type, min.insync.replicas, cleanup,
    retention, max.message.bytes), ACL parity, group positions on the target, hanging
    transactions on either side, MirrorMaker 2's settings, guard, and — with a
    schema_registry per cluster — schema-id parity: the ids in the newest records of
    every mirrored topic mean the same schema on the target's registry.

    \b
    Examples:
      drctl check
      drctl check --topics 'orders.*' -o json
      drctl check --app billing    # what it resolves to; groups on its edge;
                                   # only its topics' schema ids
      drctl check --stale-after 2m --notes
      drctl check --metrics > /var/lib/node_exporter/drctl.prom

    \b
    Active-active (`topology:`): each flow, and each region's aggregate
    subscriptions that miss a topic or over-match (the anchored regex to use).

    \b
    Exit status: 0 ready; 3 a finding to fix; 4 a cluster, Connect or a schema
    registry did not answer (readiness unknown); 2 a configuration error."""
    term = CURRENT.terminal(output)
    opts = CheckOptions(topics=topics, groups=groups, stale_after_s=stale_after,
                        transaction_age_s=transaction_age, deadline_s=deadline)
    if CURRENT.config().topology is not None:
        pair_check(opts, app=app, notes=notes, metrics=metrics, output=output)
        return
    result = run_check(CURRENT.context(deadline, app=app), opts)
    if metrics:
        term.emit_text(readiness_metrics(result).rstrip("\n"))
    elif term.json_mode:
        term.emit_json(result.as_dict())
    else:
        render_readiness(term, result, notes=notes)
    raise typer.Exit(result.exit_status)


def render_readiness(term: Terminal, result: Readiness, *, notes: bool) -> None:
    data = result.as_dict()
    scope = data.get("scope")
    if scope is not None:
        term.table(f"Application {scope['name']}", ["what", "resolves to"],
                   [["topics", ", ".join(scope["topics"]) or "-"],
                    ["groups", ", ".join(scope["groups"]) or "-"],
                    ["read outside it", ", ".join(scope["read_outside"]) or "-"]])
    shown = [f for f in data["findings"] if notes or f["severity"] != Severity.NOTE]
    if shown:
        term.table(f"Readiness {result.source} -> {result.target}",
                   ["area", "severity", "object", "difference", "risk", "fix"],
                   [[f["area"], f["severity"], f["object"], f["difference"], f["risk"],
                     f["fix"]] for f in shown])
    if result.schemas is not None:
        term.info(f"Schemas: {result.schemas['description']}")
    rpo = data["rpo"]
    if rpo is not None:
        behind = f" ({rpo['behind']:,} record(s) not replicated)" \
            if rpo.get("behind") is not None else ""
        term.info(f"RPO now: {rpo['text']}{behind}")
    looked = ", ".join(f"{n} {area}" for area, n in data["checked"].items())
    summary = (f"{result.source} -> {result.target}: {data['verdict'].upper()} — "
               f"{data['risks']} risk(s), {data['blind']} blind spot(s), {data['notes']} "
               f"note(s); looked at {looked or 'nothing'} in {data['seconds']:g} s")
    if result.exit_status:
        term.warn(summary)
    else:
        term.success(summary)


def readiness_metrics(result: Readiness) -> str:
    """The check as Prometheus metrics: findings by area (risks and blind spots) and the
    replication lag it read (NaN with an error gauge when unknown)."""
    from drctl.metrics import (
        Metrics,
        exposition_text,
        flow_name,
        set_readiness_findings,
        set_replication_lag,
    )

    registry = Metrics()
    flow = flow_name(result.source, result.target)
    set_readiness_findings(registry, flow, result.by_area())
    rpo = result.rpo or {}
    set_replication_lag(registry, flow, result.lag,
                        error=None if result.lag is not None else rpo.get("reason", "not read"))
    return exposition_text(registry)


def pair_check(opts: CheckOptions, *, app: str | None, notes: bool, metrics: bool,
               output: OutputFormat | None) -> None:
    """`drctl check` of an active-active pair: both flows, worst exit status."""
    from drctl.errors import UsageError
    from drctl.ops.active_active.pair import Pair
    from drctl.readiness.pair import check_pair

    if app is not None:
        raise UsageError("--app is for one flow; an active-active pair is checked whole.")
    term = CURRENT.terminal(output)
    results = check_pair(Pair(CURRENT.config()), opts, term.step)
    status = max((r.exit_status for r in results), key=_severity)
    if metrics:
        term.emit_text("\n".join(readiness_metrics(r).rstrip("\n") for r in results))
    elif term.json_mode:
        term.emit_json({"topology": "active-active", "exit_status": int(status),
                        "flows": [r.as_dict() for r in results]})
    else:
        for result in results:
            render_readiness(term, result, notes=notes)
    raise typer.Exit(status)


def _severity(status: ExitStatus) -> int:
    return (ExitStatus.SUCCESS, ExitStatus.CHECK_FAILED, ExitStatus.UNREACHABLE).index(status)
