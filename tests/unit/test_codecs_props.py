"""Property tests: whatever the bytes, a decoder returns its type or raises DecodeError; what
the encoders write decodes back to the same value; truncated records never decode."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from drctl.codecs import (
    Checkpoint,
    ConsumerTimestamp,
    DecodeError,
    Heartbeat,
    OffsetSync,
    Provenance,
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
from drctl.codecs.confluent import MAX_TIMESTAMP_MS, MAX_VERSION

DECODERS: list[tuple[Callable[[bytes | None, bytes | None], Any], type]] = [
    (decode_checkpoint, Checkpoint),
    (decode_offset_sync, OffsetSync),
    (decode_heartbeat, Heartbeat),
    (decode_consumer_timestamp, ConsumerTimestamp),
    (decode_source_offset, SourceOffset),
]

maybe_bytes = st.one_of(st.none(), st.binary(max_size=64))
# Kafka strings are UTF-8: no lone surrogates.
text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)
int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)


def outcome(decode: Callable[[bytes | None, bytes | None], Any], key: bytes | None,
            value: bytes | None) -> Any:
    try:
        return decode(key, value)
    except DecodeError as exc:
        return exc


@given(maybe_bytes, maybe_bytes)
def test_random_bytes_decode_or_raise_decode_error(key: bytes | None,
                                                   value: bytes | None) -> None:
    for decode, result_type in DECODERS:
        assert isinstance(outcome(decode, key, value), (result_type, DecodeError))


@given(st.binary(max_size=40), st.binary(max_size=40), st.integers(0, 3))
def test_plausible_prefixes_decode_or_raise_decode_error(a: bytes, b: bytes, n: int) -> None:
    """Random bytes rarely get past a length field; these start with small lengths."""
    key = len(a).to_bytes(2, "big") + a + len(b).to_bytes(2, "big") + b + bytes(n)
    for decode, result_type in DECODERS:
        assert isinstance(outcome(decode, key, b[:18]), (result_type, DecodeError))


@given(st.binary(max_size=200))
def test_provenance_never_fails_on_bytes(raw: bytes) -> None:
    prov = decode_provenance(raw)
    assert isinstance(prov, Provenance) and prov.raw == raw
    assert all(s in raw.decode("latin-1") for s in prov.strings)


checkpoints = st.builds(Checkpoint, text, text, int32, int64, int64, text)
offset_syncs = st.builds(OffsetSync, text, int32, int64, int64)
heartbeats = st.builds(Heartbeat, text, text, int64)


def _strict_round_trip(encode: Callable[[Any], tuple[bytes, bytes]],
                       decode: Callable[[bytes | None, bytes | None], Any], item: Any) -> None:
    key, value = encode(item)
    assert decode(key, value) == item
    for cut in range(len(key)):
        assert isinstance(outcome(decode, key[:cut], value), DecodeError)
    for cut in range(len(value)):
        assert isinstance(outcome(decode, key, value[:cut]), DecodeError)
    assert isinstance(outcome(decode, key, value + b"\x00"), DecodeError)


@given(checkpoints)
def test_checkpoint_round_trip_and_truncation(cp: Checkpoint) -> None:
    _strict_round_trip(encode_checkpoint, decode_checkpoint, cp)


@given(offset_syncs)
def test_offset_sync_round_trip_and_truncation(sync: OffsetSync) -> None:
    _strict_round_trip(encode_offset_sync, decode_offset_sync, sync)


@given(heartbeats)
def test_heartbeat_round_trip_and_truncation(hb: Heartbeat) -> None:
    _strict_round_trip(encode_heartbeat, decode_heartbeat, hb)


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


json_scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**63), 2**63 - 1), text)
json_maps = st.dictionaries(text, json_scalars, max_size=5)


@given(text, json_maps, st.one_of(st.none(), json_maps))
def test_source_offset_round_trip(connector: str, partition: dict[str, Any],
                                  offset: dict[str, Any] | None) -> None:
    entry = SourceOffset(connector, partition, offset)
    key, value = encode_source_offset(entry)
    assert decode_source_offset(key, value) == entry
