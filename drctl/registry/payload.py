"""Whether a registry-encoded key or value decodes with a schema, and the record name a schema
is filed under with RecordNameStrategy (`<record>`) or TopicRecordNameStrategy
(`<topic>-<record>`): what tells an id filed under a record-name subject from bytes that
merely start like one (Kafka's `LongSerializer` writes 50,000,000 as `00 00 00 00 02 ...`,
"schema id 2").

- Avro: the binary encoding walked to its last byte over the schema's Parsing Canonical Form
  (every name full); the record name is the top-level named type's full name.
- JSON Schema: the payload is one JSON document; the record name is the schema's `title`.
- Protobuf: the message indexes, then fields of Protobuf's wire types to the last byte; the
  record name is the package and the message the indexes point at.

`decodes` answers None where drctl cannot tell (a type named in a reference, a schema that
does not parse as its type says): such an id is counted, as a real one would be.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from drctl.errors import DecodeError
from drctl.registry import wire
from drctl.registry.canonical import AVRO, JSON, PROTOBUF, Schema

_NAMED = ("record", "error", "enum", "fixed")
# Deeper than any schema nests, more items than a sampled record holds: not worth reading on.
_MAX_DEPTH = 200
_MAX_ITEMS = 1_000_000
_INT = 2**31


class _CannotTell(Exception):
    """The bytes cannot be judged with what drctl has of the schema."""


def decodes(schema: Schema, data: bytes) -> bool | None:
    """Whether `data` (a key or value, its 5-byte header included) decodes with `schema`
    exactly to its last byte; None when drctl cannot tell."""
    payload = data[wire.HEADER_BYTES:]
    root: Any = None
    if schema.type == AVRO:
        try:
            root = json.loads(schema.canonical)
        except ValueError:
            return None  # not Avro as drctl reads it
    try:
        if schema.type == AVRO:
            reader = _AvroReader(root, payload)
            reader.read(root, 0)
            return reader.pos == len(payload)
        if schema.type == JSON:
            json.loads(payload.decode())
            return True
        if schema.type == PROTOBUF:
            _protobuf_fields(data, wire.message_indexes(data)[1])
            return True
    except (DecodeError, UnicodeDecodeError, json.JSONDecodeError):
        return False  # the bytes are not what the schema reads
    except (_CannotTell, ValueError, KeyError, TypeError, AttributeError):
        return None  # the schema is not what drctl reads (its text, a reference)
    return None


def record_name(schema: Schema, data: bytes) -> str | None:
    """The name RecordNameStrategy files `schema` under (with Protobuf, the message `data`'s
    indexes name); None when it has none (an Avro primitive, a JSON Schema without title)."""
    try:
        if schema.type == AVRO:
            root = json.loads(schema.canonical)
            named = isinstance(root, dict) and root.get("type") in _NAMED
            return str(root["name"]) if named else None
        if schema.type == JSON:
            title = json.loads(schema.text).get("title")
            return title if isinstance(title, str) and title else None
        if schema.type == PROTOBUF:
            return _protobuf_message(schema.canonical, wire.message_indexes(data)[0])
    except (DecodeError, ValueError, KeyError, TypeError, AttributeError):
        pass
    return None


class _AvroReader:
    """Avro's binary encoding read over a schema in Parsing Canonical Form, values skipped."""

    def __init__(self, root: Any, data: bytes) -> None:
        self.names: dict[str, Any] = {}
        _avro_names(root, self.names)
        self.data = data
        self.pos = 0

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise DecodeError(f"{n} bytes wanted at byte {self.pos} of {len(self.data)}")
        self.pos += n
        return self.data[self.pos - n:self.pos]

    def long(self) -> int:
        value, self.pos = wire.zigzag_varint(self.data, self.pos)
        return value

    def read(self, node: Any, depth: int) -> None:
        if depth > _MAX_DEPTH:
            raise _CannotTell("nested too deep")
        if isinstance(node, list):  # a union: the branch's index, then the branch
            branch = self.long()
            if not 0 <= branch < len(node):
                raise DecodeError(f"union branch {branch} of {len(node)}")
            self.read(node[branch], depth + 1)
        elif isinstance(node, str):
            self.primitive(node, depth)
        elif node["type"] in ("record", "error"):
            for f in node["fields"]:
                self.read(f["type"], depth + 1)
        elif node["type"] == "enum":
            if not 0 <= self.long() < len(node["symbols"]):
                raise DecodeError("enum symbol out of range")
        elif node["type"] == "fixed":
            self.take(int(node["size"]))
        elif node["type"] == "array":
            self.blocks(lambda: self.read(node["items"], depth + 1))
        elif node["type"] == "map":
            self.blocks(lambda: self.entry(node["values"], depth))
        else:  # a primitive with a logical type, or a type nested in "type"
            self.read(node["type"], depth + 1)

    def entry(self, values: Any, depth: int) -> None:
        """A map's entry: its key, a string, then its value."""
        self.primitive("string", depth)
        self.read(values, depth + 1)

    def primitive(self, name: str, depth: int) -> None:
        if name == "null":
            return
        if name == "boolean":
            if self.take(1)[0] > 1:
                raise DecodeError("a boolean other than 0 or 1")
        elif name == "int":
            if not -_INT <= self.long() < _INT:
                raise DecodeError("an int beyond 32 bits")
        elif name == "long":
            self.long()
        elif name == "float":
            self.take(4)
        elif name == "double":
            self.take(8)
        elif name in ("bytes", "string"):
            data = self.take(self.long())
            if name == "string":
                data.decode()
        elif name in self.names:
            self.read(self.names[name], depth + 1)
        else:
            raise _CannotTell(f"{name} is defined in a reference")

    def blocks(self, item: Callable[[], object]) -> None:
        """An array's or map's blocks: a count (negative: followed by the block's size in
        bytes), that many items, until a count of 0."""
        total = 0
        while count := self.long():
            if count < 0:
                count = -count
                self.long()
            total += count
            if total > _MAX_ITEMS:
                raise _CannotTell("more items than a record holds")
            for _ in range(count):
                item()


def _avro_names(node: Any, out: dict[str, Any]) -> None:
    """Every named type defined in `node` (canonical form: names are full) by its name."""
    if isinstance(node, list):
        for branch in node:
            _avro_names(branch, out)
    elif isinstance(node, dict):
        if node.get("type") in _NAMED:
            out[node["name"]] = node
        for f in node.get("fields", ()):
            _avro_names(f["type"], out)
        for key in ("items", "values", "type"):
            if not isinstance(node.get(key), str):
                _avro_names(node.get(key), out)


def _protobuf_fields(data: bytes, pos: int) -> None:
    """Fields of Protobuf's wire types from `pos` to the last byte (DecodeError if not)."""
    while pos < len(data):
        key, pos = wire.varint(data, pos)
        number, kind = key >> 3, key & 7
        if number == 0:
            raise DecodeError("field number 0")
        if kind == 0:
            _, pos = wire.varint(data, pos)
        elif kind == 1:
            pos += 8
        elif kind == 2:
            size, pos = wire.varint(data, pos)
            pos += size
        elif kind == 5:
            pos += 4
        elif kind not in (3, 4):  # a proto2 group's start or end carries nothing itself
            raise DecodeError(f"wire type {kind}")
        if pos > len(data):
            raise DecodeError("a field runs past the end")


_PROTO_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'')
_PROTO_BLOCK = re.compile(r"\bpackage\s+([\w.]+)\s*;|\bmessage\s+(\w+)\s*\{|[{}]")


def _protobuf_message(text: str, indexes: tuple[int, ...]) -> str | None:
    """The full name of the message `indexes` point at in a .proto: the index of a top-level
    message, then of a message nested in it, and so on."""
    package = ""
    top: list[tuple[str, list[Any]]] = []
    # Where messages defined next go; None inside a block that holds none (enum, oneof...).
    stack: list[list[tuple[str, list[Any]]] | None] = [top]
    for m in _PROTO_BLOCK.finditer(_PROTO_STRING.sub('""', text)):
        if m.group(1):
            package = m.group(1)
        elif m.group(2):
            nested: list[tuple[str, list[Any]]] = []
            container = stack[-1]
            if container is not None:
                container.append((m.group(2), nested))
            stack.append(nested)
        elif m.group(0) == "{":
            stack.append(None)
        elif len(stack) > 1:
            stack.pop()
        else:
            return None  # a `}` too many: not a .proto drctl reads
    path, level = [], top
    for index in indexes:
        if index >= len(level):
            return None
        name, level = level[index]
        path.append(name)
    return ".".join([package, *path] if package else path)
