"""Schemas as a registry returns them, and the canonical form two registries' copies are
compared in: equal canonical forms decode the same bytes to the same data.

- Avro: the spec's Parsing Canonical Form (full names; only name, type, fields, symbols,
  items, values and size; fixed key order; no white space) — keeping logicalType, precision
  and scale, which the spec strips: a `bytes` that is a decimal(10,2) on one side and plain
  bytes on the other reads the same bytes as different data.
- JSON Schema: the JSON with sorted keys and no white space.
- Protobuf: the text without comments and with white space folded (layout is no meaning).
A text that does not parse as its type says is compared with its white space folded.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

AVRO, JSON, PROTOBUF = "AVRO", "JSON", "PROTOBUF"

_PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes",
                         "string"})
_NAMED = frozenset({"record", "error", "enum", "fixed"})
# Parsing Canonical Form's attributes in its order, then what drctl keeps beside them.
_KEPT = ("name", "type", "fields", "symbols", "items", "values", "size", "logicalType",
         "precision", "scale")
_LOGICAL = ("logicalType", "precision", "scale")


@dataclass(frozen=True)
class Reference:
    """A schema another one imports (Protobuf imports, Avro and JSON Schema references)."""

    name: str
    subject: str
    version: int


@dataclass(frozen=True)
class Schema:
    type: str  # AVRO, JSON or PROTOBUF (Confluent's API leaves it out for Avro)
    text: str
    references: tuple[Reference, ...] = ()

    @classmethod
    def from_registry(cls, raw: Mapping[str, Any]) -> Schema:
        """From `GET /schemas/ids/N` or a subject version's answer."""
        refs = tuple(Reference(str(r.get("name", "")), str(r.get("subject", "")),
                               int(r.get("version", 0))) for r in raw.get("references") or ())
        return cls(str(raw.get("schemaType") or AVRO).upper(), str(raw.get("schema", "")),
                   refs)

    @cached_property
    def canonical(self) -> str:
        return canonical_form(self.type, self.text)

    def same_as(self, other: Schema) -> bool:
        """Whether `other`'s own text decodes as this one's: same type, canonical form and
        reference names (what the text imports). What each reference holds is fetched from
        each registry and compared in turn by `parity.difference`: subjects and versions are
        each registry's own, and same-named references may hold different schemas."""
        return (self.type == other.type and self.canonical == other.canonical
                and {r.name for r in self.references} == {r.name for r in other.references})

    def as_registered(self) -> dict[str, Any]:
        """The body that registers it (`POST /subjects/S/versions`)."""
        body: dict[str, Any] = {"schema": self.text}
        if self.type != AVRO:
            body["schemaType"] = self.type
        if self.references:
            body["references"] = [{"name": r.name, "subject": r.subject, "version": r.version}
                                  for r in self.references]
        return body


def canonical_form(schema_type: str, text: str) -> str:
    try:
        if schema_type == AVRO:
            return _dumps(_avro(json.loads(text), None))
        if schema_type == JSON:
            return json.dumps(json.loads(text), sort_keys=True, separators=(",", ":"),
                              ensure_ascii=False)
    except (ValueError, TypeError, KeyError, AttributeError):
        pass  # not what its type says: compared as text
    if schema_type == PROTOBUF:
        return _protobuf(text)
    return " ".join(text.split())


def _dumps(node: Any) -> str:
    return json.dumps(node, separators=(",", ":"), ensure_ascii=False)


def _fullname(name: str, namespace: str | None) -> str:
    return name if "." in name or not namespace else f"{namespace}.{name}"


def _avro(node: Any, namespace: str | None) -> Any:
    if isinstance(node, str):
        return node if node in _PRIMITIVES else _fullname(node, namespace)
    if isinstance(node, list):
        return [_avro(branch, namespace) for branch in node]
    if not isinstance(node, dict):
        raise TypeError(f"not an Avro schema: {node!r}")
    kind = node["type"]
    if isinstance(kind, str) and kind in _PRIMITIVES and not any(k in node for k in _LOGICAL):
        return kind  # {"type": "int"} is "int"
    out: dict[str, Any] = {}
    if kind in _NAMED:
        name = _fullname(node["name"], node.get("namespace") or namespace)
        out["name"] = name
        namespace = name.rpartition(".")[0] or None  # what names inside it are relative to
    for key in _KEPT[1:]:
        if key not in node:
            continue
        value = node[key]
        if key == "type":
            out[key] = value if isinstance(value, str) and (value in _NAMED or value in (
                "array", "map") or value in _PRIMITIVES) else _avro(value, namespace)
        elif key == "fields":
            out[key] = [{"name": f["name"], "type": _avro(f["type"], namespace)} for f in value]
        elif key in ("items", "values"):
            out[key] = _avro(value, namespace)
        else:
            out[key] = value
    return out


# A string literal, a comment, or anything else, in one pass (so `//` in a string stays).
_PROTO_TOKEN = re.compile(r'("(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\')|//[^\n]*|/\*.*?\*/',
                          re.DOTALL)
_PROTO_PUNCT = re.compile(r"\s*([{}()\[\];=<>,])\s*")


def _protobuf(text: str) -> str:
    out, code, last = [], [], 0
    for m in _PROTO_TOKEN.finditer(text):
        code.append(text[last:m.start()])
        if m.group(1):  # a string literal, kept as it is
            out += [_proto_layout("".join(code)), m.group(1)]
            code = []
        else:
            code.append(" ")  # a comment is white space
        last = m.end()
    code.append(text[last:])
    out.append(_proto_layout("".join(code)))
    return "".join(out)


def _proto_layout(code: str) -> str:
    return _PROTO_PUNCT.sub(r"\1", " ".join(code.split()))
