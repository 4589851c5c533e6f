"""Translation methods, one unit each, keyed by `TranslateMethod` (docs/design.md §3): each
places the positions it is given on the target and says how sure it is. The engine
(translate/engine.py) chooses the method, reads the positions and applies the results.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from drctl.kafka.clients import ClusterClients
from drctl.kafka.topics import TP
from drctl.translate.model import PartitionResult, TranslateMethod


@dataclass
class Placing:
    """What a method works with: both clusters, the target's (low, end) per partition —
    the end no later than F during a failover — and what the method reads of its own."""

    src: ClusterClients
    dst: ClusterClients
    dst_marks: dict[TP, tuple[int, int]]
    source_up: bool
    max_scan: int = 100_000
    # Records carrying this header were written by drctl itself (reconciled gap copies).
    own_copy_header: str | None = None
    snapshots: dict[tuple[str, str, int], Any] = field(default_factory=dict)
    checkpoints: dict[tuple[str, str, int], Any] = field(default_factory=dict)


Method = Callable[[Placing, list[PartitionResult]], None]

_MODULES = {TranslateMethod.EXACT: "exact", TranslateMethod.TIMESTAMP: "timestamp",
            TranslateMethod.CHECKPOINT: "checkpoint", TranslateMethod.SNAPSHOT: "snapshot",
            TranslateMethod.IDENTITY: "identity"}


def method_for(method: TranslateMethod) -> Method:
    """The unit that places positions by `method` (never `auto`: the engine resolves it)."""
    module = importlib.import_module(f"drctl.translate.methods.{_MODULES[method]}")
    place: Method = module.place
    return place
