"""Shared by the codec tests: bytes from hex, a timestamp, Hypothesis strategies, and a
decode that returns its DecodeError instead of raising it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st

from drctl.codecs import DecodeError

TS = 1_700_000_000_123


def h(text: str) -> bytes:
    return bytes.fromhex(text.replace(" ", ""))


# Kafka strings are UTF-8: no lone surrogates.
text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)


int64 = st.integers(-(2**63), 2**63 - 1)


def outcome(decode: Callable[[bytes | None, bytes | None], Any], key: bytes | None,
            value: bytes | None) -> Any:
    try:
        return decode(key, value)
    except DecodeError as exc:
        return exc
