"""`drctl config show|check`."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Annotated, Any

import typer

from drctl.cli.help import Typer
from drctl.cli.options import DEFAULT_DEADLINE_S, Deadline, OutputOption
from drctl.cli.state import CURRENT
from drctl.config import ReplicationSettings, config_as_data
from drctl.errors import DrctlError, ExitStatus, UsageError
from drctl.gap.kafka_options import gap_job_settings
from drctl.kafka.clients import check_clusters
from drctl.progress import Notify
from drctl.replication.base import kind_for
from drctl.replication.connect import check_connect
from drctl.terminal import OutputFormat, Terminal

app = Typer(help="Show and check the configuration.\n\n\b\nExamples:"
                 "\n  drctl config show"
                 "\n  drctl -c prod.yaml config check", no_args_is_help=True)


@app.command("show")
def show(output: Annotated[OutputFormat | None, OutputOption] = None) -> None:
    """Print the resolved configuration, secrets masked.

    \b
    Examples:
      drctl config show
      drctl config show -o json | jq .clusters"""
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
    deadline: Deadline = DEFAULT_DEADLINE_S,
) -> None:
    """Connect to every cluster, all at once: id, broker count, controller, round-trip
    time. With a replication section, also check that the gap job's Java client can take
    the settings of its two clusters, and read the replicator's settings over Connect to
    say what they cost a failover with the source gone.

    \b
    Examples:
      drctl config check
      drctl config check --deadline 5s -o json

    \b
    Exit status: 0 every cluster (and Connect) answered; 2 a configuration
    error (a misspelt client property, a setting the Java client cannot take,
    Connect refusing drctl's credentials); 4 a cluster or Connect unreachable."""
    config = CURRENT.config().under_deadline(deadline)
    term = CURRENT.terminal(output)
    # Reported before connecting: a cluster that fails to connect must not hide them.
    java_settings, java_problems = gap_job_settings(config) if config.replication else ({}, [])
    for settings in java_settings.values():
        for warning in settings.warnings:
            term.warn(warning)
    for problem in java_problems:
        _report(term, problem)
    policy = config.retry.with_deadline(deadline)
    rep = config.replication
    with ThreadPoolExecutor(1, thread_name_prefix="config-check-connect") as pool:
        # Connect is asked beside the clusters, under the same deadline.
        asked = pool.submit(_read_connect, rep, term.warn) if rep is not None else None
        results, failures = check_clusters(config, policy, notify=term.warn)
        connect, connect_error, costs = asked.result() if asked else (None, None, None)
    if costs:
        report_translation_costs(term, costs)
    if term.json_mode:
        term.emit_json({"clusters": results, "connect": connect, "translation_costs": costs,
                        "gap_job": {
            "warnings": [w for s in java_settings.values() for w in s.warnings],
            "problems": [{"key": p.key, "reason": p.reason, "hint": p.hint}
                         for p in java_problems]}})
    else:
        term.table("Clusters", ["cluster", "bootstrap", "cluster id", "brokers", "controller",
                                "rtt ms"],
                   [[r["cluster"], r["bootstrap"], r.get("cluster_id", "unreachable"),
                     r.get("brokers"), r.get("controller"), r.get("rtt_ms")] for r in results])
        if connect is not None and connect["reachable"]:
            term.info(f"Kafka Connect at {connect['url']} answers (version "
                      f"{connect.get('version') or 'unknown'}).")
    for exc in failures:
        _report(term, exc)
    if connect_error is not None:
        _report(term, connect_error)
    if java_problems or isinstance(connect_error, UsageError):
        raise typer.Exit(ExitStatus.USAGE)
    if failures or connect_error is not None:
        raise typer.Exit(ExitStatus.UNREACHABLE)


def _read_connect(rep: ReplicationSettings, notify: Notify
                  ) -> tuple[dict[str, Any] | None, DrctlError | None, dict[str, Any] | None]:
    """The flow's Connect worker, then what the replicator's settings cost (read over it):
    (its reading, the error when it did not answer, the costs)."""
    connect, error = check_connect(rep, notify)
    if error is not None:
        return connect, error, None
    try:
        # The same reading `status` shows: MM2's checkpoint interval, group refresh, groups.
        return connect, None, kind_for(rep).translation_costs(rep)
    except DrctlError as exc:  # it stopped answering meanwhile
        if connect is not None:
            connect = {**connect, "reachable": False, "error": exc.message}
        return connect, exc, None


def report_translation_costs(term: Terminal, costs: dict[str, Any]) -> None:
    """Each cost as a warning, then what removes most of them."""
    term.info("What the replicator's settings cost a failover with the source gone:")
    for line in costs["lines"]:
        term.warn(line)
    term.err.print("  Run `drctl guard` beside the replicator for exact positions, or shorten "
                   "these intervals on the checkpoint connector.", markup=False)


def _report(term: Terminal, exc: DrctlError) -> None:
    term.error(exc.message)
    if exc.hint:
        term.err.print(f"  {term.redactor.redact(exc.hint)}", markup=False)
    term.detail(exc.detail)
