"""Confluent's __consumer_timestamps and __replicator_id header, inferred layouts
(drctl/codecs/confluent.py): hand-built bytes, round trips, and truncated records."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from drctl.codecs import (
    ConsumerTimestamp,
    DecodeError,
    Provenance,
    decode_consumer_timestamp,
    decode_provenance,
    encode_consumer_timestamp,
)
from drctl.codecs.confluent import MAX_TIMESTAMP_MS, MAX_VERSION
from tests.unit.codecs.support import TS, h, int64, outcome

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


def test_provenance_shows_strings_and_timestamps() -> None:
    raw = h("0016") + b"lkc-Zq9xYw1RS0aBcDeFgH" + h("0006") + b"orders" + TS.to_bytes(8, "big")
    prov = decode_provenance(raw)
    assert prov.hex == raw.hex()
    assert prov.strings == ("lkc-Zq9xYw1RS0aBcDeFgH", "orders")
    assert prov.timestamps_ms == (TS,)
    assert decode_provenance(b"\x01\x02").strings == ()
    with pytest.raises(DecodeError):
        decode_provenance(None)


@given(st.binary(max_size=200))
def test_provenance_never_fails_on_bytes(raw: bytes) -> None:
    prov = decode_provenance(raw)
    assert isinstance(prov, Provenance) and prov.raw == raw
    assert all(s in raw.decode("latin-1") for s in prov.strings)


# Group ids as people write them: no control characters; topic names as Kafka allows them.
groups = st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=60)


topics = st.from_regex(r"[a-zA-Z0-9._-]{1,60}", fullmatch=True)


versions = st.integers(0, MAX_VERSION)


@st.composite
def consumer_timestamps(draw: st.DrawFn) -> ConsumerTimestamp:
    key_layout = draw(st.sampled_from(["gtp", "v+gtp"]))
    value_layout = draw(st.sampled_from(["ts", "v+ts", "ts+delta", "v+ts+delta"]))
    return ConsumerTimestamp(
        draw(groups), draw(topics), draw(st.integers(0, 2**31 - 1)),
        draw(st.integers(0, MAX_TIMESTAMP_MS)),
        draw(int64) if value_layout.endswith("delta") else None,
        key_layout, value_layout,
        draw(versions) if key_layout == "v+gtp" else None,
        draw(versions) if value_layout.startswith("v+") else None)


@given(consumer_timestamps())
def test_consumer_timestamp_round_trip(ct: ConsumerTimestamp) -> None:
    key, value = encode_consumer_timestamp(ct)
    assert decode_consumer_timestamp(key, value) == ct


@given(consumer_timestamps(), st.data())
def test_truncated_consumer_timestamp_keys_never_decode(ct: ConsumerTimestamp,
                                                        data: st.DataObject) -> None:
    key, value = encode_consumer_timestamp(ct)
    cut = data.draw(st.integers(0, len(key) - 1))
    assert isinstance(outcome(decode_consumer_timestamp, key[:cut], value), DecodeError)


@given(consumer_timestamps(), st.data())
def test_truncated_consumer_timestamp_values_decode_or_raise(ct: ConsumerTimestamp,
                                                             data: st.DataObject) -> None:
    """A shorter value may be another layout (18 bytes cut to 16 reads as ts+delta): it
    decodes or raises DecodeError, never anything else."""
    key, value = encode_consumer_timestamp(ct)
    cut = data.draw(st.integers(0, len(value) - 1))
    result = outcome(decode_consumer_timestamp, key, value[:cut])
    assert isinstance(result, (ConsumerTimestamp, DecodeError))
    if isinstance(result, ConsumerTimestamp):
        assert result.value_layout != ct.value_layout
