"""The schema-registry wire format (Confluent's serializers, and Apicurio's in their
Confluent mode): magic byte 0, the schema id as a 4-byte big-endian int, then the payload;
Protobuf puts its message indexes before the payload. Pure functions over bytes."""

from __future__ import annotations

import struct

from drctl.errors import DecodeError

MAGIC = 0
HEADER_BYTES = 5
_ID = struct.Struct(">I")
# More message indexes than any .proto nests messages deep: the bytes are no index list.
_MAX_INDEXES = 64


def schema_id(data: bytes | None) -> int | None:
    """The schema id `data` starts with, or None when it is not registry-encoded: null,
    shorter than the header, another first byte, or id 0 (registries number from 1; a
    binary value that merely starts with five zero bytes carries no id)."""
    if data is None or len(data) < HEADER_BYTES or data[0] != MAGIC:
        return None
    found = int(_ID.unpack_from(data, 1)[0])
    # Ids are Java ints: a value with the top bit set is no id a registry gave out.
    return found if 0 < found < 2**31 else None


def message_indexes(data: bytes, pos: int = HEADER_BYTES) -> tuple[tuple[int, ...], int]:
    """(message indexes, where the payload starts) of Protobuf-encoded bytes: a zigzag
    varint count, then that many zigzag varint indexes into the .proto's messages; a lone
    count of 0 means the first message, [0]."""
    count, pos = zigzag_varint(data, pos)
    if count == 0:
        return (0,), pos
    if not 0 < count <= _MAX_INDEXES:
        raise DecodeError(f"{count} message indexes")
    indexes = []
    for _ in range(count):
        index, pos = zigzag_varint(data, pos)
        if index < 0:
            raise DecodeError(f"negative message index {index}")
        indexes.append(index)
    return tuple(indexes), pos


def zigzag_varint(data: bytes, pos: int) -> tuple[int, int]:
    """(the signed varint at `pos`, Avro's int and long and Protobuf's sint, where the next
    byte is)."""
    raw, pos = varint(data, pos)
    return (raw >> 1) ^ -(raw & 1), pos


def varint(data: bytes, pos: int) -> tuple[int, int]:
    """(the unsigned base-128 varint at `pos`, where the next byte is)."""
    raw, shift = 0, 0
    while True:
        if pos >= len(data):
            raise DecodeError(f"truncated varint at byte {pos}")
        byte = data[pos]
        pos += 1
        raw |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return raw, pos
        shift += 7
        if shift > 63:
            raise DecodeError("varint longer than 10 bytes")


def encode(schema_id_: int, payload: bytes, indexes: tuple[int, ...] | None = None) -> bytes:
    """The bytes a serializer writes (for tests and the lab)."""
    head = bytes([MAGIC]) + _ID.pack(schema_id_)
    if indexes is None:
        return head + payload
    if indexes == (0,):
        return head + b"\x00" + payload
    return head + b"".join(_zigzag(n) for n in (len(indexes), *indexes)) + payload


def _zigzag(value: int) -> bytes:
    raw = (value << 1) ^ (value >> 63)
    out = bytearray()
    while True:
        byte = raw & 0x7F
        raw >>= 7
        if raw:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)
