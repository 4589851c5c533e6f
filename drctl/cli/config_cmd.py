"""`drctl config show|check`."""

from __future__ import annotations

from typing import Annotated

import typer

from drctl.cli.durations import duration_option
from drctl.cli.state import CURRENT, OutputOption
from drctl.config import config_as_data
from drctl.errors import ExitStatus
from drctl.kafka.clients import check_clusters
from drctl.terminal import OutputFormat

app = typer.Typer(help="Show and check the configuration.", no_args_is_help=True)


@app.command("show")
def show(output: Annotated[OutputFormat | None, OutputOption] = None) -> None:
    """Print the resolved configuration, secrets masked."""
    config = CURRENT.config()
    term = CURRENT.terminal(output)
    data = config_as_data(config)
    if term.json_mode:
        term.emit_json(data)
    else:
        term.emit_yaml(data)


@app.command("check")
def check(
    output: Annotated[OutputFormat | None, OutputOption] = None,
    deadline: Annotated[float, duration_option(
        "Give up on a cluster after retrying it this long.", default="30s")] = 30.0,
) -> None:
    """Connect to every cluster: id, broker count, controller, round-trip time."""
    config = CURRENT.config()
    term = CURRENT.terminal(output)
    policy = config.retry.with_deadline(deadline)
    results, failures = check_clusters(
        config, policy, on_retry=lambda c, n, exc, delay: term.warn(
            f"{c}: attempt {n} failed ({exc}); retrying in {delay:.0f} s"))
    if term.json_mode:
        term.emit_json({"clusters": results})
    else:
        term.table("Clusters", ["cluster", "bootstrap", "cluster id", "brokers", "controller",
                                "rtt ms"],
                   [[r["cluster"], r["bootstrap"], r.get("cluster_id", "unreachable"),
                     r.get("brokers"), r.get("controller"), r.get("rtt_ms")] for r in results])
    if failures:
        for exc in failures:
            term.error(exc.message)
            if exc.hint:
                term.err.print(f"  {term.redactor.redact(exc.hint)}", markup=False)
        raise typer.Exit(ExitStatus.UNREACHABLE)
