"""MirrorMaker 2's checkpoints, offset syncs and heartbeats (drctl/codecs/mm2.py):
hand-built bytes laid out as Apache Kafka's sources define them; what the encoders write
decodes back to the same value; truncated records never decode."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from drctl.codecs import (
    Checkpoint,
    DecodeError,
    Heartbeat,
    OffsetSync,
    decode_checkpoint,
    decode_heartbeat,
    decode_offset_sync,
    encode_checkpoint,
    encode_heartbeat,
    encode_offset_sync,
)
from tests.unit.codecs.support import TS, h, int64, outcome, text


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


int32 = st.integers(-(2**31), 2**31 - 1)


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
