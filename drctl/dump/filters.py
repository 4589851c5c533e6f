"""What a dump keeps: group and topic regexes, and the --since/--until window."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from drctl.dump.rows import DumpKind
from drctl.errors import UsageError


@dataclass(frozen=True)
class DumpFilter:
    """Whole-name regexes on group and topic; a half-open window [since, until) in epoch ms on
    the internal record's own timestamp (when it was written)."""

    group: str | None = None
    topic: str | None = None
    since_ms: int | None = None
    until_ms: int | None = None

    def validate(self, kind: DumpKind) -> None:
        if (self.group is not None
                and kind not in (DumpKind.consumer_timestamps, DumpKind.checkpoints)):
            raise UsageError(f"--groups does not apply to {kind.value} (they name no group).")
        if self.topic is not None and kind == DumpKind.heartbeats:
            raise UsageError("--topics does not apply to heartbeats (they name no topic).")
        for option, pattern in (("--groups", self.group), ("--topics", self.topic)):
            if pattern is not None:
                try:
                    re.compile(pattern)
                except re.error as exc:
                    raise UsageError(f"{option} {pattern!r} is not a valid regex: {exc}.") \
                        from None
        if (self.since_ms is not None and self.until_ms is not None
                and self.since_ms >= self.until_ms):
            raise UsageError("--since must be before --until.")

    def in_window(self, ts: int) -> bool:
        return ((self.since_ms is None or ts >= self.since_ms)
                and (self.until_ms is None or ts < self.until_ms))

    def predicate(self) -> Callable[[Any], bool] | None:
        """A test on a decoded value, or None when every value passes."""
        group = re.compile(self.group) if self.group is not None else None
        topic = re.compile(self.topic) if self.topic is not None else None
        if group is None and topic is None:
            return None

        def test(item: Any) -> bool:
            return ((group is None or group.fullmatch(item.group) is not None)
                    and (topic is None or topic.fullmatch(item.topic) is not None))
        return test
