"""Java `.properties` files as Kafka reads them (`java.util.Properties.load`): a cluster's
`client_properties:` file and the files `${file:path:key}` references name."""

from __future__ import annotations

import re
from pathlib import Path

_BLANK = " \t\f"
_ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{4}|.)", re.DOTALL)
_ESCAPED = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def read_properties(path: Path) -> dict[str, str]:
    """The properties in `path` (UTF-8, as Kafka 9+ reads them); OSError when unreadable."""
    return parse_properties(path.read_text(encoding="utf-8"))


def parse_properties(text: str) -> dict[str, str]:
    props: dict[str, str] = {}
    for line in _logical_lines(text):
        key, value = _split(line)
        props[_unescape(key)] = _unescape(value)
    return props


def _split(line: str) -> tuple[str, str]:
    """The key ends at the first unescaped '=', ':' or whitespace; whitespace around one '=' or
    ':' separates it from the value (a key alone has an empty value)."""
    end = 0
    while end < len(line) and line[end] not in "=:" + _BLANK:
        end += 2 if line[end] == "\\" else 1
    end = min(end, len(line))
    rest = line[end:].lstrip(_BLANK)
    if rest and rest[0] in "=:":
        rest = rest[1:].lstrip(_BLANK)
    return line[:end], rest


def _logical_lines(text: str) -> list[str]:
    """Comments and blank lines dropped; a line ending in an odd number of backslashes joined
    with the next (whose leading whitespace is dropped)."""
    lines: list[str] = []
    pending: str | None = None
    for raw in text.splitlines():
        line = raw.lstrip(_BLANK)
        if pending is None and (not line or line[0] in "#!"):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        continued = trailing % 2 == 1
        if continued:
            line = line[:-1]
        pending = line if pending is None else pending + line
        if not continued:
            lines.append(pending)
            pending = None
    if pending is not None:
        lines.append(pending)
    return lines


def _unescape(text: str) -> str:
    def replace(m: re.Match[str]) -> str:
        code = m.group(1)
        if len(code) == 5:
            return chr(int(code[1:], 16))
        return _ESCAPED.get(code, code)

    return _ESCAPE.sub(replace, text)
