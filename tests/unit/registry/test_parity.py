"""The schema-parity rules: what a sample of ids, resolved on two registries, amounts to."""

from __future__ import annotations

from drctl.kafka.records import Record
from drctl.registry import wire
from drctl.registry.canonical import AVRO, PROTOBUF, Schema
from drctl.registry.client import SubjectVersion
from drctl.registry.parity import IssueKind, Lookup, Parity, Sample, compare

A = Schema(AVRO, '{"type": "record", "name": "A", "fields": [{"name": "a", "type": "string"}]}')
B = Schema(AVRO, '{"type": "record", "name": "B", "fields": [{"name": "b", "type": "long"}]}')


def record(topic: str, value: bytes | None, key: bytes | None = None, offset: int = 0) -> Record:
    return Record(topic, 0, offset, key, value, 0, 1, ())


def sample_of(*records: Record) -> Sample:
    sample = Sample()
    for r in records:
        sample.add("primary", r)
    return sample


def test_a_sample_counts_ids_in_keys_and_values_and_ignores_plain_records() -> None:
    sample = sample_of(record("orders", wire.encode(1, b"x"), wire.encode(2, b"k")),
                       record("orders", b'{"plain": "json"}', b"key"),
                       record("orders", None),  # a tombstone
                       record("pay", wire.encode(1, b"y"), offset=7))
    assert (sample.records, sample.encoded, sample.ids) == (4, 2, [1, 2])
    assert sample.counts == {1: 2, 2: 1}
    assert sample.topics[1] == {"orders", "pay"}
    assert [s.field for s in sample.seen[2]] == ["key"]


def test_plain_records_are_no_finding() -> None:
    sample = sample_of(record("orders", b"hello"), record("orders", b'{"a": 1}'))
    assert compare(sample, {}, {}, "primary", "secondary") == []
    parity = Parity("mirrored records", "primary", "secondary", records=2)
    assert parity.state == "in parity"
    assert parity.summary() == "schemas: no registry-encoded records among 2 sampled"


def test_same_schemas_under_the_same_ids_are_in_parity() -> None:
    sample = sample_of(record("orders", wire.encode(1, b"x")))
    lookups = {1: Lookup(A, A, (("orders-value", 1),))}
    latest = {"orders-value": (SubjectVersion("orders-value", 1, 1, A),
                               SubjectVersion("orders-value", 1, 1, A))}
    assert compare(sample, lookups, latest, "primary", "secondary") == []
    parity = Parity("mirrored records", "primary", "secondary", ids=[1])
    assert parity.summary() == "schemas in parity (1 id sampled)"
    assert parity.describe() == ("mirrored records (primary -> secondary): schemas in parity "
                                 "(1 id sampled)")
    assert parity.as_dict()["fix"] is None


def test_an_id_missing_on_the_reader_names_the_topic_the_id_and_the_subject() -> None:
    sample = sample_of(record("orders", wire.encode(3, b"x")))
    issues = compare(sample, {3: Lookup(B, None, (("orders-value", 2),))}, {},
                     "primary", "secondary")
    assert [(i.kind, i.schema_id, i.subject, i.topics) for i in issues] == [
        (IssueKind.MISSING, 3, "orders-value", ("orders",))]
    assert "schema id 3 (orders-value v2 on primary's registry) is missing on secondary's" \
        in issues[0].detail
    assert issues[0].example == "orders[0]@0 value on primary"


def test_ids_numbered_in_opposite_orders_each_resolve_to_a_different_schema() -> None:
    sample = sample_of(record("a", wire.encode(1, b"x")), record("b", wire.encode(2, b"y")))
    lookups = {1: Lookup(A, B, (("a-value", 1),), (("b-value", 1),)),
               2: Lookup(B, A, (("b-value", 1),), (("a-value", 1),))}
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
    lookups = {1: Lookup(A, A, (("orders-value", 1),))}
    newer = SubjectVersion("orders-value", 2, 5, B)
    cases = {
        "another schema": SubjectVersion("orders-value", 1, 1, A),
        "under id 9": SubjectVersion("orders-value", 2, 9, B),
        "has no subject": None,
    }
    for said, theirs in cases.items():
        issues = compare(sample, lookups, {"orders-value": (newer, theirs)}, "primary",
                         "secondary")
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
    lookups = {3: Lookup(None, None), 1: Lookup(None, A)}
    issues = compare(sample, lookups, {}, "primary", "secondary", writer_known=False)
    assert [(i.kind, i.schema_id) for i in issues] == [(IssueKind.MISSING, 3)]
    assert "primary's registry did not answer" in issues[0].detail
    silent = Parity("mirrored records", "primary", "secondary", ids=[1], unknown="no answer")
    assert silent.state == "unknown"
    assert silent.summary() == "schemas unknown: no answer"


def test_ids_only_missing_are_fixed_by_registering_the_subjects_in_id_order() -> None:
    sample = sample_of(record("a", wire.encode(4, b"x")), record("b", wire.encode(3, b"y")))
    lookups = {3: Lookup(A, None, (("a-value", 1),)),
               4: Lookup(B, None, (("b-value", 2), ("c-value", 1)))}
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
    issues = compare(sample, {6: Lookup(proto, None, (("p-value", 1),))}, {}, "primary",
                     "secondary")
    assert issues[0].example == "p[0]@0 value on primary, message index [1]"
