"""The pure parts of the dump: where topics live, filters, row shapes, and the
command's usage errors (raised before any cluster is contacted)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from drctl.cli import dump_cmd
from drctl.cli.state import CURRENT
from drctl.codecs import Checkpoint, ConsumerTimestamp, Heartbeat, OffsetSync
from drctl.codecs.confluent import Provenance
from drctl.config import parse_config
from drctl.dump.filters import DumpFilter
from drctl.dump.reader import Location, resolve_location
from drctl.dump.rows import DumpKind, DumpRow, DumpStats, Undecodable
from drctl.errors import UsageError

CONFIG = {
    "clusters": {"dc1": {"bootstrap.servers": "127.0.0.1:1"},
                 "dc2": {"bootstrap.servers": "127.0.0.1:2"}},
    "replication": {"kind": "mirrormaker2", "source": "dc1", "target": "dc2",
                    "source_alias": "A", "target_alias": "B"},
}


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


def test_filters() -> None:
    filt = DumpFilter(group="app-.*", topic="orders", since_ms=100, until_ms=200)
    filt.validate(DumpKind.checkpoints)
    test = filt.predicate()
    assert test is not None
    assert test(Checkpoint("app-1", "orders", 0, 1, 1))
    assert not test(Checkpoint("xapp-1", "orders", 0, 1, 1))  # whole names
    assert not test(Checkpoint("app-1", "orders2", 0, 1, 1))
    assert filt.in_window(100) and filt.in_window(199)
    assert not filt.in_window(99) and not filt.in_window(200)
    assert DumpFilter().predicate() is None


@pytest.mark.parametrize(("filt", "kind", "message"), [
    (DumpFilter(group="g"), DumpKind.offset_syncs, "--group does not apply"),
    (DumpFilter(group="g"), DumpKind.heartbeats, "--group does not apply"),
    (DumpFilter(topic="t"), DumpKind.heartbeats, "--topic does not apply"),
    (DumpFilter(topic="("), DumpKind.checkpoints, "not a valid regex"),
    (DumpFilter(since_ms=5, until_ms=5), DumpKind.checkpoints, "--since must be before"),
])
def test_filter_usage_errors(filt: DumpFilter, kind: DumpKind, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        filt.validate(kind)


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


def _app() -> typer.Typer:
    app = typer.Typer()
    app.command("dump-consumer-timestamps")(dump_cmd.dump_consumer_timestamps)

    @app.callback()
    def root() -> None:
        """A root, so the command is a subcommand as in drctl."""
    return app


@pytest.mark.parametrize(("args", "message"), [
    (["--kind", "heartbeats", "--group", "g"], "--group does not apply"),
    (["--since", "soon"], "neither an ISO time"),
    (["--group", "("], "not a valid regex"),
])
def test_cli_usage_errors_before_any_connection(tmp_path: Path, args: list[str],
                                                message: str) -> None:
    config = tmp_path / "drctl.yaml"
    config.write_text(json.dumps(CONFIG))
    CURRENT.reset()
    CURRENT.config_option = str(config)
    result = CliRunner().invoke(_app(), ["dump-consumer-timestamps", *args])
    assert isinstance(result.exception, UsageError)
    assert message in result.exception.message
