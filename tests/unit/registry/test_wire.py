"""The registry wire format: magic byte 0, a 4-byte big-endian id, Protobuf's indexes."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from drctl.errors import DecodeError
from drctl.registry import wire


def test_the_id_is_the_four_bytes_after_magic_byte_zero() -> None:
    assert wire.schema_id(b"\x00\x00\x00\x01\x02payload") == 258
    assert wire.schema_id(b"\x00\x00\x00\x00\x07") == 7  # an empty payload is a payload


@pytest.mark.parametrize("data", [
    None, b"", b"\x00\x00\x00\x01", b'{"id": 1}', b"plain text", b"\x01\x00\x00\x00\x07x",
    b"\x00\x00\x00\x00\x00\x00\x00\x01",  # a big-endian long 1: id 0 is no registry's
    b"\x00\x80\x00\x00\x01x",  # no Java int
])
def test_bytes_that_are_not_registry_encoded_have_no_id(data: bytes | None) -> None:
    assert wire.schema_id(data) is None


@given(st.integers(1, 2**31 - 1), st.binary(max_size=20))
def test_encode_and_schema_id_agree(schema_id: int, payload: bytes) -> None:
    assert wire.schema_id(wire.encode(schema_id, payload)) == schema_id


@given(st.lists(st.integers(0, 10_000), min_size=1, max_size=5), st.binary(max_size=8))
def test_protobuf_indexes_round_trip(indexes: list[int], payload: bytes) -> None:
    data = wire.encode(5, payload, tuple(indexes))
    found, start = wire.message_indexes(data)
    assert found == tuple(indexes)
    assert data[start:] == payload


def test_the_first_message_is_one_zero_byte() -> None:
    assert wire.encode(5, b"p", (0,)) == b"\x00\x00\x00\x00\x05\x00p"
    assert wire.message_indexes(b"\x00\x00\x00\x00\x05\x00p") == ((0,), 6)
    # count 2 (zigzag 4), indexes 1 (2) and 3 (6), as Confluent's serializer writes them
    assert wire.message_indexes(b"\x00\x00\x00\x00\x05\x04\x02\x06") == ((1, 3), 8)


@pytest.mark.parametrize("data", [b"\x00\x00\x00\x00\x05", b"\x00\x00\x00\x00\x05\x04\x02",
                                  b"\x00\x00\x00\x00\x05\x03", b"\x00\x00\x00\x00\x05\xff"])
def test_truncated_or_negative_indexes_are_a_decode_error(data: bytes) -> None:
    with pytest.raises(DecodeError):
        wire.message_indexes(data)


@given(st.binary(max_size=30))
def test_message_indexes_raise_only_decode_error(data: bytes) -> None:
    try:
        wire.message_indexes(data, 0)
    except DecodeError:
        pass
