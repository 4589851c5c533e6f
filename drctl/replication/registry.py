"""The one place replication kinds are registered: name -> implementation, plus the static
facts config validation needs.

Implementations are imported on first use, so `drctl/config.py` reads this table without
importing Kafka code (and without a cycle: the kind modules import the config).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from drctl.replication.base import ReplicationKind


@dataclass(frozen=True)
class KindEntry:
    implementation: str  # "module:Class", a `ReplicationKind` subclass
    # Config rule: `replication.rename` must keep topic names ('{topic}').
    keeps_topic_names: bool = False


# The order is the order error messages list the kinds in.
_KINDS: dict[str, KindEntry] = {
    "replicator": KindEntry("drctl.replication.replicator:Replicator"),
    "mirrormaker2": KindEntry("drctl.replication.mirrormaker2:MirrorMaker2"),
    "identity": KindEntry("drctl.replication.identity:Identity", keeps_topic_names=True),
}

KIND_NAMES: tuple[str, ...] = tuple(_KINDS)


class _HasKind(Protocol):
    @property
    def kind(self) -> str: ...


def kind_entry(name: str) -> KindEntry:
    return _KINDS[name]


@cache
def kind_named(name: str) -> ReplicationKind:
    module_name, _, class_name = _KINDS[name].implementation.partition(":")
    kind: ReplicationKind = getattr(importlib.import_module(module_name), class_name)()
    return kind


def kind_for(settings: _HasKind) -> ReplicationKind:
    """The kind object of a replication flow (`ReplicationSettings`, validated by the config
    parser, so its kind is registered)."""
    return kind_named(settings.kind)
