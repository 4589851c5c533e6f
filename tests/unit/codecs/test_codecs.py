"""Property tests of the codecs' one contract (drctl/codecs/__init__.py): whatever the
bytes, a decoder returns its type or raises DecodeError."""

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
    SourceOffset,
    decode_checkpoint,
    decode_consumer_timestamp,
    decode_heartbeat,
    decode_offset_sync,
    decode_source_offset,
)
from tests.unit.codecs.support import outcome

DECODERS: list[tuple[Callable[[bytes | None, bytes | None], Any], type]] = [
    (decode_checkpoint, Checkpoint),
    (decode_offset_sync, OffsetSync),
    (decode_heartbeat, Heartbeat),
    (decode_consumer_timestamp, ConsumerTimestamp),
    (decode_source_offset, SourceOffset),
]


maybe_bytes = st.one_of(st.none(), st.binary(max_size=64))


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
