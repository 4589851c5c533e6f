"""Failover markers (drctl/state.py): they round-trip with their steps; a newer schema
is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from drctl.state import FailoverMarker, MarkerStore


def test_marker_round_trips_and_records_steps(tmp_path: Path) -> None:
    store = MarkerStore(tmp_path, "_drctl_state", None)
    marker = FailoverMarker.new("primary", "secondary", "mirrormaker2", planned=False)
    marker.failover_point = {"orders": {0: 10, 1: 20}}
    marker.record("stop-replication", {"state": "pending"})
    store.save(marker)
    [loaded] = store.open_markers("primary", "secondary")
    assert loaded.incident == marker.incident
    assert loaded.failover_point == {"orders": {0: 10, 1: 20}}  # int partitions again
    assert loaded.done("stop-replication") and not loaded.done("failover-point")
    assert store.open_markers("secondary", "primary") == []
    loaded.status = "closed"
    store.save(loaded)
    assert store.open_markers() == []
    assert not list(tmp_path.glob("markers/*.tmp"))  # written atomically


def test_newer_marker_schema_is_refused() -> None:
    with pytest.raises(Exception, match="newer drctl"):
        FailoverMarker.from_json(json.dumps({"incident": "x", "schema": 99}))
