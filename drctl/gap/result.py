"""What a gap analysis found: the per-partition summary, and the unreplicated records (read
back from the job's Parquet output, batch by batch, so a large gap never sits in memory)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from drctl.errors import DrctlError
from drctl.gap.plan import IDENTITY

SUMMARY_FILE = "summary.json"
RECORDS_DIR = "records"
CLASSES = ("safe", "conflict", "unkeyed")
_COUNTED = ("source_records", "target_records", "unreplicated", "superseded", "divergent",
            "safe", "conflict", "unkeyed", "unkeyed_flagged", "post_failover_writes",
            "before_window", "late_copies")


def lost_to_retention(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The partitions where retention deleted records before they were replicated (a count
    of None: not countable), as failback and gap-analysis name them."""
    return [{"topic": r.get("topic"), "partition": r.get("partition"), **r["lost"]}
            for r in rows if r.get("lost") and (r["lost"].get("count") is None
                                                or r["lost"]["count"] > 0)]


@dataclass(frozen=True)
class PostFailoverWrite:
    partition: int
    offset: int
    timestamp_ms: int


@dataclass(frozen=True)
class GapRecord:
    """One unreplicated source record, with its --check-order class when one was asked for."""

    topic: str
    partition: int
    offset: int
    timestamp_ms: int
    timestamp_type: int  # Kafka's coding, as `kafka.records.Record`: 1 CreateTime, 2 LogAppend
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    classification: str | None = None
    # The key's post-failover writes on the target (a conflict), oldest first.
    conflicts: tuple[PostFailoverWrite, ...] = ()
    # Post-failover writes to this record's partition (copying an unkeyed record lands after).
    partition_writes: int = 0

    @property
    def flagged(self) -> bool:
        return self.classification == "unkeyed" and self.partition_writes > 0


def totals(rows: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    out = dict.fromkeys(_COUNTED, 0)
    for row in rows:
        for name in _COUNTED:
            out[name] += int(row.get(name) or 0)
    return out


def scope_fields(alignment: Mapping[str, Any] | None, source_start: int) -> dict[str, Any]:
    """What was verified in one partition: `scope`, `verified_from` (the first source offset
    compared), the proof or why there is none, and what a window left out."""
    a = dict(alignment or {})
    return {"scope": a.get("scope", "full"), "verified_from": source_start,
            "proof": {"source_offset": a.get("source_aligned"),
                      "target_offset": a.get("target_aligned"), "reason": a.get("reason", "")},
            "before_window": int(a.get("before_window", 0)),
            "settled_by": a.get("settled_by"),
            # Records retention deleted from the source before they were replicated
            # (planner `_lost_to_retention`): {"from", "to", "count" (None: unknown), "proof"}.
            "lost": a.get("lost")}


def scope_statement(row: Mapping[str, Any]) -> str:
    """One partition's summary row, said plainly: what was verified and what assumed."""
    start = row.get("verified_from", row.get("source_start"))
    proof = row.get("proof") or {}
    if row.get("scope") == "tail" and proof.get("source_offset") is not None:
        text = (f"verified from source offset {start} (proved: source "
                f"{proof['source_offset']} is target {proof['target_offset']}); earlier "
                "records assumed replicated — run with --scope full to verify them")
    elif row.get("scope") == "tail":
        text = (f"verified from offset {start} (offsets preserved: the overlap before the "
                "failover point is compared offset by offset); earlier records assumed "
                "replicated — run with --scope full to verify them")
    else:
        why = f" ({proof['reason']})" if proof.get("reason") else ""
        text = f"verified in full from source offset {start}{why}"
    lost = row.get("lost")
    if lost:
        if lost.get("count") is None:
            text += (f"; LOST, count unknown: source offsets before {lost['to']} are gone "
                     f"({lost['proof']})")
        elif lost["count"]:
            text += (f"; LOST: source offsets {lost['from']}–{lost['to'] - 1} "
                     f"({lost['count']:,}) were deleted by retention before they could be "
                     f"compared or copied ({lost['proof']})")
        else:
            text += f"; retention deleted only replicated records ({lost['proof']})"
    if row.get("settled_by"):
        text += (f"; records before it were settled when incident {row['settled_by']} "
                 "returned to protection (replicated, reconciled or quarantined then)")
    if row.get("before_window"):
        text += (f"; {row['before_window']:,} source offset(s) before the --since/--lookback "
                 "window were not compared")
    return text


@dataclass
class GapResult:
    out_dir: Path
    kind: str
    replication_kind: str
    check_order: bool
    partitions: list[dict[str, Any]]
    divergence_sample: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    elapsed_s: float = 0.0
    scope: str = "full"
    plan: dict[str, Any] = field(default_factory=dict)
    connector: str = ""
    temporary: bool = False  # out_dir is drctl's own and goes away with cleanup()
    # How many records the job's engine said it wrote (None: a summary from before it said).
    records_written: int | None = None

    @classmethod
    def load(cls, out_dir: Path, *, plan: Mapping[str, Any] | None = None,
             connector: str = "", temporary: bool = False) -> GapResult:
        raw = json.loads((out_dir / SUMMARY_FILE).read_text())
        return cls(out_dir=out_dir, kind=raw["kind"], replication_kind=raw["replication_kind"],
                   check_order=raw["check_order"], partitions=raw["partitions"],
                   divergence_sample=raw.get("divergence_sample", []),
                   notes=raw.get("notes", []), elapsed_s=raw.get("elapsed_s", 0.0),
                   scope=raw.get("scope", "full"), records_written=raw.get("records_written"),
                   plan=dict(plan or {}), connector=connector, temporary=temporary)

    @property
    def totals(self) -> dict[str, int]:
        return totals(self.partitions)

    @property
    def has_gap(self) -> bool:
        return self.totals["unreplicated"] > 0

    @property
    def has_conflict(self) -> bool:
        return self.totals["conflict"] > 0

    @property
    def diverged(self) -> bool:
        return self.totals["divergent"] > 0

    @property
    def records_path(self) -> Path:
        return self.out_dir / RECORDS_DIR

    def iter_records(self, classification: str | None = None,
                     batch_size: int = 10_000) -> Iterator[GapRecord]:
        """The unreplicated records in (topic-order, partition, offset) order; only those of
        one class when `classification` is given (needs --check-order)."""
        pq = _parquet()
        for path in sorted(self.records_path.glob("part-*.parquet")):
            for batch in pq.ParquetFile(path).iter_batches(batch_size=batch_size):
                for row in batch.to_pylist():
                    rec = _record(row)
                    if classification is None or rec.classification == classification:
                        yield rec

    def records_on_disk(self) -> int:
        """How many records the Parquet files under out_dir hold, as this machine sees them
        (from the files' footers, nothing decoded)."""
        return sum(_parquet().read_metadata(path).num_rows
                   for path in self.records_path.glob("part-*.parquet"))

    def records(self, classification: str | None = None) -> list[GapRecord]:
        return list(self.iter_records(classification))

    def as_dict(self, *, conflicts_limit: int = 1000) -> dict[str, Any]:
        data: dict[str, Any] = {
            "kind": self.kind, "replication_kind": self.replication_kind,
            "scope": self.scope, "check_order": self.check_order, "totals": self.totals,
            "partitions": self.partitions, "notes": self.notes, "elapsed_s": self.elapsed_s,
            "connector": self.connector,
        }
        if self.kind == IDENTITY:
            data["divergence_sample"] = self.divergence_sample
        if not self.temporary:
            data["report_dir"] = str(self.out_dir)
        if self.check_order:
            conflicts: list[dict[str, Any]] = []
            for rec in self.iter_records("conflict"):
                if len(conflicts) >= conflicts_limit:
                    data["conflicts_truncated"] = True
                    break
                conflicts.append({"topic": rec.topic, "partition": rec.partition,
                                  "offset": rec.offset, "timestamp_ms": rec.timestamp_ms,
                                  "key": rec.key,
                                  "post_failover_writes": [asdict(w) for w in rec.conflicts]})
            data["conflicts"] = conflicts
        data["plan"] = self.plan
        return data

    def cleanup(self) -> None:
        if self.temporary:
            shutil.rmtree(self.out_dir, ignore_errors=True)

    def __enter__(self) -> GapResult:
        return self

    def __exit__(self, *_: object) -> None:
        self.cleanup()


def tally(records_path: Path, check_order: bool) -> dict[tuple[str, int], dict[str, Any]]:
    """Per (topic, partition) of the unreplicated records written under `records_path`: how
    many, the first and last offset and their timestamps, and with the order check the count
    per class and the unkeyed records flagged (post-failover writes in their partition). Read
    back from the Parquet files, their few narrow columns only: the job's summary, whichever
    engine wrote them — a query per figure on the Spark engine cost a small job more than
    its diff (docs/performance.md)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    columns = ["topic", "partition", "offset", "timestamp_ms"]
    if check_order:
        columns += ["classification", "partition_writes"]
    parts = [_parquet().read_table(path, columns=columns)
             for path in sorted(records_path.glob("part-*.parquet"))]
    table = pa.concat_tables(parts) if parts else None
    if table is None or table.num_rows == 0:
        return {}
    keys = ["topic", "partition"]
    # Sorted, one thread: "first" and "last" are then the first and last offsets' timestamps.
    table = table.sort_by([("topic", "ascending"), ("partition", "ascending"),
                           ("offset", "ascending")])
    out: dict[tuple[str, int], dict[str, Any]] = {}
    for row in table.group_by(keys, use_threads=False).aggregate(
            [("offset", "count"), ("offset", "min"), ("offset", "max"),
             ("timestamp_ms", "first"), ("timestamp_ms", "last")]).to_pylist():
        out[(row["topic"], row["partition"])] = {
            "unreplicated": row["offset_count"], "first_offset": row["offset_min"],
            "last_offset": row["offset_max"], "first_timestamp_ms": row["timestamp_ms_first"],
            "last_timestamp_ms": row["timestamp_ms_last"]}
    if not check_order:
        return out
    for row in table.group_by([*keys, "classification"]).aggregate(
            [("offset", "count")]).to_pylist():
        out[(row["topic"], row["partition"])].setdefault("classes", {})[
            row["classification"]] = row["offset_count"]
    flagged = table.filter(pc.and_(pc.equal(table["classification"], "unkeyed"),
                                   pc.greater(table["partition_writes"], 0)))
    for row in flagged.group_by(keys).aggregate([("offset", "count")]).to_pylist():
        out[(row["topic"], row["partition"])]["flagged"] = row["offset_count"]
    return out


_KAFKA_TIMESTAMP_TYPE = {0: 1, 1: 2}


def _record(row: Mapping[str, Any]) -> GapRecord:
    headers = tuple((h["key"], h["value"]) for h in (row.get("headers") or ()))
    conflicts = tuple(PostFailoverWrite(c["partition"], c["offset"], c["timestamp_ms"])
                      for c in (row.get("conflicts") or ()))
    return GapRecord(topic=row["topic"], partition=row["partition"], offset=row["offset"],
                     timestamp_ms=row["timestamp_ms"],
                     # Spark's Kafka source says 0 for CreateTime and 1 for LogAppendTime.
                     timestamp_type=_KAFKA_TIMESTAMP_TYPE.get(row["timestamp_type"], 0),
                     key=row["key"], value=row["value"], headers=headers,
                     classification=row.get("classification"), conflicts=conflicts,
                     partition_writes=int(row.get("partition_writes") or 0))


def _parquet() -> Any:
    """pyarrow.parquet, imported when the records are read (the job's result needs it, a
    plan does not)."""
    try:
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise DrctlError("Reading the gap's Parquet output needs pyarrow.",
                         "pip install pyarrow") from exc
    return pq
