"""Decoders against hand-built bytes laid out as Apache Kafka's sources define them."""

from __future__ import annotations

import pytest

from drctl.codecs import (
    Checkpoint,
    ConsumerTimestamp,
    DecodeError,
    Heartbeat,
    OffsetSync,
    SourceOffset,
    decode_checkpoint,
    decode_consumer_timestamp,
    decode_heartbeat,
    decode_offset_sync,
    decode_provenance,
    decode_source_offset,
    encode_checkpoint,
    encode_consumer_timestamp,
    encode_heartbeat,
    encode_offset_sync,
    encode_source_offset,
)
from drctl.codecs.connect import mm2_source_offset

TS = 1_700_000_000_123


def h(text: str) -> bytes:
    return bytes.fromhex(text.replace(" ", ""))


# -- MirrorMaker 2 ---------------------------------------------------------------------------


def test_checkpoint_bytes() -> None:
    key = h("0002 6731") + h("0008") + b"A.orders" + h("0000 0003")
    value = h("0000") + (41).to_bytes(8, "big") + (17).to_bytes(8, "big") + h("0002") + b"md"
    cp = decode_checkpoint(key, value)
    assert cp == Checkpoint("g1", "A.orders", 3, 41, 17, "md")
    assert encode_checkpoint(cp) == (key, value)


def test_checkpoint_rejects_other_versions_trailing_bytes_and_nulls() -> None:
    key, value = encode_checkpoint(Checkpoint("g", "t", 0, 1, 1, ""))
    with pytest.raises(DecodeError, match="version 1"):
        decode_checkpoint(key, h("0001") + value[2:])
    with pytest.raises(DecodeError, match="trailing"):
        decode_checkpoint(key, value + b"\x00")
    with pytest.raises(DecodeError, match="trailing"):
        decode_checkpoint(key + b"\x00", value)
    with pytest.raises(DecodeError, match="tombstone"):
        decode_checkpoint(key, None)
    with pytest.raises(DecodeError, match="null key"):
        decode_checkpoint(None, value)


def test_offset_sync_bytes() -> None:
    key = h("0006") + b"orders" + h("0000 0001")
    value = (1000).to_bytes(8, "big") + (998).to_bytes(8, "big")
    sync = decode_offset_sync(key, value)
    assert sync == OffsetSync("orders", 1, 1000, 998)
    assert encode_offset_sync(sync) == (key, value)


def test_offset_sync_is_not_a_checkpoint() -> None:
    """Records of one kind never pass for another: the layouts' lengths differ."""
    key, value = encode_offset_sync(OffsetSync("orders", 1, 5, 5))
    with pytest.raises(DecodeError):
        decode_checkpoint(key, value)
    with pytest.raises(DecodeError):
        decode_heartbeat(key, value)


def test_heartbeat_bytes() -> None:
    key = h("0007") + b"primary" + h("0009") + b"secondary"
    value = h("0000") + TS.to_bytes(8, "big")
    hb = decode_heartbeat(key, value)
    assert hb == Heartbeat("primary", "secondary", TS)
    assert encode_heartbeat(hb) == (key, value)


def test_negative_string_length_and_bad_utf8() -> None:
    with pytest.raises(DecodeError, match="negative string length"):
        decode_offset_sync(h("ffff 0000 0000"), bytes(16))
    with pytest.raises(DecodeError, match="not UTF-8"):
        decode_offset_sync(h("0002 c328 0000 0000"), bytes(16))


# -- Kafka Connect source offsets ------------------------------------------------------------


def test_mm2_source_offset_json() -> None:
    key = b'["mm2-primary-secondary-source",{"cluster":"primary","partition":2,"topic":"orders"}]'
    entry = decode_source_offset(key, b'{"offset":41}')
    assert entry.connector == "mm2-primary-secondary-source"
    assert entry.partition == {"cluster": "primary", "partition": 2, "topic": "orders"}
    assert entry.mm2_offset == 41
    assert entry == mm2_source_offset("mm2-primary-secondary-source", "primary", "orders", 2,
                                      41)
    assert encode_source_offset(entry) == (key, b'{"offset":41}')


def test_source_offset_tombstone_and_bad_shapes() -> None:
    reset = decode_source_offset(b'["c",{"p":1}]', None)
    assert reset.offset is None and reset.mm2_offset is None
    assert encode_source_offset(SourceOffset("c", {"p": 1}, None)) == (b'["c",{"p":1}]', None)
    for key in (b'{"c":1}', b'["c"]', b'[1,{}]', b"not json", b"\xff"):
        with pytest.raises(DecodeError):
            decode_source_offset(key, b'{"offset":1}')
    with pytest.raises(DecodeError, match="JSON object"):
        decode_source_offset(b'["c",{}]', b"[1]")
    assert decode_source_offset(b'["c",{}]', b'{"offset":true}').mm2_offset is None


# -- Confluent __consumer_timestamps (inferred layouts) ----------------------------------


GTP = h("0002") + b"g1" + h("0006") + b"orders" + h("0000 0002")


@pytest.mark.parametrize(("value", "layout", "delta", "version"), [
    (TS.to_bytes(8, "big"), "ts", None, None),
    (h("0001") + TS.to_bytes(8, "big"), "v+ts", None, 1),
    (TS.to_bytes(8, "big") + (250).to_bytes(8, "big"), "ts+delta", 250, None),
    (h("0000") + TS.to_bytes(8, "big") + (-3).to_bytes(8, "big", signed=True), "v+ts+delta",
     -3, 0),
])
def test_consumer_timestamp_value_layouts(value: bytes, layout: str, delta: int | None,
                                          version: int | None) -> None:
    ct = decode_consumer_timestamp(GTP, value)
    assert (ct.group, ct.topic, ct.partition, ct.timestamp_ms) == ("g1", "orders", 2, TS)
    assert (ct.value_layout, ct.delta, ct.value_version) == (layout, delta, version)
    assert (ct.key_layout, ct.key_version) == ("gtp", None)
    assert encode_consumer_timestamp(ct) == (GTP, value)


def test_consumer_timestamp_versioned_key() -> None:
    key = h("0000") + GTP
    ct = decode_consumer_timestamp(key, TS.to_bytes(8, "big"))
    assert (ct.key_layout, ct.key_version, ct.group, ct.partition) == ("v+gtp", 0, "g1", 2)
    assert encode_consumer_timestamp(ct)[0] == key


@pytest.mark.parametrize(("key", "value", "reason"), [
    (GTP, bytes(7), "7 bytes matches no known layout"),
    (GTP, bytes(12), "12 bytes"),
    (GTP, (-5).to_bytes(8, "big", signed=True), "not a plausible timestamp"),
    (GTP, h("7fff") + bytes(8), "version 32767"),
    (GTP, None, "tombstone"),
    (None, bytes(8), "null key"),
    (h("0000") + b"orders" + h("0000 0001"), bytes(8), "empty group"),
    (h("0001") + b"g" + h("0003") + b"a b" + h("0000 0001"), bytes(8), "legal topic"),
    (h("0001") + b"g" + h("0001") + b"t" + h("ffff ffff"), bytes(8), "negative partition"),
    (GTP + b"\x00", bytes(8), "trailing"),
    (b"\x00", bytes(8), "shorter than a version"),
])
def test_consumer_timestamp_rejects(key: bytes | None, value: bytes | None,
                                    reason: str) -> None:
    with pytest.raises(DecodeError, match=reason):
        decode_consumer_timestamp(key, value)


def test_consumer_timestamp_reports_why_each_key_layout_failed() -> None:
    with pytest.raises(DecodeError) as info:
        decode_consumer_timestamp(b"\x00\x05abc", bytes(8))
    assert "gtp:" in str(info.value) and "v+gtp:" in str(info.value)


def test_versioned_key_is_not_misread_as_plain() -> None:
    """A version-prefixed key read without its version starts its group with a NUL byte."""
    ct = ConsumerTimestamp("payments-service", "payments", 7, TS, None, "v+gtp", "ts", 3, None)
    key, value = encode_consumer_timestamp(ct)
    assert decode_consumer_timestamp(key, value) == ct


def test_unknown_layout_name_is_refused_by_the_encoder() -> None:
    with pytest.raises(ValueError, match="unknown layout"):
        encode_consumer_timestamp(ConsumerTimestamp("g", "t", 0, TS, key_layout="json"))


# -- __replicator_id ------------------------------------------------------------------------


def test_provenance_shows_strings_and_timestamps() -> None:
    raw = h("0016") + b"lkc-Zq9xYw1RS0aBcDeFgH" + h("0006") + b"orders" + TS.to_bytes(8, "big")
    prov = decode_provenance(raw)
    assert prov.hex == raw.hex()
    assert prov.strings == ("lkc-Zq9xYw1RS0aBcDeFgH", "orders")
    assert prov.timestamps_ms == (TS,)
    assert decode_provenance(b"\x01\x02").strings == ()
    with pytest.raises(DecodeError):
        decode_provenance(None)
