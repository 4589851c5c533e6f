"""The dump's row shapes (drctl/dump/rows.py)."""

from __future__ import annotations

import json

from drctl.codecs import ConsumerTimestamp, Heartbeat, OffsetSync
from drctl.codecs.confluent import Provenance
from drctl.dump.rows import DumpKind, DumpRow, DumpStats, Undecodable


def test_row_shapes() -> None:
    ct = ConsumerTimestamp("g", "t", 1, 1714564800000, 7, "gtp", "ts+delta")
    row = DumpRow(DumpKind.consumer_timestamps, ct, 4, 10, 1714564800001,
                  Provenance(b"\x01ab", ("ab",), ()))
    data = row.as_dict()
    assert data["type"] == "consumer-timestamp"
    assert data["timestamp"] == "2024-05-01T12:00:00.000+00:00"
    assert data["record_timestamp"] == "2024-05-01T12:00:00.001+00:00"
    assert (data["delta"], data["value_layout"], data["record_offset"]) == (7, "ts+delta", 10)
    assert data["provenance"] == {"hex": "016162", "strings": ["ab"], "timestamps_ms": []}
    assert row.key() == ("g", "t", 1)
    assert DumpRow(DumpKind.offset_syncs, OffsetSync("t", 2, 5, 6), 0, 0, 0).key() == ("t", 2)
    assert DumpRow(DumpKind.heartbeats, Heartbeat("A", "B", 0), 0, 0, 0).key() == ("A", "B")
    json.dumps(data)
    bad = Undecodable(0, 3, 0, None, b"\x01", "why").as_dict()
    assert bad["type"] == "undecodable" and bad["key_hex"] is None and bad["value_hex"] == "01"
    summary = DumpStats(DumpKind.consumer_timestamps, "dc1", "__consumer_timestamps", False)
    assert "inferred" in summary.as_dict()["note"]
    assert DumpStats(DumpKind.checkpoints, "dc2", "x", True).as_dict()["note"] is None
