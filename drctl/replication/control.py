"""Who owns a flow's connectors, as the kinds ask it to change them (docs/design.md §6, "Who
controls the replicator"): Kafka Connect's REST API where drctl may write to it
(`connect.ConnectRestOwner`), or Strimzi's KafkaMirrorMaker2 resource where its operator owns
them (`strimzi.StrimziControl`). A kind asks `ConnectControlled.owner(rep)`; the procedures
never know which answered.

So far the owner reads and rewrites connector configs (an application's exclusions: the
kind's `plan_leave_out`, `write_edits`, `edits_hold` are owner-agnostic). Stopping, resuming
and the reverse flow are still per owner: Connect's in `connect.ConnectControlled` and
`mirrormaker2.MirrorMaker2`, Strimzi's in `strimzi_mm2.StrimziMirrorMaker2` over
`StrimziControl.set_states`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

Edit = Callable[[dict[str, Any]], dict[str, Any]]


class ConnectorOwner(Protocol):
    """The connectors' configs, read and changed where their owner keeps them."""

    @property
    def owner(self) -> str:
        """Who it is, in words (`Kafka Connect at URL`, `Strimzi's cluster operator (...)`)."""
        ...

    def config(self, name: str) -> dict[str, Any]:
        """Connector `name`'s config as the replicator runs with it."""
        ...

    def reconfigure(self, name: str, edit: Edit) -> bool:
        """Give `name` the config `edit` makes of its own and return once the replicator
        runs with it (its state kept); False when it was so already."""
        ...

    def old_names_read(self) -> bool:
        """Whether the replicator still reads the kind's old key names (`topics.blacklist`)."""
        ...
