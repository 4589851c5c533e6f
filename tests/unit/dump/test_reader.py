"""Where the dumped topics live (drctl/dump/reader.py): MirrorMaker 2's and Confluent's
defaults, or names given explicitly."""

from __future__ import annotations

import pytest

from drctl.config import parse_config
from drctl.dump.reader import Location, resolve_location
from drctl.dump.rows import DumpKind
from drctl.errors import UsageError
from tests.unit.dump.support import CONFIG


def test_default_locations_follow_mm2_and_confluent_defaults() -> None:
    rep = parse_config(CONFIG).replication
    assert resolve_location(DumpKind.consumer_timestamps, rep) == \
        Location("dc1", "__consumer_timestamps")
    assert resolve_location(DumpKind.checkpoints, rep) == Location("dc2", "A.checkpoints.internal")
    assert resolve_location(DumpKind.offset_syncs, rep) == \
        Location("dc1", "mm2-offset-syncs.B.internal")
    assert resolve_location(DumpKind.heartbeats, rep) == Location("dc2", "heartbeats")
    assert resolve_location(DumpKind.checkpoints, rep, "dc1", "x") == Location("dc1", "x")


def test_locations_without_replication_need_explicit_names() -> None:
    assert resolve_location(DumpKind.consumer_timestamps, None, "dc1") == \
        Location("dc1", "__consumer_timestamps")
    with pytest.raises(UsageError, match="which cluster"):
        resolve_location(DumpKind.heartbeats, None)
    with pytest.raises(UsageError, match="source alias"):
        resolve_location(DumpKind.checkpoints, None, "dc2")
