"""`drctl dump-consumer-timestamps`: decode `__consumer_timestamps` and MM2's internal topics."""

from __future__ import annotations

import csv
import json
import os
import sys
from enum import StrEnum
from typing import Annotated, Any

import typer

from drctl.cli.options import (
    DEFAULT_DEADLINE_S,
    Deadline,
    OutputOption,
    old_spelling,
    renamed,
)
from drctl.cli.state import CURRENT
from drctl.codecs.confluent import LAYOUT_NOTE, ConsumerTimestamp
from drctl.codecs.mm2 import Checkpoint, OffsetSync
from drctl.dump.filters import DumpFilter
from drctl.dump.reader import TopicDump, resolve_location
from drctl.dump.rows import COLUMNS, RECORD_COLUMNS, DumpKind, DumpRow, DumpStats, iso_ms
from drctl.kafka.clients import ClusterClients
from drctl.terminal import OutputFormat, Terminal
from drctl.timeparse import parse_time_ms

TABLE_ROWS = 1000  # a table is for reading; jsonl/csv stream everything


class Format(StrEnum):
    table = "table"
    jsonl = "jsonl"
    csv = "csv"


def dump_consumer_timestamps(
    kind: Annotated[DumpKind, typer.Option(
        case_sensitive=False, help="Which topic to decode.")] = DumpKind.consumer_timestamps,
    cluster: Annotated[str | None, typer.Option(
        metavar="CLUSTER",
        help="Cluster to read (default: the replication source for consumer-timestamps and "
             "offset-syncs, the target for checkpoints and heartbeats).")] = None,
    internal_topic: Annotated[str | None, typer.Option(
        "--internal-topic", metavar="TOPIC",
        help="The internal topic to read (default: __consumer_timestamps, "
             "<source_alias>.checkpoints.internal, mm2-offset-syncs.<target_alias>.internal, "
             "heartbeats).")] = None,
    groups: Annotated[str | None, typer.Option(
        "--groups", metavar="REGEX", help="Regex on the group id (whole name).")] = None,
    topics: Annotated[str | None, typer.Option(
        "--topics", metavar="REGEX",
        help="Regex on the topic the record is about (whole name).")] = None,
    old_group: Annotated[str | None, old_spelling("--group")] = None,
    old_topic: Annotated[str | None, old_spelling("--topic")] = None,
    old_topic_name: Annotated[str | None, old_spelling("--topic-name")] = None,
    since: Annotated[str | None, typer.Option(
        metavar="TIME",
        help="Only records written at or after this time (ISO 8601 or epoch ms).")] = None,
    until: Annotated[str | None, typer.Option(
        metavar="TIME",
        help="Only records written before this time (ISO 8601 or epoch ms).")] = None,
    latest: Annotated[bool, typer.Option(
        "--latest", help="Only the latest record per group/topic/partition (what Replicator "
                         "and MM2 use); default: the full history.")] = False,
    limit: Annotated[int | None, typer.Option(
        metavar="N", help="Stop after this many rows.", min=0)] = None,
    fmt: Annotated[Format | None, typer.Option(
        "--format", case_sensitive=False,
        help="table, jsonl (JSON Lines) or csv on stdout, the last two streamed. Default: "
             "table, or one JSON document with --output json.")] = None,
    show_undecodable: Annotated[int, typer.Option(
        metavar="N", help="How many undecodable records to list (all are counted).",
        min=0)] = 20,
    deadline: Deadline = DEFAULT_DEADLINE_S,
    output: Annotated[OutputFormat | None, OutputOption] = None,
) -> None:
    """Decode Confluent's __consumer_timestamps (inferred layout) or MirrorMaker 2's
    checkpoints, offset syncs and heartbeats. Undecodable records are shown as hex, never
    fatal. --since/--until select by when each record was written; with --latest, the latest
    record within that window.

    \b
    Examples:
      drctl dump-consumer-timestamps --groups 'billing-.*' --latest
      drctl dump-consumer-timestamps --kind checkpoints --format csv > cp.csv
      drctl dump-consumer-timestamps --since 2026-11-25T02:00Z --format jsonl
      drctl dump-consumer-timestamps --latest -o json | jq '.rows[]'

    \b
    Exit status: 0 read; 2 usage or config; 4 the cluster unreachable."""
    config = CURRENT.config()
    term = CURRENT.terminal(output)
    # None: the one JSON document of --output json (its rows streamed, never held).
    chosen = fmt or (None if term.json_mode else Format.table)
    internal_topic = renamed(internal_topic, old_topic_name, old="--topic-name",
                             new="--internal-topic", warn=term.warn)
    where = resolve_location(kind, config.replication, cluster, internal_topic)
    filt = DumpFilter(renamed(groups, old_group, old="--group", new="--groups", warn=term.warn),
                      renamed(topics, old_topic, old="--topic", new="--topics", warn=term.warn),
                      None if since is None else parse_time_ms(since, "--since"),
                      None if until is None else parse_time_ms(until, "--until"))
    clients = ClusterClients.for_cluster(config, where.cluster)
    dump = TopicDump(clients, kind, where.topic, filt, latest=latest, limit=limit,
                     samples=show_undecodable,
                     policy=config.retry.with_deadline(deadline))
    if kind == DumpKind.consumer_timestamps:
        term.warn(LAYOUT_NOTE)
    term.step(f"Reading {where.topic} on '{where.cluster}'"
              + (" (latest per key)" if latest else ""))
    shown: list[DumpRow] = []
    with term.progress(f"Decoding {where.topic}") as progress:
        dump.on_start = lambda total: progress.update(total=total)
        dump.on_progress = progress.advance
        try:
            if chosen is None:
                _document(term, dump)
            elif chosen == Format.jsonl:
                _jsonl(term, dump)
            elif chosen == Format.csv:
                _csv(term, dump, kind)
            else:
                shown = _collect(dump, limit)
        except BrokenPipeError:
            # The reader left (`| head`): stop quietly as Unix tools do; later writes to
            # stdout (Python's own flush at exit) go nowhere.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    if chosen == Format.table:
        _table(term, kind, shown, dump.stats)
        if term.json_mode:  # the table went to stderr: the document has the summary
            term.emit_json({"summary": dump.stats.as_dict()})
    _summary(term, dump.stats)


def _document(term: Terminal, dump: TopicDump) -> None:
    """--output json: {rows, undecodable, summary}, the shapes of the JSON Lines
    (drctl/dump/__init__.py)."""
    term.stream_json("rows", (row.as_dict() for row in dump))
    term.emit_json({"undecodable": [s.as_dict() for s in dump.stats.samples],
                    "summary": dump.stats.as_dict()})


def _jsonl(term: Terminal, dump: TopicDump) -> None:
    # Rows are plain JSON data with fixed, non-secret field names, so each line is redacted
    # as text: redacting each value of each row would cost ten times the decoding.
    encode = json.JSONEncoder(separators=(",", ":")).encode
    redact = term.redactor.redact
    write = sys.stdout.write
    term.emitted = True  # stdout is JSON Lines, not the JSON document, however this ends
    for row in dump:
        write(redact(encode(row.as_dict())) + "\n")
    for sample in dump.stats.samples:
        write(redact(encode(sample.as_dict())) + "\n")
    write(redact(encode(dump.stats.as_dict())) + "\n")
    sys.stdout.flush()


def _csv(term: Terminal, dump: TopicDump, kind: DumpKind) -> None:
    columns = [*COLUMNS[kind], *RECORD_COLUMNS, "provenance_hex"]
    writer = csv.writer(sys.stdout, lineterminator="\n")
    term.emitted = True  # stdout is CSV, not the JSON document, however this ends
    writer.writerow(columns)
    redact = term.redactor.redact
    for row in dump:
        data = row.as_dict()
        data["provenance_hex"] = data.get("provenance", {}).get("hex")
        writer.writerow([_cell(data[c], redact) for c in columns])
    sys.stdout.flush()


def _cell(value: Any, redact: Any) -> Any:
    if value is None:
        return ""
    return redact(value) if isinstance(value, str) else value


def _collect(dump: TopicDump, limit: int | None) -> list[DumpRow]:
    cap = TABLE_ROWS if limit is None else min(limit, TABLE_ROWS)
    shown: list[DumpRow] = []
    for row in dump:
        if len(shown) < cap:
            shown.append(row)
    return shown


_TABLE_COLUMNS = {
    DumpKind.consumer_timestamps: ["group", "topic", "part", "timestamp", "delta", "layout"],
    DumpKind.checkpoints: ["group", "topic", "part", "upstream", "downstream", "metadata"],
    DumpKind.offset_syncs: ["topic", "part", "upstream", "downstream"],
    DumpKind.heartbeats: ["source", "target", "timestamp"],
}


def _table_cells(row: DumpRow) -> list[Any]:
    v = row.value
    if isinstance(v, ConsumerTimestamp):
        layout = f"{v.key_layout}/{v.value_layout}"
        cells: list[Any] = [v.group, v.topic, v.partition, _time(v.timestamp_ms), v.delta,
                            layout]
    elif isinstance(v, Checkpoint):
        cells = [v.group, v.topic, v.partition, v.upstream_offset, v.downstream_offset,
                 v.metadata]
    elif isinstance(v, OffsetSync):
        cells = [v.topic, v.partition, v.upstream_offset, v.downstream_offset]
    else:
        cells = [v.source_alias, v.target_alias, _time(v.timestamp_ms)]
    return [*cells, f"{row.record_partition}:{row.record_offset}",
            _time(row.record_timestamp_ms)]


def _time(ms: int) -> str:
    text = iso_ms(ms)
    return str(ms) if text is None else text[:23].replace("T", " ")


def _table(term: Terminal, kind: DumpKind, rows: list[DumpRow], stats: DumpStats) -> None:
    view = "latest per key" if stats.latest else "history"
    term.table(f"{stats.topic} on '{stats.cluster}' ({view}; times in UTC)",
               [*_TABLE_COLUMNS[kind], "record", "written"],
               [_table_cells(row) for row in rows])
    if stats.emitted > len(rows):
        term.info(f"Showing {len(rows)} of {stats.emitted} rows; use --format jsonl or csv "
                  "for all of them.")
    if stats.samples:
        term.table(f"Undecodable records (first {len(stats.samples)} of {stats.undecodable})",
                   ["record", "reason", "key (hex)", "value (hex)"],
                   [[f"{s.record_partition}:{s.record_offset}", s.reason,
                     _short_hex(s.key), _short_hex(s.value)] for s in stats.samples])


def _short_hex(data: bytes | None, limit: int = 48) -> str:
    if data is None:
        return "null"
    text = data.hex()
    return text if len(text) <= limit else f"{text[:limit]}… ({len(data)} bytes)"


def _summary(term: Terminal, stats: DumpStats) -> None:
    parts = [f"{stats.records:,} records read from {stats.partitions} partition(s) in "
             f"{stats.elapsed_s:.1f} s"]
    if stats.outside_window:
        parts.append(f"{stats.outside_window:,} outside --since/--until")
    parts += [f"{stats.decoded:,} decoded", f"{stats.matched:,} matched the filters",
              f"{stats.emitted:,} shown"]
    if stats.stopped_at_limit:
        parts.append("stopped at --limit")
    term.success("; ".join(parts) + ".")
    if stats.undecodable:
        term.warn(f"{stats.undecodable:,} record(s) did not decode with any known layout "
                  f"(first {len(stats.samples)} listed).")
