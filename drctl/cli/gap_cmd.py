"""`drctl gap-analysis`: the source records that never reached the target (docs/design.md §5)."""

from __future__ import annotations

import dataclasses
import shlex
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer

from drctl.cli.confirm import confirm_or_abort
from drctl.cli.durations import duration_option
from drctl.cli.options import (
    DEFAULT_DEADLINE_S,
    Deadline,
    OutputOption,
    names_regex,
    old_spelling,
    renamed,
)
from drctl.cli.state import CURRENT
from drctl.context import OpsContext
from drctl.errors import ExitStatus, UsageError
from drctl.gap.alignment import DEFAULT_MARGIN
from drctl.gap.jars import resolve_connector
from drctl.gap.plan import IDENTITY, GapScope
from drctl.gap.planner import (
    bounds_from_marker,
    flow_topics,
    parse_offsets,
    plan_gap_analysis,
    rekey,
    window_from,
)
from drctl.gap.quarantine import quarantine_gap
from drctl.gap.result import GapResult, scope_statement
from drctl.gap.runner import (
    ClusterWatch,
    note_shared_output,
    run_gap_analysis,
    spark_submit_command,
)
from drctl.state import FailoverMarker
from drctl.terminal import OutputFormat, Terminal
from drctl.timeparse import parse_time_ms

CONFLICT_ROWS = 20


def gap_analysis(
    topics: Annotated[str | None, typer.Option(
        "--topics", metavar="REGEX",
        help="Only these of the flow's topics (a regex on the whole name; default: every "
             "topic replication.topics covers that has a mirror on the target).")] = None,
    source_end: Annotated[str | None, typer.Option(
        metavar="OFFSETS", help="Source end offsets (default: its current end). JSON "
             '{"topic": {"0": 120}} or, when --topics names one topic, 0:120,1:98.')] = None,
    target_end: Annotated[str | None, typer.Option(
        metavar="OFFSETS",
        help="The failover point F: target end offsets per partition (default: the "
             "target's current end). Same forms as --source-end.")] = None,
    failover_start: Annotated[str | None, typer.Option(
        metavar="OFFSETS",
        help="--check-order with prefixed names: where post-failover writes to the failover "
             "topic begin (its end when replication stopped). Same forms.")] = None,
    scope: Annotated[GapScope, typer.Option(
        help="; ".join(f"{s}: {s.meaning}" for s in GapScope) + ".")] = GapScope.TAIL,
    margin: Annotated[int, typer.Option(
        min=0, metavar="N",
        help="Tail scope: records per partition compared before the proven alignment "
             "(absorbs a replicator's re-copies).")] = DEFAULT_MARGIN,
    since: Annotated[str | None, typer.Option(
        metavar="TIME",
        help="Also narrow the comparison to records from this time on (ISO-8601 or epoch "
             "ms); the summary says how many it left out. Default: no window.")] = None,
    lookback: Annotated[float | None, duration_option(
        "Like --since, as a duration before the failover (or now), e.g. 6h.",
        default=None)] = None,
    check_order: Annotated[bool, typer.Option(
        "--check-order", help="Classify each unreplicated record safe / conflict / unkeyed "
                              "against the post-failover writes.")] = False,
    fail_on_gap: Annotated[bool, typer.Option(
        "--fail-on-gap", help="Exit 3 when any record is unreplicated (or, for identity "
                              "mirrors, any offset diverges).")] = False,
    report_dir: Annotated[Path | None, typer.Option(
        "--report-dir", metavar="DIR",
        help="Where to write the unreplicated records (Parquet) and summary.json (default: "
             "a temporary directory, removed).")] = None,
    to_topic: Annotated[str | None, typer.Option(
        metavar="TOPIC",
        help="Produce the unreplicated records to this quarantine topic on the target "
             "({topic} stands for the source topic).")] = None,
    yes: Annotated[bool, typer.Option("--yes", "-y",
                                      help="Write to --to-topic without asking.")] = False,
    master: Annotated[str | None, typer.Option(
        metavar="URL", help="Spark master for a job of its own (default: the config's "
                            "spark.remote, else spark.master, local[*]).")] = None,
    plan_out: Annotated[Path | None, typer.Option(
        metavar="FILE",
        help="Only pin the bounds: write the plan here and print the spark-submit line that "
             "runs it (needs --report-dir).")] = None,
    use_marker: Annotated[bool, typer.Option(
        "--marker/--no-marker",
        help="Take F from the open failover marker when there is one.")] = True,
    deadline: Deadline = DEFAULT_DEADLINE_S,
    old_topic: Annotated[list[str] | None, old_spelling("--topic", "-t")] = None,
    old_out: Annotated[Path | None, old_spelling("--out")] = None,
    output: Annotated[OutputFormat | None, OutputOption] = None,
) -> None:
    """Find source records that never reached the target, with a Spark job.

    Pins each partition's bounds on both clusters (the failover point F from the open
    incident's marker when there is one), then compares the records in Spark.

    \b
    Examples:
      drctl gap-analysis --check-order --report-dir gap/
      drctl gap-analysis --topics 'orders' --fail-on-gap    # in CI
      drctl gap-analysis --to-topic 'quarantine.{topic}' --yes

    \b
    Exit status: 0 done (a gap is reported, not failed, without --fail-on-gap);
    1 the Spark job failed or ran out of time; 2 usage or config; 3 an order
    conflict (--check-order) or a gap (--fail-on-gap); 4 a cluster
    unreachable; 5 --to-topic not confirmed."""
    config = CURRENT.config()
    term = CURRENT.terminal(output)
    topics = renamed(topics, names_regex(old_topic) if old_topic else None, old="--topic",
                     new="--topics", warn=term.warn)
    report_dir = renamed(report_dir, old_out, old="--out", new="--report-dir", warn=term.warn)
    rep = config.require_replication()
    # --master runs this job of its own on that master, whatever spark.remote says.
    spark = config.spark if master is None else dataclasses.replace(config.spark, master=master,
                                                                    remote=None)
    if (source_end or target_end or failover_start) and not topics:
        named_from = [o for o in (source_end, target_end, failover_start) if o]
        if not all(o.strip().startswith("{") for o in named_from):
            raise UsageError("Offsets without topic names need --topics.",
                             'Give --topics, or name the topics: {"orders": {"0": 120}}.')
    if plan_out is not None and report_dir is None:
        raise UsageError("--plan-out needs --report-dir: the job writes its results there.")
    ctx = CURRENT.context(deadline)
    named = flow_topics(ctx, topics, deadline) if topics else []
    s_end = parse_offsets(source_end, named, "--source-end") if source_end else None
    t_end = parse_offsets(target_end, named, "--target-end") if target_end else None
    f_start = (parse_offsets(failover_start, named, "--failover-start")
               if failover_start else None)
    failover_time = None
    marker = None if (target_end or not use_marker) else _open_marker(ctx)
    if marker is not None:
        # The failover marker pins F and where post-failover writes begin.
        term.step(f"Bounds from failover marker {marker.incident}")
        failover_time = marker.failover_time_ms
        named = named or sorted(marker.topics)
    window = window_from(parse_time_ms(since, "--since") if since else None,
                         None if lookback is None else int(lookback * 1000),
                         failover_time)
    if to_topic and plan_out is None:
        confirm_or_abort(f"Produce the unreplicated records to '{to_topic}' on "
                         f"'{rep.target}'?", yes=yes)

    term.step(f"Pinning offsets on '{rep.source}' and '{rep.target}'")
    bounds = bounds_from_marker(marker) if marker is not None else {
        "target_end": rekey(t_end, named, rep, "mirror"),
        "post_failover_start": rekey(f_start, named, rep, "failover")}
    plan = plan_gap_analysis(ctx, named or None, **bounds, source_end=s_end, window=window,
                             check_order=check_order, out_dir=report_dir, scope=scope,
                             margin=margin, deadline_s=deadline)
    if plan_out is not None:
        connector = resolve_connector(spark, notify=term.step)
        note_shared_output(plan, spark.master, term.step)
        plan.write(plan_out)
        command = spark_submit_command(plan_out, connector, spark.master)
        line = f"PYSPARK_PYTHON={shlex.quote(sys.executable)} " + shlex.join(command)
        if term.json_mode:
            term.emit_json({"plan": str(plan_out), "spark_submit": command,
                            "env": {"PYSPARK_PYTHON": sys.executable},
                            "report_dir": plan.out_dir})
        else:
            term.warn(f"{plan_out} holds the clusters' client settings (credentials "
                      "included); it is readable by you only.")
            term.info("Run the job with:")
            term.emit_text(line)  # one unbroken line on stdout, to copy or pipe
        return

    with term.progress("Gap analysis") as progress:
        watch = ClusterWatch((ctx.source, ctx.target),
                             ctx.config.retry.with_deadline(deadline), term.step)
        result = run_gap_analysis(plan, spark, progress, debug=CURRENT.debug,
                                  notify=term.step, deadline_s=deadline, watch=watch)
    with result:
        sent: dict[str, int] = {}
        if to_topic and result.has_gap:
            sent = quarantine_gap(result, ctx.target,
                                  to_topic)
        if term.json_mode:
            data = result.as_dict()
            if to_topic:
                data["quarantined"] = sent
            term.emit_json(data)
        else:
            print_gap_result(term, result, sent)
        if (check_order and result.has_conflict) or (
                fail_on_gap and (result.has_gap or result.diverged)):
            raise typer.Exit(ExitStatus.CHECK_FAILED)


def _time(ms: int | None) -> str:
    if ms is None:
        return ""
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds")


def _show(data: bytes | None) -> str:
    if data is None:
        return "null"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return "0x" + data.hex()
    return text if text.isprintable() else "0x" + data.hex()


def print_gap_result(term: Terminal, result: GapResult, sent: dict[str, int]) -> None:
    """The gap for people: notes, the per-partition table, conflicts, totals, quarantine."""
    for note in result.notes:
        term.warn(note)
    columns = ["topic", "partition", "scope", "verified from", "source records",
               "target records", "unreplicated", "first offset", "first time", "last offset",
               "last time"]
    superseded = result.totals["superseded"] > 0
    if superseded:
        columns.append("superseded")
    if result.check_order:
        columns += ["safe", "conflict", "unkeyed (flagged)"]
    if result.kind == IDENTITY:
        columns.append("divergent")
    rows: list[list[Any]] = []
    for p in result.partitions:
        row = [p["topic"], p["partition"], p.get("scope", "full"), p.get("verified_from"),
               p["source_records"], p["target_records"],
               p["unreplicated"], p["first_offset"], _time(p["first_timestamp_ms"]),
               p["last_offset"], _time(p["last_timestamp_ms"])]
        if superseded:
            row.append(p.get("superseded", 0))
        if result.check_order:
            row += [p["safe"], p["conflict"], f"{p['unkeyed']} ({p['unkeyed_flagged']})"]
        if result.kind == IDENTITY:
            row.append(p["divergent"])
        rows.append(row)
    term.table("Unreplicated records per partition", columns, rows)
    _say_scope(term, result)

    if result.check_order and result.has_conflict:
        conflict_rows: list[list[Any]] = []
        for rec in result.iter_records("conflict"):
            if len(conflict_rows) == CONFLICT_ROWS:
                break
            writes = ", ".join(f"[{w.partition}]@{w.offset} {_time(w.timestamp_ms)}"
                               for w in rec.conflicts[:3])
            more = len(rec.conflicts) - 3
            conflict_rows.append([f"{rec.topic}[{rec.partition}]@{rec.offset}", _show(rec.key),
                                  _time(rec.timestamp_ms),
                                  writes + (f" (+{more})" if more > 0 else "")])
        term.table(f"Conflicts (first {len(conflict_rows)}): the key was written on the target "
                   "after failover", ["source record", "key", "time",
                                      "post-failover writes"], conflict_rows)
    if result.kind == IDENTITY and result.diverged:
        sample = ", ".join(f"{d['topic']}[{d['partition']}]@{d['offset']}"
                           for d in result.divergence_sample[:5])
        term.warn(f"{result.totals['divergent']} offset(s) differ between source and target "
                  f"in the overlap window, e.g. {sample}.")

    t = result.totals
    if t["unreplicated"]:
        term.warn(f"{t['unreplicated']:,} of {t['source_records']:,} source records never "
                  f"reached the target ({result.elapsed_s:.1f} s in Spark).")
    else:
        term.success(f"No unreplicated records among {t['source_records']:,} source records "
                     f"({result.elapsed_s:.1f} s in Spark).")
    if t["superseded"]:
        term.info(f"{t['superseded']:,} more source record(s) are not on the target because "
                  "it compacted them away after copying a later version of their key (or "
                  "copying past a tombstone): replicated, not a gap.")
    if result.check_order:
        term.info(f"Order check: {t['safe']:,} safe, {t['conflict']:,} conflict, "
                  f"{t['unkeyed']:,} unkeyed ({t['unkeyed_flagged']:,} in partitions written "
                  "after failover).")
    if not result.temporary:
        term.info(f"Records and summary.json in {result.out_dir}")
    for topic, count in sent.items():
        term.success(f"{count:,} record(s) produced to quarantine topic {topic}.")


def _say_scope(term: Terminal, result: GapResult) -> None:
    """What was verified and what assumed: one line for the proven tails, one per partition
    that fell back to a full comparison or lost records to a window."""
    tails = [p for p in result.partitions if p.get("scope") == "tail"]
    if tails:
        term.info(f"Tail scope in {len(tails)} of {len(result.partitions)} partition(s): each "
                  "verified from just before where replication provably stopped (column "
                  "'verified from'); earlier records assumed replicated — run with --scope "
                  "full to verify them.")
    for p in result.partitions:
        if (p.get("scope") == "full" and (p.get("proof") or {}).get("reason")) \
                or p.get("before_window"):
            term.warn(f"{p['topic']}[{p['partition']}]: {scope_statement(p)}.")


def _open_marker(ctx: OpsContext) -> FailoverMarker | None:
    opened = ctx.store.open_markers(ctx.rep.source, ctx.rep.target)
    return opened[-1] if opened else None
