"""Who owns a flow's connectors, as the kinds ask it to change them (docs/design.md §6, "Who
controls the replicator"): Kafka Connect's REST API where drctl may write to it
(`connect.ConnectRestOwner`), or Strimzi's KafkaMirrorMaker2 resource where its operator owns
them (`strimzi.StrimziControl`). A kind asks `ConnectControlled.owner(rep)`; the procedures
never know which answered.

Through the owner so far: reading the forward flow's connectors (`forward_state`,
`component_states`), resuming
them (`resume_forward`, `resume_components`), and their configs (an application's
exclusions: `plan_leave_out`, `write_edits`, `edits_hold`). Still per owner: the stop (with
Connect's own rules for a worker that holds it or does not answer), the reverse flow and the
offsets — Connect's in `connect.ConnectControlled` and `mirrormaker2.MirrorMaker2`, Strimzi's
in `strimzi_mm2.StrimziMirrorMaker2`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from drctl.replication.connect import ConnectorReading

Edit = Callable[[dict[str, Any]], dict[str, Any]]


class ConnectorOwner(Protocol):
    """The connectors' configs, read and changed where their owner keeps them."""

    @property
    def owner(self) -> str:
        """Who it is, in words (`Kafka Connect at URL`, `Strimzi's cluster operator (...)`)."""
        ...

    def readings(self, names: Sequence[str]) -> list[ConnectorReading]:
        """Each connector as Connect reports it now (MISSING when there is none)."""
        ...

    def set_states(self, wanted: Mapping[str, str], *, what: str) -> list[ConnectorReading]:
        """Each connector (name -> running|paused|stopped) set so, and confirmed so as Connect
        reports it (never as asked); the readings then. `what`: the change, in words."""
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
