"""Plain JSON-able data from the values drctl's results hold (dates, paths, enums, bytes)."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import date, datetime
from enum import Enum
from pathlib import Path
from typing import Any

# Values that are JSON as they are: the leaves of every result, checked first.
_PLAIN = frozenset({str, int, float, bool, type(None)})


def to_jsonable(value: Any) -> Any:
    if type(value) in _PLAIN:
        return value
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, bytes):
        return value.hex()
    return value


# A list or mapping longer than this is written one compact item (or member) per line:
# Python's indenting JSON encoder is pure Python, and a translation of 160,000 positions
# (a failover's marker holds its 10,000 groups) took seconds in it.
LONG = 200


def dumps_readable(value: Any, *, indent: int = 0, sort_keys: bool = False,
                   default: Callable[[Any], Any] | None = None) -> str:
    """JSON as `json.dumps(indent=2)` writes it, nested `indent` levels deep, except that a
    long list or mapping, wherever it is, is written one compact item or member per line
    (the C encoder)."""
    pad = "  " * indent
    compact = json.JSONEncoder(separators=(",", ":"), sort_keys=sort_keys,
                               default=default).encode
    if isinstance(value, list) and len(value) > LONG:
        return "[\n" + ",\n".join(f"{pad}  {compact(item)}" for item in value) + f"\n{pad}]"
    if isinstance(value, dict) and value and _holds_long(value):
        keys = sorted(value, key=str) if sort_keys else list(value)
        if len(value) > LONG:
            members = [f"{pad}  {json.dumps(str(k))}:{compact(value[k])}" for k in keys]
        else:
            members = [f"{pad}  {json.dumps(str(k))}: " + dumps_readable(
                value[k], indent=indent + 1, sort_keys=sort_keys, default=default)
                for k in keys]
        return "{\n" + ",\n".join(members) + f"\n{pad}}}"
    text = json.dumps(value, indent=2, sort_keys=sort_keys, default=default)
    return text.replace("\n", "\n" + pad) if pad else text


def _holds_long(value: Any) -> bool:
    """A list or mapping longer than LONG in `value`, at any depth (short containers are
    looked into; a long one answers at once)."""
    if isinstance(value, list | dict):
        if len(value) > LONG:
            return True
        return any(_holds_long(v) for v in (value.values() if isinstance(value, dict)
                                            else value))
    return False
