"""An offset snapshot, shared by the snapshot tests."""

from __future__ import annotations

import time

from drctl.translate.snapshots import OffsetSnapshot


def _snap(source: int, target: int, age_s: float = 3) -> OffsetSnapshot:
    now = int(time.time() * 1000)
    return OffsetSnapshot("g", "orders", 0, source, target, "exact", "ab" * 16,
                          now - int(age_s * 1000), now)
