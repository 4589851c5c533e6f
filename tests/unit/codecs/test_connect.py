"""Kafka Connect source offsets (drctl/codecs/connect.py): JSON keys and values,
tombstones, bad shapes, and round trips."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from drctl.codecs import (
    DecodeError,
    SourceOffset,
    decode_source_offset,
    encode_source_offset,
)
from drctl.codecs.connect import mm2_source_offset
from tests.unit.codecs.support import text


def test_mm2_source_offset_json() -> None:
    key = b'["mm2-primary-secondary-source",{"cluster":"primary","partition":2,"topic":"orders"}]'
    entry = decode_source_offset(key, b'{"offset":41}')
    assert entry.connector == "mm2-primary-secondary-source"
    assert entry.partition == {"cluster": "primary", "partition": 2, "topic": "orders"}
    assert entry.mm2_offset == 41
    assert entry == mm2_source_offset("mm2-primary-secondary-source", "primary", "orders", 2,
                                      41)
    assert encode_source_offset(entry) == (key, b'{"offset":41}')


def test_source_offset_tombstone_and_bad_shapes() -> None:
    reset = decode_source_offset(b'["c",{"p":1}]', None)
    assert reset.offset is None and reset.mm2_offset is None
    assert encode_source_offset(SourceOffset("c", {"p": 1}, None)) == (b'["c",{"p":1}]', None)
    for key in (b'{"c":1}', b'["c"]', b'[1,{}]', b"not json", b"\xff"):
        with pytest.raises(DecodeError):
            decode_source_offset(key, b'{"offset":1}')
    with pytest.raises(DecodeError, match="JSON object"):
        decode_source_offset(b'["c",{}]', b"[1]")
    assert decode_source_offset(b'["c",{}]', b'{"offset":true}').mm2_offset is None


json_scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**63), 2**63 - 1), text)


json_maps = st.dictionaries(text, json_scalars, max_size=5)


@given(text, json_maps, st.one_of(st.none(), json_maps))
def test_source_offset_round_trip(connector: str, partition: dict[str, Any],
                                  offset: dict[str, Any] | None) -> None:
    entry = SourceOffset(connector, partition, offset)
    key, value = encode_source_offset(entry)
    assert decode_source_offset(key, value) == entry
