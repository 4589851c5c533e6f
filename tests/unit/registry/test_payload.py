"""Whether a key or value decodes with a schema, and the record name RecordNameStrategy files
a schema under (drctl/registry/payload.py): what tells an id from bytes that only start like
one."""

from __future__ import annotations

import json
import struct

from drctl.registry import wire
from drctl.registry.canonical import AVRO, JSON, PROTOBUF, Schema
from drctl.registry.payload import decodes, record_name

CUSTOMER = Schema(AVRO, json.dumps({
    "type": "record", "name": "Customer", "namespace": "acme",
    "fields": [{"name": "name", "type": "string"},
               {"name": "tier", "type": {"type": "enum", "name": "Tier",
                                         "symbols": ["GOLD", "BASIC"]}},
               {"name": "tags", "type": {"type": "array", "items": "string"}},
               {"name": "limits", "type": {"type": "map", "values": "long"}},
               {"name": "ref", "type": ["null", {"type": "fixed", "name": "Ref", "size": 2}]},
               {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal",
                                           "precision": 10, "scale": 2}},
               {"name": "next", "type": ["null", "Customer"]}]}))
# name "ab", tier BASIC, tags ["x"], limits {"d": -1}, ref fixed "zz", amount 0x01,
# next: another Customer ("c", GOLD, no tags, no limits, ref null, amount empty, next null).
_ONE = (b"\x04ab" + b"\x02" + b"\x02\x02x\x00" + b"\x02\x02d\x01\x00" + b"\x02zz"
        + b"\x02\x01")
_TWO = b"\x02c" + b"\x00" + b"\x00" + b"\x00" + b"\x00" + b"\x00" + b"\x00"
CUSTOMER_BYTES = wire.encode(7, _ONE + b"\x02" + _TWO)
# Kafka's LongSerializer: 8 bytes big-endian; 50,000,000 starts 00 00 00 00 02.
LONG_KEY = struct.pack(">q", 50_000_000)


def test_a_long_key_reads_as_an_id_but_decodes_with_no_record() -> None:
    assert wire.schema_id(LONG_KEY) == 2
    assert decodes(CUSTOMER, LONG_KEY) is False
    assert decodes(Schema(JSON, '{"title": "acme.Customer"}'), LONG_KEY) is False
    assert decodes(Schema(PROTOBUF, "message Customer { string name = 1; }"), LONG_KEY) \
        is False


def test_avro_decodes_to_its_last_byte_or_not_at_all() -> None:
    assert decodes(CUSTOMER, CUSTOMER_BYTES) is True
    assert decodes(CUSTOMER, CUSTOMER_BYTES + b"\x00") is False  # a byte left over
    assert decodes(CUSTOMER, CUSTOMER_BYTES[:-1]) is False  # one short
    assert decodes(Schema(AVRO, '"long"'), wire.encode(1, b"\x96\x01")) is True
    bad_enum = wire.encode(7, b"\x04ab\x06")  # symbol 3 of 2
    assert decodes(CUSTOMER, bad_enum) is False
    assert decodes(Schema(AVRO, '"string"'), wire.encode(1, b"\x04\xff\xfe")) is False
    # A type named in a reference drctl did not fetch: it cannot tell.
    assert decodes(Schema(AVRO, '{"type": "record", "name": "R", "fields": '
                               '[{"name": "a", "type": "other.Address"}]}'),
                   wire.encode(1, b"\x02")) is None


def test_json_and_protobuf_payloads() -> None:
    assert decodes(Schema(JSON, "{}"), wire.encode(3, b'{"a": 1}')) is True
    assert decodes(Schema(JSON, "{}"), wire.encode(3, b'{"a": ')) is False
    proto = Schema(PROTOBUF, "message M { string s = 1; int64 n = 2; }")
    assert decodes(proto, wire.encode(4, b"\x0a\x02hi\x10\x05", (0,))) is True
    assert decodes(proto, wire.encode(4, b"\x0a\x09hi", (0,))) is False  # runs past the end


def test_record_names_as_record_name_strategy_files_them() -> None:
    assert record_name(CUSTOMER, CUSTOMER_BYTES) == "acme.Customer"
    assert record_name(Schema(AVRO, '"string"'), wire.encode(1, b"\x00")) is None
    assert record_name(Schema(JSON, '{"title": "acme.Order"}'), b"") == "acme.Order"
    assert record_name(Schema(JSON, "{}"), b"") is None
    proto = Schema(PROTOBUF, """
        syntax = "proto3";
        package acme.v1;
        // a comment with a } in it
        message Customer { string name = 1; message Address { string line = 1; } }
        enum Tier { GOLD = 0; }
        message Order { option (x) = "{"; message Line {} message Item {} }
    """)
    assert record_name(proto, wire.encode(1, b"", (0,))) == "acme.v1.Customer"
    assert record_name(proto, wire.encode(1, b"", (0, 0))) == "acme.v1.Customer.Address"
    assert record_name(proto, wire.encode(1, b"", (1, 1))) == "acme.v1.Order.Item"
    assert record_name(proto, wire.encode(1, b"", (2,))) is None
