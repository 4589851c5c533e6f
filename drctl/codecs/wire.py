"""Kafka's internal encoding: big-endian integers; a string is an int16 length (never negative)
then that many bytes of UTF-8. Readers take (buffer, position) and return (value, new position);
every malformed input raises DecodeError, nothing else."""

from __future__ import annotations

import struct

from drctl.errors import DecodeError

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")

INT16_MAX = 2**15 - 1
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def read_int16(buf: bytes, pos: int, field: str) -> tuple[int, int]:
    if pos + 2 > len(buf):
        raise DecodeError(f"truncated at {field}: needs 2 bytes at {pos}, {len(buf)} in all")
    return _I16.unpack_from(buf, pos)[0], pos + 2


def read_int32(buf: bytes, pos: int, field: str) -> tuple[int, int]:
    if pos + 4 > len(buf):
        raise DecodeError(f"truncated at {field}: needs 4 bytes at {pos}, {len(buf)} in all")
    return _I32.unpack_from(buf, pos)[0], pos + 4


def read_int64(buf: bytes, pos: int, field: str) -> tuple[int, int]:
    if pos + 8 > len(buf):
        raise DecodeError(f"truncated at {field}: needs 8 bytes at {pos}, {len(buf)} in all")
    return _I64.unpack_from(buf, pos)[0], pos + 8


def read_string(buf: bytes, pos: int, field: str) -> tuple[str, int]:
    size, pos = read_int16(buf, pos, field)
    if size < 0:
        raise DecodeError(f"{field}: negative string length {size}")
    end = pos + size
    if end > len(buf):
        raise DecodeError(f"truncated at {field}: string of {size} bytes at {pos}, "
                          f"{len(buf)} in all")
    try:
        return buf[pos:end].decode("utf-8"), end
    except UnicodeDecodeError as exc:
        raise DecodeError(f"{field}: not UTF-8 ({exc.reason} at byte {pos + exc.start})") from None


def expect_end(buf: bytes, pos: int, what: str) -> None:
    if pos != len(buf):
        raise DecodeError(f"{what}: {len(buf) - pos} unexpected trailing byte(s)")


def int16(value: int) -> bytes:
    return _I16.pack(value)


def int32(value: int) -> bytes:
    return _I32.pack(value)


def int64(value: int) -> bytes:
    return _I64.pack(value)


def string(value: str) -> bytes:
    data = value.encode("utf-8")
    if len(data) > INT16_MAX:
        raise ValueError(f"a Kafka string holds at most {INT16_MAX} bytes, got {len(data)}")
    return _I16.pack(len(data)) + data
