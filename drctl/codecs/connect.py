"""Kafka Connect source offsets, as stored in a worker's offsets topic (MirrorMaker 2 and
Replicator alike): key = JSON `["<connector>", {partition map}]`, value = JSON offset map or
null (a null resets that partition). MM2's partition map is {cluster, partition, topic} and its
offset map is {"offset": N}, N being the upstream offset of the last record copied."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from drctl.errors import DecodeError


@dataclass(frozen=True, slots=True)
class SourceOffset:
    connector: str
    partition: dict[str, Any]
    offset: dict[str, Any] | None  # None: a tombstone, the partition's offset was reset

    @property
    def mm2_offset(self) -> int | None:
        """MM2's stored upstream offset (the task resumes at it + 1), or None."""
        if self.offset is None:
            return None
        value = self.offset.get("offset")
        return value if isinstance(value, int) and not isinstance(value, bool) else None


def _json(data: bytes, what: str) -> Any:
    try:
        return json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise DecodeError(f"{what}: not UTF-8 ({exc.reason})") from None
    except (ValueError, RecursionError) as exc:
        raise DecodeError(f"{what}: not JSON ({exc})") from None


def decode_source_offset(key: bytes | None, value: bytes | None) -> SourceOffset:
    if key is None:
        raise DecodeError("source offset: null key")
    parsed = _json(key, "source offset key")
    if (not isinstance(parsed, list) or len(parsed) != 2 or not isinstance(parsed[0], str)
            or not isinstance(parsed[1], dict)):
        raise DecodeError('source offset key: expected ["<connector>", {partition}]')
    offset = None
    if value is not None:
        offset = _json(value, "source offset value")
        if not isinstance(offset, dict):
            raise DecodeError("source offset value: expected a JSON object")
    return SourceOffset(parsed[0], parsed[1], offset)


def encode_source_offset(entry: SourceOffset) -> tuple[bytes, bytes | None]:
    """Compact JSON, as Connect's JsonConverter (schemas disabled) writes it."""
    key = json.dumps([entry.connector, entry.partition], separators=(",", ":"))
    value = None if entry.offset is None else json.dumps(entry.offset, separators=(",", ":"))
    return key.encode(), None if value is None else value.encode()


def mm2_source_offset(connector: str, source_alias: str, topic: str, partition: int,
                      offset: int | None) -> SourceOffset:
    return SourceOffset(connector, {"cluster": source_alias, "partition": partition,
                                    "topic": topic},
                        None if offset is None else {"offset": offset})
