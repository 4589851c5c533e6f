"""The dump's filters (drctl/dump/filters.py) and their usage errors."""

from __future__ import annotations

import pytest

from drctl.codecs import Checkpoint
from drctl.dump.filters import DumpFilter
from drctl.dump.rows import DumpKind
from drctl.errors import UsageError


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
    (DumpFilter(group="g"), DumpKind.offset_syncs, "--groups does not apply"),
    (DumpFilter(group="g"), DumpKind.heartbeats, "--groups does not apply"),
    (DumpFilter(topic="t"), DumpKind.heartbeats, "--topics does not apply"),
    (DumpFilter(topic="("), DumpKind.checkpoints, "not a valid regex"),
    (DumpFilter(since_ms=5, until_ms=5), DumpKind.checkpoints, "--since must be before"),
])
def test_filter_usage_errors(filt: DumpFilter, kind: DumpKind, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        filt.validate(kind)
