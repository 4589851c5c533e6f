"""`drctl guard`."""

from __future__ import annotations

import signal
import threading
from typing import Annotated

import typer

from drctl.cli.durations import duration_option
from drctl.cli.options import DEFAULT_DEADLINE_S, Groups, OutputOption, deadline_option
from drctl.cli.state import CURRENT
from drctl.errors import ExitStatus
from drctl.metrics import Metrics, serve
from drctl.ops.steps.guard import run_guard
from drctl.terminal import OutputFormat


def guard_command(
    groups: Groups = ".*",
    interval: Annotated[float, duration_option("Time between rounds.", default="5s",
                                               minimum_s=0.5)] = 5.0,
    once: Annotated[bool, typer.Option("--once", help="One round, then exit (cron, tests); "
                                       "exit 4 when it failed.")] = False,
    deadline: Annotated[float, deadline_option(
        "the round fails, and the next one tries again.")] = DEFAULT_DEADLINE_S,
    output: Annotated[OutputFormat | None, OutputOption] = None,
    metrics_port: Annotated[int | None, typer.Option(
        "--metrics-port", min=0, max=65535, metavar="PORT",
        help="Serve Prometheus metrics on http://ADDRESS:PORT/metrics while guard runs: "
             "lag in records and seconds, protection, open incidents, rounds "
             "(docs/operations.md, Metrics).")] = None,
    metrics_address: Annotated[str, typer.Option(
        "--metrics-address", metavar="ADDRESS",
        help="Where --metrics-port listens (0.0.0.0: every interface).")] = "127.0.0.1",
) -> None:
    """Keep exact group positions on the target for a failover with the source down.

    Each round writes the positions that moved, translated exactly, to a compacted topic.
    `failover` uses them when the source is gone (`--method snapshot`). Runs in the
    foreground until SIGTERM or Ctrl-C, logging rounds to stderr; a failed round names
    the cluster and address, and the next one tries again.

    \b
    Examples:
      drctl guard                         # beside the replicator, as a service
      drctl guard --once --deadline 10s   # one round (cron, a runbook)

    \b
    Active-active (`topology:`): both flows, each keeping its source
    region's groups on the other region.

    \b
    Exit status: 0 stopped by SIGTERM or Ctrl-C, or --once succeeded; 2 usage
    or config; 4 --once and the round failed (a cluster unreachable)."""
    config = CURRENT.config()
    term = CURRENT.terminal(output)
    stop = threading.Event()
    previous = {}
    if not once:
        # Finish the round in flight (its snapshots acknowledged), then exit 0. The process's
        # own handlers come back after: a runbook or a test running guard in its process
        # is stopped by SIGTERM and Ctrl-C again once guard is done.
        for sig in (signal.SIGTERM, signal.SIGINT):
            previous[sig] = signal.signal(sig, lambda *_: stop.set())
    metrics = server = None
    if metrics_port is not None:
        metrics = Metrics()
        server = serve(metrics, metrics_address, metrics_port)
        term.step(f"guard: metrics on http://{metrics_address}:{server.port}/metrics")
    try:
        if config.topology is not None:
            # Active-active: each flow keeps its source region's groups on the other region.
            from drctl.ops.active_active.guard import run_pair_guard
            from drctl.ops.active_active.pair import Pair

            by_flow = run_pair_guard(Pair(config), notify=term.step, deadline_s=deadline,
                                     groups=groups, interval_s=interval, once=once,
                                     stop=stop, metrics=metrics)
            rows = [{**r.as_dict(), "flow": flow} for flow, rs in sorted(by_flow.items())
                    for r in rs]
            failed = once and any(rs and rs[-1].error for rs in by_flow.values())
        else:
            rounds = run_guard(CURRENT.context(deadline), groups=groups, interval_s=interval,
                               once=once, stop=stop, metrics=metrics, deadline_s=deadline)
            rows = [r.as_dict() for r in rounds]
            failed = once and bool(rounds) and rounds[-1].error is not None
    finally:
        if server is not None:
            server.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if term.json_mode:
        term.emit_json({"snapshots_topic": config.state.snapshots_topic, "rounds": rows})
    if failed:
        raise typer.Exit(ExitStatus.UNREACHABLE)
