"""The schema-parity rules: what a sample of ids, resolved on two registries, amounts to."""

from __future__ import annotations

import struct
from http.server import BaseHTTPRequestHandler
from typing import cast

import pytest

from drctl.config import HttpSettings
from drctl.findings import Severity
from drctl.kafka.clients import ClusterClients
from drctl.kafka.records import Record
from drctl.readiness.schemas import parity_findings
from drctl.registry import parity as parity_module
from drctl.registry import wire
from drctl.registry.canonical import AVRO, JSON, PROTOBUF, Reference, Schema
from drctl.registry.client import RegistryClient, SubjectVersion
from drctl.registry.parity import (
    Issue,
    IssueKind,
    Latest,
    Lookup,
    Parity,
    Sample,
    check_parity,
    compare,
    difference,
    resolve,
)
from tests.unit.registry.fake import FakeRegistry, serving
from tests.unit.support import http_server

A = Schema(AVRO, '{"type": "record", "name": "A", "fields": [{"name": "a", "type": "string"}]}')
B = Schema(AVRO, '{"type": "record", "name": "B", "fields": [{"name": "b", "type": "long"}]}')


def record(topic: str, value: bytes | None, key: bytes | None = None, offset: int = 0) -> Record:
    return Record(topic, 0, offset, key, value, 0, 1, ())


def sample_of(*records: Record) -> Sample:
    sample = Sample()
    for r in records:
        sample.add("primary", r)
    return sample


def counted(sample: Sample, schema_id: int, writer: Schema | None, reader: Schema | None,
            writer_versions: tuple[tuple[str, int], ...] = (),
            reader_versions: tuple[tuple[str, int], ...] = (),
            difference: str | None = None) -> Lookup:
    """A lookup of `schema_id` that counts wherever the sample saw it (filed under the
    writer's first subject)."""
    subject = writer_versions[0][0] if writer_versions else "s-value"
    return Lookup(writer, reader, writer_versions, reader_versions,
                  dict.fromkeys(sample.uses[schema_id], subject), difference)


def test_a_sample_counts_ids_in_keys_and_values_and_ignores_plain_records() -> None:
    sample = sample_of(record("orders", wire.encode(1, b"x"), wire.encode(2, b"k")),
                       record("orders", b'{"plain": "json"}', b"key"),
                       record("orders", None),  # a tombstone
                       record("pay", wire.encode(1, b"y"), offset=7))
    assert (sample.records, sample.encoded(), sample.ids) == (4, 2, [1, 2])
    assert {k: u.count for k, u in sample.uses[1].items()} == {("orders", "value"): 1,
                                                               ("pay", "value"): 1}
    assert [(u.first.field, u.first.offset) for u in sample.uses[2].values()] == [("key", 0)]
    # Once judged, a record counts as encoded only where an id it carries counts.
    assert sample.encoded(lambda i, key: key == ("pay", "value")) == 1


def test_plain_records_are_no_finding() -> None:
    sample = sample_of(record("orders", b"hello"), record("orders", b'{"a": 1}'))
    assert compare(sample, {}, {}, "primary", "secondary") == []
    parity = Parity("mirrored records", "primary", "secondary", records=2)
    assert parity.state == "in parity"
    assert parity.summary() == "schemas: no registry-encoded records among 2 sampled"


def test_same_schemas_under_the_same_ids_are_in_parity() -> None:
    sample = sample_of(record("orders", wire.encode(1, b"x")))
    lookups = {1: counted(sample, 1, A, A, (("orders-value", 1),))}
    latest = {"orders-value": Latest(SubjectVersion("orders-value", 1, 1, A),
                                     SubjectVersion("orders-value", 1, 1, A))}
    assert compare(sample, lookups, latest, "primary", "secondary") == []
    parity = Parity("mirrored records", "primary", "secondary", ids=[1])
    assert parity.summary() == "schemas in parity (1 id sampled)"
    assert parity.describe() == ("mirrored records (primary -> secondary): schemas in parity "
                                 "(1 id sampled)")
    assert parity.as_dict()["fix"] is None


def test_an_id_missing_on_the_reader_names_the_topic_the_id_and_the_subject() -> None:
    sample = sample_of(record("orders", wire.encode(3, b"x")))
    issues = compare(sample, {3: counted(sample, 3, B, None, (("orders-value", 2),))}, {},
                     "primary", "secondary")
    assert [(i.kind, i.schema_id, i.subject, i.topics) for i in issues] == [
        (IssueKind.MISSING, 3, "orders-value", ("orders",))]
    assert "schema id 3 (orders-value v2 on primary's registry) is missing on secondary's" \
        in issues[0].detail
    assert issues[0].example == "orders[0]@0 value on primary"


def test_ids_numbered_in_opposite_orders_each_resolve_to_a_different_schema() -> None:
    sample = sample_of(record("a", wire.encode(1, b"x")), record("b", wire.encode(2, b"y")))
    lookups = {1: counted(sample, 1, A, B, (("a-value", 1),), (("b-value", 1),),
                          "another schema"),
               2: counted(sample, 2, B, A, (("b-value", 1),), (("a-value", 1),),
                          "another schema")}
    issues = compare(sample, lookups, {}, "primary", "secondary")
    assert [(i.kind, i.schema_id) for i in issues] == [(IssueKind.DIFFERENT, 1),
                                                       (IssueKind.DIFFERENT, 2)]
    assert "resolves to a different schema on secondary's registry (b-value v1) than on " \
           "primary's (a-value v1)" in issues[0].detail
    parity = Parity("mirrored records", "primary", "secondary", ids=[1, 2], issues=issues)
    assert parity.state == "not in parity"
    assert parity.summary() == ("schemas NOT in parity: 2 id(s) resolving to a different "
                                "schema (2 ids sampled)")
    # Registering cannot give a taken id another schema: only a copy into an empty registry.
    assert parity.fix().startswith("copy primary's registry into an empty registry for "
                                   "secondary, keeping ids")


def test_a_subject_whose_latest_version_differs_is_found_even_when_the_ids_agree() -> None:
    sample = sample_of(record("orders", wire.encode(1, b"x")))
    lookups = {1: counted(sample, 1, A, A, (("orders-value", 1),))}
    newer = SubjectVersion("orders-value", 2, 5, B)
    cases = {
        "another schema": Latest(newer, SubjectVersion("orders-value", 1, 1, A),
                                 "another schema"),
        "under id 9": Latest(newer, SubjectVersion("orders-value", 2, 9, B)),
        "has no subject": Latest(newer, None),
    }
    for said, pair in cases.items():
        issues = compare(sample, lookups, {"orders-value": pair}, "primary", "secondary")
        assert [(i.kind, i.subject, i.topics) for i in issues] == [
            (IssueKind.LATEST, "orders-value", ("orders",))], said
        assert said in issues[0].detail


def test_an_id_neither_registry_knows_is_a_note_not_a_risk() -> None:
    sample = sample_of(record("bin", b"\x00\x00\x00\x00\x2a\x00\x00\x00"))
    issues = compare(sample, {42: Lookup(None, None)}, {}, "primary", "secondary")
    assert [i.kind for i in issues] == [IssueKind.UNKNOWN_ID]
    parity = Parity("mirrored records", "primary", "secondary", ids=[42], issues=issues)
    assert parity.state == "in parity" and not parity.risks


def test_with_the_writers_registry_silent_missing_ids_are_still_named_as_unknown() -> None:
    sample = sample_of(record("orders", wire.encode(3, b"x")), record("o", wire.encode(1, b"y")))
    lookups = {3: counted(sample, 3, None, None), 1: counted(sample, 1, None, A)}
    issues = compare(sample, lookups, {}, "primary", "secondary", writer_known=False)
    assert [(i.kind, i.schema_id) for i in issues] == [(IssueKind.MISSING, 3)]
    assert "primary's registry did not answer" in issues[0].detail
    silent = Parity("mirrored records", "primary", "secondary", ids=[1], unknown="no answer")
    assert silent.state == "unknown"
    assert silent.summary() == "schemas unknown: no answer"


def test_ids_only_missing_are_fixed_by_registering_the_subjects_in_id_order() -> None:
    sample = sample_of(record("a", wire.encode(4, b"x")), record("b", wire.encode(3, b"y")))
    lookups = {3: counted(sample, 3, A, None, (("a-value", 1),)),
               4: counted(sample, 4, B, None, (("b-value", 2), ("c-value", 1)))}
    parity = Parity("mirrored records", "primary", "secondary", ids=[3, 4],
                    issues=compare(sample, lookups, {}, "primary", "secondary"),
                    writer_url="http://a:8080/apis/ccompat/v7",
                    reader_url="http://b:8080/apis/ccompat/v7")
    fix = parity.fix()
    assert fix.startswith("register on secondary's registry, in this order, while its next id "
                          "is 3: a-value v1 (id 3), b-value v2, c-value v1 (id 4) — or copy")
    assert "http://a:8080/apis/registry/v2/admin/export" in fix
    assert "http://b:8080/apis/registry/v2/admin/import" in fix


def test_a_protobuf_example_names_its_message_index() -> None:
    proto = Schema(PROTOBUF, "message M {}")
    sample = sample_of(record("p", wire.encode(6, b"z", (1,))))
    issues = compare(sample, {6: counted(sample, 6, proto, None, (("p-value", 1),))}, {},
                     "primary", "secondary")
    assert issues[0].example == "p[0]@0 value on primary, message index [1]"


# -- which ids count (issue 51, finding 6), through the real client and a fake registry ----

LONG_KEY = struct.pack(">q", 50_000_000)  # Kafka's LongSerializer: "schema id 2"


def judged(writer: FakeRegistry, reader: FakeRegistry, *records: Record,
           writer_up: bool = True) -> tuple[list[Issue], dict[int, Lookup]]:
    """`records` sampled on the primary, resolved on both fake registries and compared."""
    sample = sample_of(*records)
    with serving(writer, "primary") as mine, serving(reader, "secondary") as theirs:
        lookups, latest = resolve(sample, mine if writer_up else None, theirs,
                                  reader_subjects=theirs.subjects())
    return compare(sample, lookups, latest, "primary", "secondary",
                   writer_known=writer_up), lookups


def numbered_apart() -> tuple[FakeRegistry, FakeRegistry]:
    """Two registries that number A and B in opposite orders: id 1 is A on the primary's and
    B on the secondary's, id 2 the other way round."""
    primary, secondary = FakeRegistry(), FakeRegistry()
    primary.register("a-value", A), primary.register("b-value", B)
    secondary.register("b-value", B), secondary.register("a-value", A)
    return primary, secondary


def test_a_long_key_that_spells_an_id_filed_under_another_topic_is_a_note_only() -> None:
    primary, secondary = numbered_apart()
    assert wire.schema_id(LONG_KEY) == 2
    issues, lookups = judged(primary, secondary,
                             record("customers", b"plain", LONG_KEY),
                             record("customers", b"plain", LONG_KEY, offset=1))
    assert [(i.kind, i.schema_id, i.topics) for i in issues] == [
        (IssueKind.UNFILED, 2, ("customers",))]
    assert issues[0].detail.startswith(
        "records in customers (keys) start like a registry encoding with id 2, which "
        "primary's registry files only under b-value v1, not under a subject of that topic "
        "and side")
    parity = Parity("mirrored records", "primary", "secondary", issues=issues)
    assert not parity.risks and parity.state == "in parity"
    # Nothing about b-value is asked beyond the id: its latest version is no concern here.
    assert not [p for p in primary.asked if "/subjects/" in p]
    assert not lookups[2].counts(("customers", "key"))


def test_the_same_id_counts_where_its_topics_subject_files_it_and_not_elsewhere() -> None:
    primary, secondary = numbered_apart()
    issues, _ = judged(primary, secondary,
                       record("b", wire.encode(2, b"\x02"), b"k"),
                       record("customers", b"plain", LONG_KEY))
    assert [(i.kind, i.schema_id, i.topics) for i in issues] == [
        (IssueKind.UNFILED, 2, ("customers",)), (IssueKind.DIFFERENT, 2, ("b",)),
        (IssueKind.LATEST, None, ("b",))]
    assert "records in b carry it" in issues[1].detail


def test_record_name_subjects_count_when_the_bytes_decode_with_their_schema() -> None:
    primary, secondary = FakeRegistry(), FakeRegistry()
    acme = Schema(AVRO, '{"type": "record", "name": "Order", "namespace": "acme", '
                        '"fields": [{"name": "n", "type": "long"}]}')
    # RecordNameStrategy: the subject is the record's full name, any topic.
    assert primary.register("acme.Order", acme) == 1
    assert primary.register("orders-acme.Order", acme) == 1  # TopicRecordNameStrategy
    secondary.register("x-value", A)  # id 1 is another schema there
    order = wire.encode(1, b"\x04")  # n = 2: decodes with acme.Order
    not_order = struct.pack(">q", 1 << 24 | 0x8080)  # id 1, then bytes no long ends on
    issues, lookups = judged(primary, secondary, record("payments", order),
                             record("orders", order, offset=1),
                             record("accounts", b"plain", not_order, offset=2))
    assert lookups[1].filed == {("payments", "value"): "acme.Order",
                                ("orders", "value"): "orders-acme.Order",
                                ("accounts", "key"): None}
    assert [(i.kind, i.topics) for i in issues if i.schema_id == 1] == [
        (IssueKind.UNFILED, ("accounts",)), (IssueKind.DIFFERENT, ("orders", "payments"))]


def test_with_the_writers_registry_silent_an_id_counts_where_the_reader_has_a_subject() -> None:
    primary, secondary = numbered_apart()
    secondary.register("orders-value", B)
    issues, _ = judged(primary, secondary,
                       record("orders", wire.encode(9, b"x")),
                       record("customers", b"plain", struct.pack(">q", 9 << 24)),
                       writer_up=False)
    # Missing on the reader, which files orders' values: named; the long key is a note.
    assert [(i.kind, i.schema_id, i.topics) for i in issues] == [
        (IssueKind.UNKNOWN_ID, 9, ("customers",)), (IssueKind.MISSING, 9, ("orders",))]
    assert "primary's registry did not answer" in issues[1].detail


# -- references compared by what they hold (issue 51, finding 7) ---------------------------

ADDRESS_V1 = Schema(AVRO, '{"type": "record", "name": "Address", "namespace": "acme", '
                          '"fields": [{"name": "line", "type": "string"}]}')
ADDRESS_V2 = Schema(AVRO, '{"type": "record", "name": "Address", "namespace": "acme", '
                          '"fields": [{"name": "zip", "type": "int"}]}')
PERSON_TEXT = ('{"type": "record", "name": "Person", "namespace": "acme", "fields": '
               '[{"name": "home", "type": "acme.Address"}]}')


def person(version: int = 1) -> Schema:
    return Schema(AVRO, PERSON_TEXT, (Reference("acme.Address", "address", version),))


def test_same_named_references_whose_contents_differ_make_a_different_schema() -> None:
    primary, secondary = FakeRegistry(), FakeRegistry()
    primary.register("address", ADDRESS_V1)
    secondary.register("address", ADDRESS_V2)  # the same subject and version, other fields
    assert primary.register("people-value", person()) == \
        secondary.register("people-value", person()) == 2
    assert person().same_as(person()), "the texts and reference names are alike"
    issues, _ = judged(primary, secondary, record("people", wire.encode(2, b"\x02a")))
    assert [(i.kind, i.schema_id) for i in issues] == [(IssueKind.DIFFERENT, 2),
                                                       (IssueKind.LATEST, None)]
    assert ": its reference acme.Address (address v1 on primary's registry, address v1 on " \
           "secondary's) is another schema; records in people carry it" in issues[0].detail
    # The same contents under another subject and version are the same schema.
    moved = FakeRegistry()
    moved.register("spare", ADDRESS_V2)
    moved.register("acme-address", ADDRESS_V1)
    assert moved.register("people-value",
                          Schema(AVRO, PERSON_TEXT,
                                 (Reference("acme.Address", "acme-address", 1),))) == 3
    with serving(primary, "primary") as mine, serving(moved, "secondary") as theirs:
        mine_person, theirs_person = mine.schema(2), theirs.schema(3)
        assert mine_person is not None and theirs_person is not None
        assert difference(mine_person, mine, theirs_person, theirs) is None
        # A reference the reader's registry lacks cannot be decoded there.
        lacking = Schema(AVRO, PERSON_TEXT, (Reference("acme.Address", "gone", 1),))
        assert difference(mine_person, mine, lacking, theirs) == (
            "its reference acme.Address (address v1 on primary's registry, gone v1 on "
            "secondary's) is missing on secondary's")


def test_references_are_followed_through_levels_and_a_cycle_ends() -> None:
    primary, secondary = FakeRegistry(), FakeRegistry()
    for registry, street in ((primary, "string"), (secondary, "long")):
        registry.register("street", Schema(AVRO, f'{{"type": "record", "name": "Street", '
                                                 f'"fields": [{{"name": "s", "type": '
                                                 f'"{street}"}}]}}'))
        registry.register("address", Schema(AVRO, ADDRESS_V1.text,
                                            (Reference("Street", "street", 1),)))
    with serving(primary, "primary") as mine, serving(secondary, "secondary") as theirs:
        said = difference(person(), mine, person(), theirs)
        assert said == ("its reference acme.Address (address v1 on primary's registry, "
                        "address v1 on secondary's): its reference Street (street v1 on "
                        "primary's registry, street v1 on secondary's) is another schema")
    # Two schemas that reference each other (a registry drctl should not meet): compared
    # once each, and alike.
    loop = FakeRegistry()
    loop.register("ping", Schema(JSON, '{"title": "ping"}', (Reference("pong", "pong", 1),)))
    loop.register("pong", Schema(JSON, '{"title": "pong"}', (Reference("ping", "ping", 1),)))
    with serving(loop, "primary") as mine, serving(loop, "secondary") as theirs:
        ping = mine.version("ping", 1)
        assert ping is not None
        assert difference(ping, mine, ping, theirs) is None
        asked = len(loop.asked)
        assert asked <= 4, loop.asked


def test_a_writers_registry_that_answers_404_to_everything_is_unknown_not_in_parity(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A wrong path answers 404 to every lookup: the writer's schemas were "none" and the
    reader's matched nothing, which read as in parity."""
    reader = FakeRegistry()
    reader.register("orders-value", A)

    class DefaultBackend(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()

    def read(sample: Sample, clients: object, ranges: object, names: object) -> None:
        sample.add("primary", record("orders", wire.encode(1, b"\x02a")))

    monkeypatch.setattr(parity_module, "read_sample", read)
    with http_server(DefaultBackend) as url, serving(reader, "secondary") as theirs:
        writer = RegistryClient("primary", HttpSettings(url + "/apis/ccompat/v6"))
        result = check_parity("mirrored records", "primary", "secondary", writer, theirs,
                              [(cast(ClusterClients, None), {}, {})])
    assert result.state == "unknown", result.describe()
    assert result.unknown is not None and result.unknown.startswith(
        f"primary's registry ({url}/apis/ccompat/v6) is not a schema registry: GET /subjects "
        "answered 404 without the API's not-found error_code")
    [blind] = parity_findings(result)
    assert blind.severity == Severity.BLIND
