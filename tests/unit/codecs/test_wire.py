"""Kafka's wire primitives (drctl/codecs/wire.py): a negative string length and bad UTF-8
are refused."""

from __future__ import annotations

import pytest

from drctl.codecs import (
    DecodeError,
    decode_offset_sync,
)
from tests.unit.codecs.support import h


def test_negative_string_length_and_bad_utf8() -> None:
    with pytest.raises(DecodeError, match="negative string length"):
        decode_offset_sync(h("ffff 0000 0000"), bytes(16))
    with pytest.raises(DecodeError, match="not UTF-8"):
        decode_offset_sync(h("0002 c328 0000 0000"), bytes(16))
