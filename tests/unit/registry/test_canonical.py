"""Canonical forms: equal exactly when two registries' copies decode the same bytes alike."""

from __future__ import annotations

import json

from drctl.registry.canonical import AVRO, JSON, PROTOBUF, Reference, Schema, canonical_form

RECORD = {"type": "record", "name": "Order", "namespace": "shop",
          "fields": [{"name": "id", "type": "long"},
                     {"name": "note", "type": ["null", "string"], "default": None}]}


def avro(node: object) -> Schema:
    return Schema(AVRO, json.dumps(node))


def test_avro_docs_defaults_aliases_and_layout_do_not_count() -> None:
    other = {"doc": "an order", "fields": [
        {"name": "id", "type": {"type": "long"}, "doc": "its id", "aliases": ["oid"]},
        {"name": "note", "type": ["null", "string"], "default": None, "order": "ignore"}],
        "namespace": "shop", "name": "Order", "type": "record", "aliases": ["Old"]}
    assert avro(RECORD).same_as(Schema(AVRO, json.dumps(other, indent=4)))
    assert canonical_form(AVRO, json.dumps(RECORD)) == (
        '{"name":"shop.Order","type":"record","fields":[{"name":"id","type":"long"},'
        '{"name":"note","type":["null","string"]}]}')


def test_avro_names_are_compared_in_full() -> None:
    full = {**RECORD, "name": "shop.Order"}
    del full["namespace"]
    assert avro(RECORD).same_as(avro(full))
    assert not avro(RECORD).same_as(avro({**RECORD, "namespace": "store"}))
    nested = {"type": "record", "name": "A", "namespace": "n",
              "fields": [{"name": "next", "type": ["null", "A"]}]}
    assert '"type":["null","n.A"]' in canonical_form(AVRO, json.dumps(nested))


def test_avro_field_types_order_and_logical_types_count() -> None:
    assert not avro(RECORD).same_as(avro({**RECORD, "fields": RECORD["fields"][::-1]}))
    assert not avro(RECORD).same_as(avro({**RECORD, "fields": [
        {"name": "id", "type": "int"}, RECORD["fields"][1]]}))
    decimal = {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}
    assert not avro(decimal).same_as(avro("bytes"))
    assert not avro(decimal).same_as(avro({**decimal, "scale": 3}))


def test_json_schema_key_order_and_layout_do_not_count() -> None:
    a = Schema(JSON, '{"type": "object", "properties": {"x": {"type": "integer"}}}')
    b = Schema(JSON, '{"properties":{"x":{"type":"integer"}},\n "type":"object"}')
    assert a.same_as(b)
    assert not a.same_as(Schema(JSON, '{"type": "object", "properties": {"x": {}}}'))


def test_protobuf_comments_and_layout_do_not_count_but_string_literals_do() -> None:
    a = Schema(PROTOBUF, 'syntax = "proto3";\n// orders\nmessage M {\n  int32 x = 1;\n}\n')
    b = Schema(PROTOBUF, 'syntax="proto3"; /* v1 */ message M { int32 x = 1; }')
    assert a.same_as(b)
    assert not a.same_as(Schema(PROTOBUF, 'syntax = "proto3"; message M { int64 x = 1; }'))
    c = Schema(PROTOBUF, 'message M { string s = 1 [json_name = "a  // b"]; }')
    d = Schema(PROTOBUF, 'message M { string s = 1 [json_name = "a // b"]; }')
    assert not c.same_as(d)


def test_types_and_references_count() -> None:
    text = '{"type": "object"}'
    assert not Schema(JSON, text).same_as(Schema(AVRO, text))
    ref = Reference("common.proto", "common-value", 1)
    assert Schema(PROTOBUF, "m", (ref,)).same_as(
        Schema(PROTOBUF, "m", (Reference("common.proto", "common-value", 3),)))
    assert not Schema(PROTOBUF, "m", (ref,)).same_as(Schema(PROTOBUF, "m"))


def test_a_registry_answer_without_a_type_is_avro() -> None:
    schema = Schema.from_registry({"schema": '"string"', "references": [
        {"name": "x", "subject": "y", "version": 2}]})
    assert schema.type == AVRO
    assert schema.references == (Reference("x", "y", 2),)
    assert schema.as_registered() == {"schema": '"string"', "references": [
        {"name": "x", "subject": "y", "version": 2}]}
    assert "schemaType" in Schema(JSON, "{}").as_registered()


def test_text_that_does_not_parse_as_its_type_is_compared_as_text() -> None:
    assert canonical_form(AVRO, "not  json") == "not json"
    assert canonical_form(JSON, "{") == "{"
