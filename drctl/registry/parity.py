"""Schema-id parity: do the ids that records carry mean the same schema on the registry that
encoded them (the writer's) and on the one their next consumers decode with (the reader's)?

MirrorMaker 2 copies a record's bytes as they are, schema id included, and each registry
numbers what it was given in its own order. So, per direction of a flow:
- sample the newest records per partition (`newest_ranges`, `read_sample`): every schema id
  in their keys and values (magic byte 0 + a 4-byte id; anything else is not
  registry-encoded and no finding);
- resolve each id on both registries and compare the schemas in canonical form, and compare
  the latest version of every subject those ids belong to (`resolve`);
- `compare` turns what was resolved into issues; the rules are pure, and so is the fix.

Directions: before a failover the source's records and their copies on the target are read
by the target's consumers (writer: the source); at failback the post-failover writes on the
target go back to the source (writer: the target), and the gap records the other way.

A registry that does not answer makes parity unknown, never "in parity": with the writer's
registry silent the ids missing on the reader's are still named (an outage takes the
source's registry too), but a different schema under the same id cannot be seen.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from confluent_kafka import KafkaException

from drctl.errors import DecodeError, DrctlError
from drctl.kafka.clients import ClusterClients
from drctl.kafka.offsets import watermarks
from drctl.kafka.records import ReadTimeout, Record, stream_ranges
from drctl.registry import wire
from drctl.registry.canonical import PROTOBUF, Schema
from drctl.registry.client import RegistryClient, SubjectVersion, apicurio_root

# Newest records read per partition and side: enough to see every schema a topic's producers
# use now (what a failover moves), few enough to read in a second per hundred partitions.
SAMPLE_PER_PARTITION = 20
_SIGHTINGS_KEPT = 3  # per id, where it was seen: enough to find the records again
Ranges = dict[tuple[str, int], tuple[int, int]]
# What to sample on one cluster: its clients, the ranges, and topic names as findings say
# them (a mirror by its source topic).
Read = tuple[ClusterClients, Ranges, Mapping[str, str]]


class IssueKind(StrEnum):
    MISSING = "missing"  # the reader's registry has no such id
    DIFFERENT = "different"  # it resolves to another schema there
    LATEST = "latest"  # a subject's latest version differs between the two
    UNKNOWN_ID = "unknown-id"  # neither registry knows it: probably not registry-encoded


@dataclass(frozen=True)
class Sighting:
    cluster: str
    topic: str
    partition: int
    offset: int
    field: str  # "key" or "value"
    # Protobuf's message indexes when the bytes after the id read as such (else None).
    indexes: tuple[int, ...] | None = None

    def describe(self) -> str:
        return f"{self.topic}[{self.partition}]@{self.offset} {self.field} on {self.cluster}"


@dataclass
class Sample:
    """The schema ids the sampled records carry."""

    records: int = 0
    encoded: int = 0  # records whose key or value carries an id
    seen: dict[int, list[Sighting]] = field(default_factory=dict)
    counts: dict[int, int] = field(default_factory=dict)
    topics: dict[int, set[str]] = field(default_factory=dict)

    def add(self, cluster: str, record: Record, topic_as: str | None = None) -> None:
        """One record; `topic_as` names its topic as findings do (a mirror by its source)."""
        self.records += 1
        found = False
        for name, data in (("key", record.key), ("value", record.value)):
            schema_id = wire.schema_id(data)
            if schema_id is None:
                continue
            assert data is not None
            found = True
            self.counts[schema_id] = self.counts.get(schema_id, 0) + 1
            self.topics.setdefault(schema_id, set()).add(topic_as or record.topic)
            kept = self.seen.setdefault(schema_id, [])
            if len(kept) < _SIGHTINGS_KEPT:
                kept.append(Sighting(cluster, record.topic, record.partition, record.offset,
                                     name, _indexes(data)))
        self.encoded += found

    @property
    def ids(self) -> list[int]:
        return sorted(self.counts)


def _indexes(data: bytes) -> tuple[int, ...] | None:
    try:
        return wire.message_indexes(data)[0]
    except DecodeError:
        return None


@dataclass(frozen=True)
class Lookup:
    """One id on both registries (None: the registry has no such id, or was not asked)."""

    writer: Schema | None
    reader: Schema | None
    writer_versions: tuple[tuple[str, int], ...] = ()
    reader_versions: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class Issue:
    kind: IssueKind
    schema_id: int | None  # None for a subject's latest version
    subject: str | None  # the writer's subject (the first, when the id has several)
    version: int | None
    topics: tuple[str, ...]
    detail: str  # what was seen, in words
    example: str | None = None  # one record that carries the id, to find it again
    # Every (subject, version) the writer's registry files the id under.
    versions: tuple[tuple[str, int], ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {"kind": str(self.kind), "id": self.schema_id, "subject": self.subject,
                "version": self.version, "topics": list(self.topics), "detail": self.detail,
                "example": self.example}


def _versions(versions: Sequence[tuple[str, int]]) -> str:
    return ", ".join(f"{s} v{v}" for s, v in versions) or "no subject"


def compare(sample: Sample, lookups: Mapping[int, Lookup],
            latest: Mapping[str, tuple[SubjectVersion | None, SubjectVersion | None]],
            writer: str, reader: str, *, writer_known: bool = True) -> list[Issue]:
    """The parity rules. Per sampled id: missing on the reader's registry (a risk), another
    schema there (a risk), on neither (a note: bytes that only look registry-encoded). Per
    subject of those ids (`latest`: (writer's, reader's) latest version): a reader's latest
    that is not the writer's latest schema under the same id (producers moving over would
    register or find another id). `writer_known` False: the writer's registry did not
    answer, so only what the reader lacks can be told."""
    issues: list[Issue] = []
    for schema_id in sample.ids:
        found = lookups.get(schema_id)
        if found is None:
            continue
        topics = tuple(sorted(sample.topics.get(schema_id, ())))
        where = ", ".join(topics)
        first = found.writer_versions[0] if found.writer_versions else (None, None)
        example = _example(sample.seen[schema_id][0], found)
        if found.reader is None and (found.writer is not None or not writer_known):
            named = (f"{_versions(found.writer_versions)} on {writer}'s registry"
                     if writer_known else f"{writer}'s registry did not answer")
            issues.append(Issue(IssueKind.MISSING, schema_id, first[0], first[1], topics,
                                f"schema id {schema_id} ({named}) is missing on {reader}'s "
                                f"registry; records in {where} carry it", example,
                                found.writer_versions))
        elif found.reader is None and found.writer is None:
            issues.append(Issue(IssueKind.UNKNOWN_ID, schema_id, None, None, topics,
                                f"records in {where} start like a registry encoding with id "
                                f"{schema_id}, which neither registry has", example))
        elif (found.writer is not None and found.reader is not None
              and not found.writer.same_as(found.reader)):
            issues.append(Issue(
                IssueKind.DIFFERENT, schema_id, first[0], first[1], topics,
                f"schema id {schema_id} resolves to a different schema on {reader}'s registry "
                f"({_versions(found.reader_versions)}) than on {writer}'s "
                f"({_versions(found.writer_versions)}); records in {where} carry it", example))
    for subject, (mine, theirs) in sorted(latest.items()):
        if mine is None:
            continue
        if theirs is None:
            seen = f"{reader}'s registry has no subject {subject}"
        elif not mine.schema.same_as(theirs.schema):
            seen = (f"{reader}'s latest is another schema (v{theirs.version}, id "
                    f"{theirs.id})")
        elif theirs.id != mine.id:
            seen = f"{reader}'s registry has that schema under id {theirs.id}"
        else:
            continue
        topics = tuple(sorted({t for i, f in lookups.items()
                               if any(s == subject for s, _ in f.writer_versions)
                               for t in sample.topics.get(i, ())}))
        issues.append(Issue(IssueKind.LATEST, None, subject, mine.version, topics,
                            f"subject {subject}: latest on {writer}'s registry is v"
                            f"{mine.version} (id {mine.id}); {seen}"))
    return issues


def _example(seen: Sighting, found: Lookup) -> str:
    """Where a record carrying the id is; with Protobuf, which message it names."""
    schema = found.writer or found.reader
    proto = schema is not None and schema.type == PROTOBUF
    return seen.describe() + (f", message index {list(seen.indexes)}"
                              if proto and seen.indexes is not None else "")


@dataclass
class Parity:
    """One direction's parity: what was sampled, what was found, and whether it is known."""

    what: str  # the records read, e.g. "mirrored records", "post-failover writes"
    writer: str  # the cluster whose registry encoded them
    reader: str  # the cluster whose consumers decode them next
    writer_url: str | None = None
    reader_url: str | None = None
    records: int = 0
    encoded: int = 0
    ids: list[int] = field(default_factory=list)
    issues: list[Issue] = field(default_factory=list)
    unknown: str | None = None  # why parity is unknown (or only partly known)
    unknown_hint: str | None = None

    @property
    def risks(self) -> list[Issue]:
        return [i for i in self.issues if i.kind != IssueKind.UNKNOWN_ID]

    def count(self, kind: IssueKind) -> int:
        return sum(1 for i in self.issues if i.kind == kind)

    @property
    def state(self) -> str:
        """`in parity`, `not in parity` (a risk) or `unknown` (a registry did not answer)."""
        if self.risks:
            return "not in parity"
        return "unknown" if self.unknown else "in parity"

    def summary(self) -> str:
        """One line, e.g. "schemas in parity (3 ids sampled)"."""
        sampled = f"{len(self.ids)} id{'' if len(self.ids) == 1 else 's'} sampled"
        if self.risks:
            parts = []
            if n := self.count(IssueKind.MISSING):
                parts.append(f"{n} id(s) missing on {self.reader}'s registry")
            if n := self.count(IssueKind.DIFFERENT):
                parts.append(f"{n} id(s) resolving to a different schema")
            if n := self.count(IssueKind.LATEST):
                parts.append(f"{n} subject(s) whose latest version differs")
            return f"schemas NOT in parity: {', '.join(parts)} ({sampled})"
        if self.unknown:
            return f"schemas unknown: {self.unknown}"
        if not self.ids:
            return f"schemas: no registry-encoded records among {self.records} sampled"
        return f"schemas in parity ({sampled})"

    def describe(self) -> str:
        """The summary with what was read: "mirrored records (primary -> secondary): ..."."""
        return f"{self.what} ({self.writer} -> {self.reader}): {self.summary()}"

    def fix(self) -> str:
        """What makes the ids mean the same on both: copy the registry keeping ids, or (ids
        only missing) register the subjects in id order."""
        copy = copy_keeping_ids(self.writer, self.reader, self.writer_url, self.reader_url)
        missing = sorted((i.schema_id, i.versions) for i in self.issues
                         if i.kind == IssueKind.MISSING and i.schema_id is not None)
        if self.count(IssueKind.DIFFERENT) or not missing or not all(v for _, v in missing):
            return copy  # a taken id, or ids whose subjects are unknown: only a copy
        # Registering the same schema under each of its subjects gives it one id.
        order = ", ".join(f"{_versions(v)} (id {i})" for i, v in missing)
        return (f"register on {self.reader}'s registry, in this order, while its next id is "
                f"{missing[0][0]}: {order} — or {copy}")

    def as_dict(self) -> dict[str, Any]:
        return {"what": self.what, "writer": self.writer, "reader": self.reader,
                "state": self.state, "summary": self.summary(),
                "description": self.describe(), "records": self.records,
                "encoded": self.encoded, "ids": self.ids,
                "missing": self.count(IssueKind.MISSING),
                "different": self.count(IssueKind.DIFFERENT),
                "latest_differs": self.count(IssueKind.LATEST),
                "issues": [i.as_dict() for i in self.issues],
                "unknown": self.unknown, "fix": self.fix() if self.risks else None}


def copy_keeping_ids(writer: str, reader: str, writer_url: str | None,
                     reader_url: str | None) -> str:
    """How to give `reader`'s registry `writer`'s ids: a copy into an empty registry."""
    src, dst = apicurio_root(writer_url or ""), apicurio_root(reader_url or "")
    if src and dst:
        how = (f"curl -o registry.zip {src}/apis/registry/v2/admin/export; curl -X POST "
               "-H 'Content-Type: application/zip' --data-binary @registry.zip "
               f"{dst}/apis/registry/v2/admin/import")
    else:
        how = ("Confluent: Schema Linking, or the reader's registry in IMPORT mode with each "
               "schema registered under its id")
    return (f"copy {writer}'s registry into an empty registry for {reader}, keeping ids "
            f"({how}), then run drctl check again")


# -- reading and resolving ----------------------------------------------------------------


def newest_ranges(clients: ClusterClients, partitions: Iterable[tuple[str, int]],
                  per_partition: int = SAMPLE_PER_PARTITION,
                  floors: Mapping[tuple[str, int], int] | None = None) -> Ranges:
    """The newest `per_partition` offsets of each partition, none below its `floors`
    (e.g. the failover point: only post-failover writes)."""
    marks = watermarks(clients.admin(), list(partitions))
    floors = floors or {}
    return {tp: (max(low, high - per_partition, floors.get(tp, low)), high)
            for tp, (low, high) in marks.items()}


def read_sample(sample: Sample, clients: ClusterClients, ranges: Ranges,
                topic_as: Mapping[str, str] | None = None, timeout_s: float = 60.0) -> None:
    """Add what `ranges` hold on `clients`' cluster to `sample`. A read that fails raises
    (ReadTimeout, KafkaException): the caller says parity is unknown."""
    for record in stream_ranges(clients, ranges, timeout_s=timeout_s):
        sample.add(clients.name, record, (topic_as or {}).get(record.topic))


def resolve(sample: Sample, writer: RegistryClient | None, reader: RegistryClient, *,
            latest_too: bool = True
            ) -> tuple[dict[int, Lookup],
                       dict[str, tuple[SubjectVersion | None, SubjectVersion | None]]]:
    """Each sampled id on both registries (on the reader's alone when `writer` is None),
    and (`latest_too`) the latest version of each subject the writer's registry files those
    ids under."""
    lookups: dict[int, Lookup] = {}
    subjects: set[str] = set()
    for schema_id in sample.ids:
        mine = writer.schema(schema_id) if writer is not None else None
        theirs = reader.schema(schema_id)
        mine_versions = tuple(writer.versions_of(schema_id)) if mine and writer else ()
        differs = mine is not None and theirs is not None and not mine.same_as(theirs)
        lookups[schema_id] = Lookup(mine, theirs, mine_versions,
                                    tuple(reader.versions_of(schema_id)) if differs else ())
        subjects.update(s for s, _ in mine_versions)
    latest = {s: (writer.latest(s), reader.latest(s)) for s in sorted(subjects)
              if writer is not None and latest_too}
    return lookups, latest


def check_parity(what: str, writer: str, reader: str, writer_registry: RegistryClient | None,
                 reader_registry: RegistryClient | None, reads: Sequence[Read], *,
                 producers_move: bool = True) -> Parity:
    """Sample `reads` (clients, ranges, topic names as findings say them), then compare
    what the ids mean on the two registries; `producers_move` (the writer's producers go
    to the reader next: failover, or failback for the post-failover writes) compares the
    subjects' latest versions too."""
    out = Parity(what, writer, reader,
                 writer_registry.url if writer_registry else None,
                 reader_registry.url if reader_registry else None)
    sample = Sample()
    try:
        for clients, ranges, names in reads:
            read_sample(sample, clients, ranges, names)
    except (ReadTimeout, KafkaException, DrctlError) as exc:
        out.unknown = ("the records could not be read: "
                       + (exc.message if isinstance(exc, DrctlError) else str(exc)))
        return out
    out.records, out.encoded, out.ids = sample.records, sample.encoded, sample.ids
    if not sample.ids:
        return out  # nothing registry-encoded: nothing to look up
    if out.writer_url is not None and out.writer_url == out.reader_url:
        return out  # one registry serves both: the ids mean the same
    if reader_registry is None:
        out.unknown = (f"{len(sample.ids)} schema id(s) sampled, but {reader} has no "
                       "schema_registry in the config")
        out.unknown_hint = f"Set clusters.{reader}.schema_registry.url."
        return out
    try:
        reader_registry.subjects()  # answers at all? (a silent one is unknown, not empty)
    except DrctlError as exc:
        out.unknown, out.unknown_hint = exc.message, exc.hint
        return out
    writer_known = writer_registry is not None
    if writer_registry is None:
        out.unknown = (f"{writer} has no schema_registry in the config: only ids missing on "
                       f"{reader}'s are found")
        out.unknown_hint = f"Set clusters.{writer}.schema_registry.url."
    else:
        try:
            writer_registry.subjects()
        except DrctlError as exc:
            writer_known = False
            out.unknown = (f"{exc.message} Only ids missing on {reader}'s registry are "
                           "found; a different schema under the same id is not.")
            out.unknown_hint = exc.hint
    try:
        lookups, latest = resolve(sample, writer_registry if writer_known else None,
                                  reader_registry, latest_too=producers_move)
    except DrctlError as exc:
        out.unknown, out.unknown_hint = exc.message, exc.hint
        return out
    out.issues = compare(sample, lookups, latest, writer, reader, writer_known=writer_known)
    return out
