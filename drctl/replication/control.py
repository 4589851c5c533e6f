"""Who owns a flow's connectors, as the kinds ask it to change them (docs/design.md §6, "Who
controls the replicator"): Kafka Connect's REST API where drctl may write to it
(`connect.ConnectRestOwner`), or Strimzi's KafkaMirrorMaker2 resource where its operator owns
them (`strimzi.StrimziControl`). A kind asks `ConnectControlled.owner(rep)`; the procedures
never know which answered. What either reports of a connector is a `ConnectorReading` (here:
Connect's status JSON, whichever owner passed it on).

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
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol

from drctl.kafka.connect_rest import ConnectClient, ConnectorMissing

Edit = Callable[[dict[str, Any]], dict[str, Any]]

# Task states in which a task copies now or is about to.
_ACTIVE_TASK_STATES = frozenset({"RUNNING", "RESTARTING"})


class ConnectorActivity(StrEnum):
    """What a connector does, read from `GET /connectors/<name>/status`."""

    STOPPED = "stopped"  # target state STOPPED, confirmed: Kafka Connect 3.5+ shows no tasks
    PAUSED = "paused"
    COPYING = "copying"  # a task runs (or restarts): records flow
    # Stopped, but a task still listed RUNNING or RESTARTING: the worker is shutting it down
    # (Connect lists it so until it has, a second or two). Copying until it has.
    STOPPING = "stopping"
    # No task runs, yet Connect does not confirm a stop: RUNNING or UNASSIGNED with no tasks,
    # or with every task UNASSIGNED, PAUSED or FAILED. It copies nothing now.
    IDLE = "idle"
    MISSING = "missing"  # no such connector: nothing to copy with


@dataclass(frozen=True)
class ConnectorReading:
    name: str
    state: str  # the connector's state as Connect reports it; MISSING when there is none
    tasks: tuple[str, ...]

    @classmethod
    def from_status(cls, name: str, status: Mapping[str, Any]) -> ConnectorReading:
        """From the JSON of `GET /connectors/<name>/status`."""
        return cls(name, str(status["connector"]["state"]),
                   tuple(str(t["state"]) for t in status.get("tasks") or []))

    @classmethod
    def read(cls, client: ConnectClient, name: str) -> ConnectorReading:
        try:
            return cls.from_status(name, client.status(name))
        except ConnectorMissing:
            return cls(name, "MISSING", ())

    @property
    def activity(self) -> ConnectorActivity:
        if self.state == "MISSING":
            return ConnectorActivity.MISSING
        if any(t in _ACTIVE_TASK_STATES for t in self.tasks):
            return (ConnectorActivity.STOPPING if self.state == "STOPPED"
                    else ConnectorActivity.COPYING)
        if self.state == "STOPPED":
            return ConnectorActivity.STOPPED
        if self.state == "PAUSED":
            return ConnectorActivity.PAUSED
        return ConnectorActivity.IDLE

    @property
    def confirmed_stopped(self) -> bool:
        return self.activity in (ConnectorActivity.STOPPED, ConnectorActivity.PAUSED,
                                 ConnectorActivity.MISSING)

    @property
    def stop_held(self) -> bool:
        """Read after a stop was accepted for it: the stop holds — confirmed, or no task left.
        A connector whose source is unreachable can hang in its own stop() and report RUNNING
        (or UNASSIGNED) with no tasks; its target state is STOPPED all the same, and without a
        task it copies nothing."""
        return self.confirmed_stopped or (self.activity is ConnectorActivity.IDLE
                                          and not self.tasks)

    def describe(self) -> str:
        """e.g. 'UNASSIGNED with no tasks', 'RUNNING with tasks RUNNING, FAILED'."""
        if self.state == "MISSING" or (self.state == "STOPPED" and not self.tasks):
            return self.state
        if not self.tasks:
            return f"{self.state} with no tasks"
        return f"{self.state} with tasks {', '.join(self.tasks)}"


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
