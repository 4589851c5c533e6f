"""Schema-id parity: do the ids that records carry mean the same schema on the registry that
encoded them (the writer's) and on the one their next consumers decode with (the reader's)?

MirrorMaker 2 copies a record's bytes as they are, schema id included, and each registry
numbers what it was given in its own order. So, per direction of a flow:
- sample the newest records per partition (`newest_ranges`, `read_sample`): every schema id
  in their keys and values (magic byte 0 + a 4-byte id; anything else is not
  registry-encoded and no finding);
- count an id only where the writer's registry files it under a subject of that topic and
  side: `<topic>-key` / `<topic>-value` (TopicNameStrategy), or a record-name subject
  (`<record>`, `<topic>-<record>`) whose schema the bytes decode with. Bytes that merely
  start like an encoding (Kafka's `LongSerializer` writes 50,000,000 as "id 2") are a note,
  never a finding (`filed_under`);
- resolve each counted id on both registries and compare the schemas in canonical form, the
  schemas they reference too (`difference`), and compare the latest version of every
  subject those ids were counted under (`resolve`);
- `compare` turns what was resolved into issues; the rules are pure, and so is the fix.

Directions: before a failover the source's records and their copies on the target are read
by the target's consumers (writer: the source); at failback the post-failover writes on the
target go back to the source (writer: the target), and the gap records the other way.

A registry that does not answer makes parity unknown, never "in parity": with the writer's
registry silent the ids missing on the reader's are still named (an outage takes the
source's registry too) where the reader's registry has a subject of that topic and side,
but a different schema under the same id cannot be seen.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from confluent_kafka import KafkaException

from drctl.errors import DecodeError, DrctlError
from drctl.kafka.clients import ClusterClients
from drctl.kafka.offsets import watermarks
from drctl.kafka.records import ReadTimeout, Record, stream_ranges
from drctl.registry import payload, wire
from drctl.registry.canonical import PROTOBUF, Schema
from drctl.registry.client import RegistryClient, SubjectVersion, apicurio_root

# Newest records read per partition and side: enough to see every schema a topic's producers
# use now (what a failover moves), few enough to read in a second per hundred partitions.
SAMPLE_PER_PARTITION = 20
Ranges = dict[tuple[str, int], tuple[int, int]]
# What to sample on one cluster: its clients, the ranges, and topic names as findings say
# them (a mirror by its source topic).
Read = tuple[ClusterClients, Ranges, Mapping[str, str]]
UseKey = tuple[str, str]  # (topic as findings name it, "key" or "value")


class IssueKind(StrEnum):
    MISSING = "missing"  # the reader's registry has no such id
    DIFFERENT = "different"  # it resolves to another schema there
    LATEST = "latest"  # a subject's latest version differs between the two
    UNKNOWN_ID = "unknown-id"  # neither registry knows it: probably not registry-encoded
    # The writer's registry has the id, but not under a subject of the topic and side that
    # carry it: bytes that only start like an encoding (a long key), no schema id.
    UNFILED = "unfiled"


NOTES = frozenset({IssueKind.UNKNOWN_ID, IssueKind.UNFILED})


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
class Use:
    """One id as one topic's keys, or its values, carry it."""

    topic: str  # as findings name it (a mirror by its source topic)
    field: str  # "key" or "value"
    names: set[str]  # the topic's names a subject may use: as findings say it, as read
    first: Sighting  # the first record seen with it
    data: bytes  # that record's key or value (a record-name subject is tried on it)
    count: int = 0

    @property
    def key(self) -> UseKey:
        return self.topic, self.field

    def describe(self) -> str:
        return f"{self.topic} ({self.field}s)"


@dataclass
class Sample:
    """The schema ids the sampled records carry, per topic and side."""

    records: int = 0
    uses: dict[int, dict[UseKey, Use]] = field(default_factory=dict)
    # Records by the (id, topic, side) they carry: what `encoded` counts once ids are judged.
    carried: Counter[tuple[tuple[int, str, str], ...]] = field(default_factory=Counter)

    def add(self, cluster: str, record: Record, topic_as: str | None = None) -> None:
        """One record; `topic_as` names its topic as findings do (a mirror by its source)."""
        self.records += 1
        topic = topic_as or record.topic
        carried = []
        for name, data in (("key", record.key), ("value", record.value)):
            schema_id = wire.schema_id(data)
            if schema_id is None:
                continue
            assert data is not None
            uses = self.uses.setdefault(schema_id, {})
            use = uses.get((topic, name))
            if use is None:
                use = uses[topic, name] = Use(topic, name, {topic}, Sighting(
                    cluster, record.topic, record.partition, record.offset, name,
                    _indexes(data)), data)
            use.names.add(record.topic)
            use.count += 1
            carried.append((schema_id, topic, name))
        if carried:
            self.carried[tuple(carried)] += 1

    @property
    def ids(self) -> list[int]:
        """Every id the records start like they carry (judged or not)."""
        return sorted(self.uses)

    def encoded(self, counts: Callable[[int, UseKey], bool] | None = None) -> int:
        """Records whose key or value carries an id (that `counts` where it is)."""
        return sum(n for carried, n in self.carried.items()
                   if counts is None or any(counts(i, (t, f)) for i, t, f in carried))


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
    # Per use of the id, the subject of that topic and side it is filed under; None: it is
    # not, so those bytes carry no schema id (`filed_under`).
    filed: Mapping[UseKey, str | None] = field(default_factory=dict)
    # How the reader's schema decodes otherwise than the writer's (`difference`); None:
    # alike, or not both there.
    difference: str | None = None

    def counts(self, key: UseKey) -> bool:
        return self.filed.get(key) is not None


@dataclass(frozen=True)
class Latest:
    """One subject's latest version on both registries, and how they differ (`difference`;
    None: alike, or not both there)."""

    writer: SubjectVersion | None
    reader: SubjectVersion | None
    difference: str | None = None


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


def filed_under(use: Use, schema: Schema | None,
                versions: Sequence[tuple[str, int]]) -> str | None:
    """The subject of `use`'s topic and side among `versions` (every subject and version a
    registry files the id under, `schema` the id's schema there): `<topic>-key` or
    `<topic>-value` (TopicNameStrategy), or the schema's record name alone or after the
    topic (RecordNameStrategy, TopicRecordNameStrategy) when the bytes decode with it (or
    drctl cannot tell); None when there is none — the bytes carry no schema id."""
    subjects = [s for s, _ in versions]
    by_topic = {f"{n}-{use.field}" for n in use.names}
    if found := next((s for s in subjects if s in by_topic), None):
        return found
    name = payload.record_name(schema, use.data) if schema is not None else None
    if name is None:
        return None
    # The topic's own record subject before the record's subject of any topic.
    by_record = [*(f"{n}-{name}" for n in sorted(use.names)), name]
    found = next((s for s in by_record if s in subjects), None)
    assert schema is not None
    return found if found and payload.decodes(schema, use.data) is not False else None


def topic_subject(use: Use, subjects: Iterable[str]) -> str | None:
    """With the writer's registry silent and the id missing on the reader's: a subject of
    `use`'s topic and side among the reader's `subjects` (`<topic>-key`/`-value`, or a
    `<topic>-<record>` of either side), which says that side of the topic is
    registry-encoded; None when there is none."""
    for subject in sorted(subjects):
        for name in sorted(use.names):
            rest = subject[len(name) + 1:] if subject.startswith(f"{name}-") else ""
            if rest == use.field or (rest and not rest.endswith(("key", "value"))):
                return subject
    return None


def difference(mine: Schema, writer: RegistryClient, theirs: Schema, reader: RegistryClient,
               seen: set[tuple[str, int, str, int]] | None = None) -> str | None:
    """How `theirs` (the reader's registry's) decodes otherwise than `mine` (the writer's),
    in words; None when they decode alike: the same type and canonical form, the same
    reference names, and each reference's schema — fetched on each side by its own subject
    and version — alike in turn. A pair of references met again (a cycle) is not followed
    twice."""
    if not mine.same_as(theirs):
        return "another schema"
    seen = set() if seen is None else seen
    others = {r.name: r for r in theirs.references}
    for ref in sorted(mine.references, key=lambda r: r.name):
        other = others[ref.name]  # same_as compared the names
        pair = (ref.subject, ref.version, other.subject, other.version)
        if pair in seen:
            continue
        seen.add(pair)
        ours, its = (writer.version(ref.subject, ref.version),
                     reader.version(other.subject, other.version))
        if ours is None and its is None:
            continue  # neither registry has it: nothing tells the two apart
        where = (f"its reference {ref.name} ({ref.subject} v{ref.version} on "
                 f"{writer.cluster}'s registry, {other.subject} v{other.version} on "
                 f"{reader.cluster}'s)")
        if its is None:
            return f"{where} is missing on {reader.cluster}'s"
        if ours is None:
            return f"{where} is missing on {writer.cluster}'s"
        inner = difference(ours, writer, its, reader, seen)
        if inner is not None:
            return f"{where} is another schema" if inner == "another schema" else \
                f"{where}: {inner}"
    return None


def compare(sample: Sample, lookups: Mapping[int, Lookup], latest: Mapping[str, Latest],
            writer: str, reader: str, *, writer_known: bool = True) -> list[Issue]:
    """The parity rules. Per sampled id where it counts (`Lookup.filed`): missing on the
    reader's registry (a risk), another schema there (a risk); where it does not count, a
    note (on neither registry, or filed under no subject of that topic and side: bytes that
    only look registry-encoded). Per subject the ids were counted under (`latest`): a
    reader's latest that is not the writer's latest schema under the same id (producers
    moving over would register or find another id). `writer_known` False: the writer's
    registry did not answer, so only what the reader lacks can be told."""
    issues: list[Issue] = []
    for schema_id in sample.ids:
        found = lookups.get(schema_id)
        if found is None:
            continue
        uses = [u for _, u in sorted(sample.uses[schema_id].items())]
        counted = [u for u in uses if found.counts(u.key)]
        passed = [u for u in uses if not found.counts(u.key)]
        if passed:
            issues.append(_not_an_id(schema_id, passed, found, writer, reader, writer_known))
        if not counted:
            continue
        topics = tuple(sorted({u.topic for u in counted}))
        where = ", ".join(topics)
        first = found.writer_versions[0] if found.writer_versions else (None, None)
        example = _example(counted[0].first, found)
        if found.reader is None:
            named = (f"{_versions(found.writer_versions)} on {writer}'s registry"
                     if writer_known else f"{writer}'s registry did not answer")
            issues.append(Issue(IssueKind.MISSING, schema_id, first[0], first[1], topics,
                                f"schema id {schema_id} ({named}) is missing on {reader}'s "
                                f"registry; records in {where} carry it", example,
                                found.writer_versions))
        elif found.writer is not None and found.difference is not None:
            how = "" if found.difference == "another schema" else f": {found.difference}"
            issues.append(Issue(
                IssueKind.DIFFERENT, schema_id, first[0], first[1], topics,
                f"schema id {schema_id} resolves to a different schema on {reader}'s registry "
                f"({_versions(found.reader_versions)}) than on {writer}'s "
                f"({_versions(found.writer_versions)}){how}; records in {where} carry it",
                example))
    for subject, pair in sorted(latest.items()):
        mine, theirs = pair.writer, pair.reader
        if mine is None:
            continue
        if theirs is None:
            seen = f"{reader}'s registry has no subject {subject}"
        elif pair.difference is not None:
            seen = (f"{reader}'s latest is another schema (v{theirs.version}, id "
                    f"{theirs.id})" + ("" if pair.difference == "another schema"
                                       else f": {pair.difference}"))
        elif theirs.id != mine.id:
            seen = f"{reader}'s registry has that schema under id {theirs.id}"
        else:
            continue
        topics = tuple(sorted({u.topic for i, f in lookups.items()
                               for u in sample.uses.get(i, {}).values()
                               if f.filed.get(u.key) == subject}))
        issues.append(Issue(IssueKind.LATEST, None, subject, mine.version, topics,
                            f"subject {subject}: latest on {writer}'s registry is v"
                            f"{mine.version} (id {mine.id}); {seen}"))
    return issues


def _not_an_id(schema_id: int, uses: Sequence[Use], found: Lookup, writer: str, reader: str,
               writer_known: bool) -> Issue:
    """The note for the topics and sides whose bytes start like an encoding with
    `schema_id` but where it counts as none."""
    where = ", ".join(u.describe() for u in uses)
    topics = tuple(sorted({u.topic for u in uses}))
    said = f"records in {where} start like a registry encoding with id {schema_id}"
    if found.writer is None and found.reader is None:
        if writer_known:
            return Issue(IssueKind.UNKNOWN_ID, schema_id, None, None, topics,
                         f"{said}, which neither registry has", uses[0].first.describe())
        return Issue(IssueKind.UNKNOWN_ID, schema_id, None, None, topics,
                     f"{said}, which {reader}'s registry does not have, nor a subject of "
                     f"that topic and side ({writer}'s did not answer): read as not "
                     "registry-encoded", uses[0].first.describe())
    filer, versions = ((writer, found.writer_versions) if writer_known
                       else (reader, found.reader_versions))
    filed = (f"{filer}'s registry files only under {_versions(versions)}" if versions
             else f"{filer}'s registry does not have")
    return Issue(IssueKind.UNFILED, schema_id, None, None, topics,
                 f"{said}, which {filed}, not under a subject of that topic and side "
                 "(<topic>-key, <topic>-value, or a record-name subject the bytes decode "
                 "with): read as not registry-encoded, e.g. a number key",
                 uses[0].first.describe())


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
        return [i for i in self.issues if i.kind not in NOTES]

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
            latest_too: bool = True, reader_subjects: Iterable[str] = ()
            ) -> tuple[dict[int, Lookup], dict[str, Latest]]:
    """Each sampled id on both registries (on the reader's alone when `writer` is None):
    where it counts (`filed_under`, on the writer's registry; with the writer's silent, on
    the reader's, or by the reader's `reader_subjects` when it lacks the id), how the two
    schemas differ where it counts; and (`latest_too`) the latest version of each subject
    the ids were counted under."""
    lookups: dict[int, Lookup] = {}
    subjects: set[str] = set()
    reader_subjects = tuple(reader_subjects)
    for schema_id, uses in sorted(sample.uses.items()):
        mine = writer.schema(schema_id) if writer is not None else None
        theirs = reader.schema(schema_id)
        mine_versions = tuple(writer.versions_of(schema_id)) if mine and writer else ()
        theirs_versions: tuple[tuple[str, int], ...] = ()
        if writer is not None:
            filed = {k: filed_under(u, mine, mine_versions) for k, u in uses.items()}
        elif theirs is not None:
            theirs_versions = tuple(reader.versions_of(schema_id))
            filed = {k: filed_under(u, theirs, theirs_versions) for k, u in uses.items()}
        else:
            filed = {k: topic_subject(u, reader_subjects) for k, u in uses.items()}
        counted = any(s is not None for s in filed.values())
        differs = (difference(mine, writer, theirs, reader)
                   if counted and writer and mine and theirs else None)
        if differs is not None:
            theirs_versions = tuple(reader.versions_of(schema_id))
        lookups[schema_id] = Lookup(mine, theirs, mine_versions, theirs_versions, filed,
                                    differs)
        subjects.update(s for s in filed.values() if s is not None)
    latest: dict[str, Latest] = {}
    for subject in sorted(subjects) if writer is not None and latest_too else ():
        assert writer is not None
        ours, its = writer.latest(subject), reader.latest(subject)
        latest[subject] = Latest(ours, its, difference(ours.schema, writer, its.schema, reader)
                                 if ours and its else None)
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
    # Until the registries say which count: every id the records start like they carry.
    out.records, out.encoded, out.ids = sample.records, sample.encoded(), sample.ids
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
        # Answers at all, and is a registry? (A silent one, or a wrong path that answers 404
        # to everything, is unknown, not empty.)
        reader_subjects = reader_registry.subjects()
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
                                  reader_registry, latest_too=producers_move,
                                  reader_subjects=reader_subjects)
    except DrctlError as exc:
        out.unknown, out.unknown_hint = exc.message, exc.hint
        return out
    out.issues = compare(sample, lookups, latest, writer, reader, writer_known=writer_known)
    out.ids = [i for i, found in lookups.items() if any(found.filed.values())]
    out.encoded = sample.encoded(lambda i, key: lookups[i].counts(key))
    return out
