"""The one place replication kinds are registered: name -> implementation (a
`drctl.replication.base.ReplicationKind` subclass), plus the static facts config validation
needs.

It sits beside `config.py`, not inside `drctl/replication/`, and imports nothing of drctl:
the config validates `replication.kind` against this table, and the kind modules import the
config, so a registry inside the package would make the two point at each other. The kind
objects are built on first use by `drctl.replication.base.kind_for`.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class KindEntry:
    implementation: str  # "module:Class", a `ReplicationKind` subclass
    # Config rule: `replication.rename` must keep topic names ('{topic}').
    keeps_topic_names: bool = False
    # How messages and generated configs name the kind; the kind's name when not set.
    title: str = ""
    # Config rule: the kind may run an active-active pair (`topology:`, a flow each way).
    runs_both_ways: bool = False
    # "module:Class" of the kind when Strimzi's operator owns its connectors
    # (`replication.strimzi`); "": Strimzi does not run it (a config rule).
    strimzi_implementation: str = ""

    @property
    def run_by_strimzi(self) -> bool:
        return bool(self.strimzi_implementation)


# The order is the order error messages list the kinds in.
_KINDS: dict[str, KindEntry] = {
    "replicator": KindEntry("drctl.replication.replicator:Replicator", title="Replicator"),
    "mirrormaker2": KindEntry("drctl.replication.mirrormaker2:MirrorMaker2",
                              title="MirrorMaker 2", runs_both_ways=True,
                              strimzi_implementation=(
                                  "drctl.replication.strimzi_mm2:StrimziMirrorMaker2")),
    "identity": KindEntry("drctl.replication.identity:Identity", keeps_topic_names=True),
}

KIND_NAMES: tuple[str, ...] = tuple(_KINDS)


def kind_entry(name: str) -> KindEntry:
    return _KINDS[name]


def kind_title(name: str) -> str:
    return _KINDS[name].title or name
