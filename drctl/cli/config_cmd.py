"""`drctl config init|show|check`."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any

import typer

from drctl.cli.confirm import interactive
from drctl.cli.help import Typer
from drctl.cli.options import DEFAULT_DEADLINE_S, Deadline, OutputOption
from drctl.cli.state import CURRENT
from drctl.config import Config, ReplicationSettings, config_as_data
from drctl.errors import Aborted, ConfigError, DrctlError, ExitStatus, UsageError
from drctl.gap import remote
from drctl.gap.kafka_options import gap_job_settings
from drctl.kafka.clients import check_clusters
from drctl.progress import Notify
from drctl.registry.client import check_registries
from drctl.replication.base import kind_for
from drctl.replication.connect import check_connect
from drctl.replication.discovered import DiscoveredFlow
from drctl.replication.discovery import (
    ChosenFlow,
    ConfigDraft,
    FlowChoiceNeeded,
    InitRequest,
    choose_flow,
    choose_pair,
    draft_config,
    draft_pair_config,
    find_flows,
    reads_connectors,
)
from drctl.replication_registry import KIND_NAMES
from drctl.suggest import did_you_mean
from drctl.terminal import OutputFormat, Terminal

app = Typer(help="Write, show and check the configuration.\n\n\b\nExamples:"
                 "\n  drctl config init --primary-bootstrap broker-a:9092 \\"
                 "\n      --secondary-bootstrap broker-b:9092 --connect-url http://connect:8083"
                 "\n  drctl config show"
                 "\n  drctl -c prod.yaml config check", no_args_is_help=True)


@app.command("init")
def init(
    primary_bootstrap: Annotated[str | None, typer.Option(
        "--primary-bootstrap", metavar="HOST:PORT,...",
        help="The primary cluster's bootstrap servers, as drctl reaches them.")] = None,
    secondary_bootstrap: Annotated[str | None, typer.Option(
        "--secondary-bootstrap", metavar="HOST:PORT,...",
        help="The secondary cluster's bootstrap servers.")] = None,
    connect_url: Annotated[str | None, typer.Option(
        "--connect-url", metavar="URL",
        help="Kafka Connect's REST URL, where the replicator's connectors run (a "
             "user:password@ in it is used to read them, never written).")] = None,
    connect_ca_file: Annotated[Path | None, typer.Option(
        "--connect-ca-file", metavar="PATH",
        help="HTTPS: the CA that signed the Connect worker's certificate.")] = None,
    source_connector: Annotated[str | None, typer.Option(
        "--source-connector", metavar="NAME",
        help="The flow to write when the worker runs several: its source connector.")] = None,
    rename: Annotated[str | None, typer.Option(
        "--rename", metavar="TEMPLATE",
        help="The target name of a source topic, for a replication policy drctl cannot "
             "read: '{topic}' (names kept) or 'primary.{topic}'.")] = None,
    primary_registry: Annotated[str | None, typer.Option(
        "--primary-registry", metavar="URL",
        help="The primary's schema registry (Confluent's API; Apicurio: "
             "https://host/apis/ccompat/v7), for schema-id parity; a user:password@ in it "
             "writes the user, the password as a reference.")] = None,
    secondary_registry: Annotated[str | None, typer.Option(
        "--secondary-registry", metavar="URL",
        help="The secondary's schema registry.")] = None,
    strimzi: Annotated[str | None, typer.Option(
        "--strimzi", metavar="NAMESPACE/NAME",
        help="Read the flow from Strimzi's KafkaMirrorMaker2 NAMESPACE/NAME (instead of "
             "Kafka Connect): drctl then changes it through that resource.")] = None,
    kubeconfig: Annotated[Path | None, typer.Option(
        "--kubeconfig", metavar="PATH",
        help="With --strimzi: the kubeconfig (default: $KUBECONFIG, ~/.kube/config, or the "
             "pod's service account).")] = None,
    kube_context: Annotated[str | None, typer.Option(
        "--context", metavar="NAME",
        help="With --strimzi: the kubeconfig's context (default: its current one).")] = None,
    kind: Annotated[str | None, typer.Option(
        "--kind", metavar="[" + "|".join(KIND_NAMES) + "]",
        help="Only flows of this kind; identity (Cluster Linking and the like) reads no "
             "connectors.")] = None,
    out: Annotated[Path | None, typer.Option(
        "--out", metavar="PATH",
        help="Where to write it (default: --config, DRCTL_CONFIG or ./drctl.yaml).")] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing file.")] = False,
    check_it: Annotated[bool, typer.Option(
        "--check/--no-check", help="Check what was written, as `config check` does.")] = True,
    output: Annotated[OutputFormat | None, OutputOption] = None,
    deadline: Deadline = DEFAULT_DEADLINE_S,
) -> None:
    """Write a first configuration from what the replicator says about itself: the
    MirrorMaker 2 (or Replicator) connectors on Kafka Connect give the flow's source and
    target, topic naming, topic and group filters, connector names and intervals. One
    MirrorMaker 2 flow each way (and no --source-connector): an active-active pair,
    `topology:` with both. Then check it as `config check` does. Secrets are never
    written: logins are written as ${env:...} references to export, or as commented
    lines to fill in.

    On a terminal, drctl asks for what is missing; elsewhere (CI) a missing flag is exit 2.

    \b
    Examples:
      drctl config init --primary-bootstrap broker-a:9092 \\
          --secondary-bootstrap broker-b:9092 --connect-url http://connect:8083
      drctl config init ... --source-connector mm2-dc1-dc2-source --out dr.yaml
      drctl config init ... --primary-registry https://sr-a:8081 \\
          --secondary-registry https://sr-b:8081
      drctl config init --kind identity --primary-bootstrap a:9092 \\
          --secondary-bootstrap b:9092
      drctl config init ... --strimzi secondary/mm2 --kubeconfig ~/.kube/dr

    \b
    Exit status: 0 written and every cluster answered; 2 a flag missing, the file
    exists (--force), several flows (--source-connector) or a config error; 4
    Kafka Connect or a cluster unreachable; 5 not overwritten."""
    term = CURRENT.terminal(output)
    path = out or CURRENT.config_path
    _refuse_overwrite(path, force)
    if kind is not None and kind not in KIND_NAMES:
        raise UsageError(f"--kind must be one of {', '.join(KIND_NAMES)}, got '{kind}'.",
                         did_you_mean(kind, KIND_NAMES))
    request = InitRequest(
        primary_bootstrap=_given_or_asked(primary_bootstrap, "--primary-bootstrap",
                                          "Bootstrap servers of the primary cluster"),
        secondary_bootstrap=_given_or_asked(secondary_bootstrap, "--secondary-bootstrap",
                                            "Bootstrap servers of the secondary cluster"),
        connect_url=None if not reads_connectors(kind) or strimzi else _given_or_asked(
            connect_url, "--connect-url", "Kafka Connect REST URL (where the replicator runs)"),
        # Absolute: the config reads relative paths from its own directory, not from here.
        connect_ca_file=str(connect_ca_file.resolve()) if connect_ca_file else None,
        source_connector=source_connector, rename=rename, kind=kind,
        primary_registry=primary_registry, secondary_registry=secondary_registry,
        strimzi=strimzi, kubeconfig=str(kubeconfig.resolve()) if kubeconfig else None,
        context=kube_context)
    if request.strimzi:
        term.step(f"Reading the KafkaMirrorMaker2 {request.strimzi}")
    if request.connect_url:
        term.step(f"Reading the connectors on Kafka Connect at {request.connect_url}")
    flows = find_flows(request, deadline)
    pair = choose_pair(flows, request)
    if pair is not None and all(c.flow.rename is not None for c in pair):
        # One MirrorMaker 2 flow each way: an active-active pair (`topology:`).
        draft = draft_pair_config(request, *pair)
    else:
        chosen = _chosen_flow(request, flows)
        if chosen.flow.rename is None and request.rename is None and interactive():
            request = replace(request, rename=typer.prompt(
                f"{chosen.flow.name} uses {chosen.flow.rename_source}, which drctl cannot "
                "read. Target name of a source topic ('{topic}' keeps names)",
                err=True).strip())
        draft = draft_config(request, chosen)
    _write(path, draft.render())
    _report_written(term, path, draft)
    data: dict[str, Any] = {"path": str(path), "flow": draft.summary(), "check": None}
    status = ExitStatus.SUCCESS
    if check_it:
        CURRENT.config_option = str(path)
        data["check"], status = run_config_check(CURRENT.config().under_deadline(deadline), term,
                                                   deadline)
    if term.json_mode:
        term.emit_json(data)
    if status:
        raise typer.Exit(status)


def _refuse_overwrite(path: Path, force: bool) -> None:
    if force or not path.exists():
        return
    if not interactive():
        raise UsageError(f"{path} exists; it was not overwritten.",
                         "Pass --force to overwrite it, or --out PATH to write elsewhere.")
    if not typer.confirm(f"{path} exists. Overwrite it?", default=False, err=True):
        raise Aborted(f"{path} was not overwritten.")


def _given_or_asked(value: str | None, flag: str, question: str) -> str:
    """A flag's value; on a terminal, asked for when it is missing; elsewhere exit 2."""
    if value:
        return value
    if not interactive():
        raise UsageError(f"{flag} is missing.",
                         f"Pass {flag} (drctl asks for it only on a terminal).")
    answer: str = typer.prompt(question, err=True)
    return answer.strip()


def _chosen_flow(request: InitRequest, flows: Sequence[DiscoveredFlow]) -> ChosenFlow:
    """The flow to write; on a terminal, the operator picks one when Connect runs several."""
    try:
        return choose_flow(flows, request)
    except FlowChoiceNeeded as exc:
        if not interactive():
            raise
        typer.echo(exc.message, err=True)
        numbered = "\n".join(f"  {i}. {flow.describe()}" for i, flow in
                             enumerate(exc.flows, 1))
        typer.echo(numbered, err=True)
        while True:
            picked: int = typer.prompt("Which flow should drctl manage? (number)", type=int,
                                       err=True)
            if 1 <= picked <= len(exc.flows):
                break
            typer.echo(f"A number from 1 to {len(exc.flows)}, please.", err=True)
        return choose_flow(flows, replace(request, source_connector=exc.flows[picked - 1].name))


def _write(path: Path, text: str) -> None:
    """All of it or nothing: a reader never sees half a config."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _report_written(term: Terminal, path: Path, draft: ConfigDraft) -> None:
    summary = draft.summary()
    if summary.get("topology"):
        term.success(f"Wrote {path}: {summary['topology']}, {summary['kind']} "
                     + " and ".join(f"{f['source']} -> {f['target']} (topics named "
                                    f"{f['rename']!r})" for f in summary["flows"]))
    else:
        term.success(f"Wrote {path}: {summary['kind']} {summary['source']} -> "
                     f"{summary['target']}, topics named {summary['rename']!r}"
                     + (f", connectors {', '.join(summary['connectors'].values())}"
                        if summary["connectors"] else ""))
    for warning in draft.warnings:
        term.warn(warning)
    if draft.env_vars:
        term.warn(f"The file refers to {', '.join(draft.env_vars)} (secrets are never "
                  "written): export them before drctl runs, or edit the references.")


@app.command("show")
def show(output: Annotated[OutputFormat | None, OutputOption] = None) -> None:
    """Print the resolved configuration under the file's own keys: secrets masked, values
    written as ${env:...} or ${file:...} shown as those references, relative paths
    resolved. What it prints is a configuration drctl reads (fill in a masked secret).

    \b
    Examples:
      drctl config show
      drctl config show > resolved.yaml && drctl -c resolved.yaml config check
      drctl config show -o json | jq .clusters"""
    config = CURRENT.config()
    term = CURRENT.terminal(output)
    data = config_as_data(config)
    if term.json_mode:
        term.emit_json(data)
    else:
        term.emit_text(f"# {config.path}, as drctl reads it (secrets masked)")
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
    term = CURRENT.terminal(output)
    data, status = run_config_check(CURRENT.config().under_deadline(deadline), term, deadline)
    if term.json_mode:
        term.emit_json(data)
    if status:
        raise typer.Exit(status)


def run_config_check(config: Config, term: Terminal,
                     deadline: float) -> tuple[dict[str, Any], ExitStatus]:
    """`config check` (also run by `config init` on what it wrote): its JSON data and exit
    status; in text mode the clusters' table and every problem are printed."""
    # Reported before connecting: a cluster that fails to connect must not hide them.
    java_settings, java_problems = gap_job_settings(config) if config.replication else ({}, [])
    for settings in java_settings.values():
        for warning in settings.warnings:
            term.warn(warning)
    for problem in java_problems:
        _report(term, problem)
    policy = config.retry.with_deadline(deadline)
    # Active-active: the flows are checked one by one (their Connect worker), and their
    # naming together — names kept both ways are a loop (exit 2, named).
    rep = config.replication or (config.topology.flows[0] if config.topology else None)
    loop = _naming_loop(config, term)
    with ThreadPoolExecutor(3, thread_name_prefix="config-check") as pool:
        # Connect, the schema registries and the Spark Connect server are asked beside the
        # clusters, under the same deadline.
        asked = pool.submit(_read_connect, rep, term.warn) if rep is not None else None
        registries = pool.submit(check_registries, config, deadline, term.warn)
        spark_asked = pool.submit(remote.check, config.spark, deadline) \
            if config.spark.remote else None
        results, failures = check_clusters(config, policy, notify=term.warn)
        connect, connect_error, costs = asked.result() if asked else (None, None, None)
        registry_rows, registry_errors = registries.result()
        spark, spark_error = spark_asked.result() if spark_asked else (None, None)
    if costs:
        report_translation_costs(term, costs)
    data = {"clusters": results, "connect": connect, "schema_registries": registry_rows,
            "translation_costs": costs, "gap_job": {
        "warnings": [w for s in java_settings.values() for w in s.warnings],
        "problems": [{"key": p.key, "reason": p.reason, "hint": p.hint}
                     for p in java_problems],
        "spark_connect": spark}}
    if not term.json_mode:
        term.table("Clusters", ["cluster", "bootstrap", "cluster id", "brokers", "controller",
                                "rtt ms"],
                   [[r["cluster"], r["bootstrap"], r.get("cluster_id", "unreachable"),
                     r.get("brokers"), r.get("controller"), r.get("rtt_ms")] for r in results])
        if connect is not None and connect["reachable"]:
            kafka = f", {connect['kafka']}" if connect.get("kafka") else ""
            term.info(f"Kafka Connect at {connect['url']} answers (version "
                      f"{connect.get('version') or 'unknown'}{kafka}).")
        for row in registry_rows:
            if row["reachable"]:
                term.info(f"{row['cluster']}'s schema registry at {row['url']} answers "
                          f"({row['version'] or 'version unknown'}, {row['subjects']} "
                          "subject(s)).")
        if spark is not None and spark["reachable"]:
            term.info(f"Gap jobs run on Spark Connect {spark['remote']}: Spark "
                      f"{spark['version']}, Kafka source "
                      f"{'on it' if spark['kafka_connector'] else 'MISSING'}.")
    if loop is not None:
        data["topology"] = {"problem": loop.reason}
    errors = [e for e in (loop, connect_error, spark_error, *registry_errors) if e is not None]
    for exc in [*failures, *errors]:
        _report(term, exc)
    if java_problems or any(e.exit_status == ExitStatus.USAGE for e in errors):
        return data, ExitStatus.USAGE
    if failures or errors:
        return data, ExitStatus.UNREACHABLE
    return data, ExitStatus.SUCCESS


def _naming_loop(config: Config, term: Terminal) -> ConfigError | None:
    """An active-active pair whose naming cannot run both ways, as the config says it or as
    the connectors on Kafka Connect run it; None when it holds (or without a topology)."""
    if config.topology is None:
        return None
    from drctl.ops.active_active.pair import Pair

    pair = Pair(config)
    problem = pair.naming_problem() or pair.live_naming_problem(term.warn)
    if problem is None:
        return None
    return ConfigError(problem, path=str(config.path) if config.path else None,
                       key="topology.flows",
                       hint="Give both flows MirrorMaker 2's DefaultReplicationPolicy "
                            "(rename: '<source alias>.{topic}'), in the config and on the "
                            "connectors.")


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
