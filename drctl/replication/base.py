"""What replication kinds differ in, as one small interface.

A kind object is stateless: every method takes the settings it needs, so one instance per
kind serves every config (see `kind_for`).
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from drctl.config import Config, ReplicationSettings
from drctl.findings import Finding
from drctl.kafka.clients import ClusterClients
from drctl.progress import Notify
from drctl.replication.edits import ListEdit
from drctl.replication_registry import kind_entry

if TYPE_CHECKING:
    from drctl.replication.discovered import DiscoveredFlow


class FlowContext(Protocol):
    """What a kind asks of the command's context (`drctl.context.OpsContext` is one): the
    config, the flow, and the clients of its two clusters, built once per command."""

    @property
    def config(self) -> Config: ...

    @property
    def rep(self) -> ReplicationSettings: ...

    @property
    def source(self) -> ClusterClients: ...

    @property
    def target(self) -> ClusterClients: ...

# Asks the operator to confirm something drctl cannot do or check itself.
Confirm = Callable[[str], bool]


@dataclass(frozen=True)
class StopOutcome:
    state: str  # stopped | pending | manual
    connectors: list[str]
    detail: str


@dataclass(frozen=True)
class FlowState:
    """A replication flow (forward or reverse) as its components report it now, in three
    precise groups."""

    readable: bool  # False: nothing configured to ask, or it does not answer
    components: dict[str, str] = field(default_factory=dict)  # name -> its state, in words
    copying: tuple[str, ...] = ()  # a task runs: records flow into the target
    # Of `copying`: stopped, its tasks still being shut down (they may copy until they are);
    # asked again, a stop that holds clears it within seconds.
    stopping: tuple[str, ...] = ()
    # No task runs, so nothing is copied now, but the component is not confirmed stopped
    # (e.g. a connector UNASSIGNED with no tasks after the worker's Kafka restarted).
    unconfirmed: tuple[str, ...] = ()
    restopped: tuple[str, ...] = ()  # components whose stop drctl re-issued for this reading
    # Why a component can be left unconfirmed, and what clears it (the kind knows).
    unconfirmed_remedy: str = ""

    @property
    def confirmed(self) -> bool:
        return self.readable and not self.copying and not self.unconfirmed

    def as_dict(self) -> dict[str, Any]:
        return {"components": self.components, "copying": list(self.copying),
                "unconfirmed": list(self.unconfirmed), "restopped": list(self.restopped)}

    def describe(self, names: Sequence[str]) -> str:
        """e.g. 'mm2-source is UNASSIGNED with no tasks, mm2-checkpoint is STOPPED'."""
        return ", ".join(f"{n} is {self.components.get(n, 'unknown')}" for n in names)


@dataclass(frozen=True)
class FlowPart:
    """The part of a flow an incident of one application covers, resolved: the source topics
    and the groups whose replication it stops and later restarts while the rest of the flow
    goes on (docs/design.md §6, "Incident scope"). `name` tells its reverse flow apart."""

    name: str
    topics: tuple[str, ...]
    groups: tuple[str, ...] = ()


@dataclass(frozen=True)
class CopyPoints:
    """Per source partition, (source offset, target offset) pairs the replicator recorded as
    it copied — the record at the source offset sits at the target offset — in the order it
    wrote them (MirrorMaker 2's offset syncs); complete from `since_ms` (epoch ms)."""

    pairs: dict[tuple[str, int], list[tuple[int, int]]]
    since_ms: int
    # Each copy takes one target offset (False: the replicator writes transactions, whose
    # markers take target offsets too).
    one_for_one: bool = True


@dataclass(frozen=True)
class ReverseRequest:
    """Where reverse replication (target -> source) starts, from the failover marker."""

    incident: str
    starts: dict[str, dict[int, int]]  # failover topic -> partition -> first offset to copy
    # Records carrying this header are already on the source (reconciled gap records):
    # the reverse flow must never copy them back.
    skip_header: str
    out_dir: Path  # where configs and instructions for the operator are written
    part: FlowPart | None = None  # an application's incident; None: the whole flow
    # The entries that leave the part out of forward replication (its marker's `edits`).
    edits: tuple[ListEdit, ...] = ()


@dataclass(frozen=True)
class ReturnRequest:
    """The return to protection (ops/one_way/reprotect.py), from the failover marker."""

    incident: str
    reverse_topics: list[str]  # the failover topics the reverse flow copies to the source
    # Source topic -> partition -> the first source offset forward replication copies: the
    # source's position at the cut-over, so nothing the target holds is copied again.
    forward_starts: dict[str, dict[int, int]]
    out_dir: Path  # where instructions for the operator are written
    part: FlowPart | None = None  # an application's incident; None: the whole flow
    edits: tuple[ListEdit, ...] = ()  # as in ReverseRequest


class ReplicationKind(ABC):
    """One replication kind (`replication.kind` in the config)."""

    # Target offsets equal source offsets: translation keeps them, the gap is [F, source end).
    offsets_preserved: ClassVar[bool] = False
    # The header the replicator adds to every copy, which tells copies from originals.
    provenance_header: ClassVar[str | None] = None
    # drctl measures this kind's lag against the target (ops/steps/target_lag.py): it copies each
    # partition in order and keeps a stored position (`replicated_upto`).
    lag_measured: ClassVar[bool] = False
    # drctl itself starts the reverse flow, so failback waits until it has caught up;
    # otherwise the operator deploys it from what `start_reverse` wrote.
    reverse_started_by_drctl: ClassVar[bool] = False
    # Its flows are Kafka Connect connectors whose configs describe them (`discover_flows`).
    described_by_connectors: ClassVar[bool] = False

    @abstractmethod
    def stop_forward(self, rep: ReplicationSettings, *, confirm: Confirm | None = None,
                     deadline_s: float = 60.0, reach_deadline_s: float | None = None,
                     part: FlowPart | None = None) -> StopOutcome:
        """Stop replication source -> target and wait until it has stopped (`deadline_s`);
        a controller that does not answer within `reach_deadline_s` (the command's
        --deadline; None: the controller's own retry policy) leaves the stop pending. With
        `part`, only its topics and groups stop; the rest of the flow goes on copying."""

    def exclusions(self, rep: ReplicationSettings, part: FlowPart
                   ) -> dict[str, dict[str, list[str]]]:
        """Per forward component, per list-valued config key, the entries that leave `part`
        out of it (the kind knows its keys); empty when the kind cannot leave a part out
        through its config."""
        return {}

    def plan_leave_out(self, rep: ReplicationSettings, part: FlowPart,
                       others: Sequence[ListEdit] = ()) -> list[ListEdit] | None:
        """The exact config entries that leave `part` out of forward replication, read
        against the replicator now (`others`: what other open incidents wrote); None when
        drctl cannot write them (the operator leaves it out: `stop_forward(part=...)`)."""
        return None

    def write_edits(self, rep: ReplicationSettings, edits: Sequence[ListEdit], *,
                    undo: bool = False, others: Sequence[ListEdit] = (),
                    notify: Notify | None = None) -> list[str]:
        """Write `edits` (or take them out, keeping what `others` need), each component
        left as it ran; the components changed."""
        return []

    def edits_hold(self, rep: ReplicationSettings, edits: Sequence[ListEdit],
                   part: FlowPart | None = None) -> bool | None:
        """Whether forward replication still holds every entry of `edits` (None: cannot be
        told). With `part`, also whether those entries leave out each of its topics: the
        topics it has now, not only those an incident it superseded left out."""
        return None

    def resume_components(self, rep: ReplicationSettings, names: Sequence[str],
                          notify: Notify) -> FlowState:
        """Resume these forward components (idempotent) and wait until they run."""
        return FlowState(False)

    def ownership_warnings(self, rep: ReplicationSettings) -> list[str]:
        """Who else owns what drctl is about to change (a GitOps tool that puts it back), in
        one line each, said before a failover changes it; nothing when drctl is alone."""
        return []

    @abstractmethod
    def forward_state(self, rep: ReplicationSettings) -> FlowState:
        """What forward replication does now; unreadable when it cannot be told."""

    @abstractmethod
    def restop_forward(self, rep: ReplicationSettings, names: Sequence[str],
                       deadline_s: float = 10.0) -> FlowState:
        """Issue the stop of `names` again (idempotent), wait up to `deadline_s` for it to be
        confirmed, and read the state again."""

    @abstractmethod
    def component_states(self, rep: ReplicationSettings) -> dict[str, str]:
        """State per replication component (connector, link...) for `drctl status`."""

    @abstractmethod
    def start_reverse(self, ctx: FlowContext, request: ReverseRequest,
                      notify: Notify) -> dict[str, Any]:
        """Start (or write instructions for) replication target -> source from the failover
        point; returns what the failback report shows under `reverse`."""

    def reverse_state(self, ctx: FlowContext, part: FlowPart | None = None) -> FlowState:
        """The reverse flow (target -> source) as its components report now; unreadable
        when drctl cannot see it (started by the operator)."""
        return FlowState(False)

    @abstractmethod
    def retire_reverse(self, ctx: FlowContext, request: ReturnRequest, notify: Notify,
                       confirm: Confirm | None = None) -> dict[str, Any]:
        """Stop the reverse flow for good, recording where it stood; idempotent."""

    @abstractmethod
    def set_forward_start(self, ctx: FlowContext, request: ReturnRequest, notify: Notify,
                          confirm: Confirm | None = None, *,
                          dry_run: bool = False) -> dict[str, Any]:
        """Make forward replication start at `request.forward_starts` when it resumes
        (never from the positions it stored before the outage); with `dry_run`, only what it
        would set. The forward flow must be stopped."""

    @abstractmethod
    def resume_forward(self, rep: ReplicationSettings, notify: Notify,
                       confirm: Confirm | None = None,
                       part: FlowPart | None = None) -> FlowState:
        """Start forward replication again and wait until it runs; its state then. With
        `part`, take its topics and groups back in (the rest never stopped)."""

    def lag_remedy(self, rep: ReplicationSettings) -> str:
        """How to make the replicator copy again what it passed over, as a template with
        `{topic}`, `{partition}` and `{offset}` (the first record passed over)."""
        return ("make the replicator copy {topic}-{partition} again from offset {offset} (it "
                "copies what follows a second time)")

    def copy_points(self, ctx: FlowContext, since_ms: int) -> CopyPoints | None:
        """Where the replicator recorded copying source records since `since_ms` (complete
        from `CopyPoints.since_ms`); None when this kind records none or they cannot be
        read."""
        return None

    def replicated_upto(self, ctx: FlowContext) -> dict[tuple[str, int], int] | None:
        """Per source partition, the next offset forward replication would copy, as the
        replicator itself keeps it (its stored position); None when it cannot be read.
        Records before it were copied: retention deleting them on the source loses nothing."""
        return None

    def translation_costs(self, rep: ReplicationSettings) -> dict[str, Any] | None:
        """What this kind's settings cost a failover with the source gone (how stale its
        positions can be, what it discovers late), for `drctl status`; None when nothing
        applies. A controller that does not answer raises (Unreachable, ConnectRejected):
        unknown, never "no cost"."""
        return None

    def settings_findings(self, rep: ReplicationSettings,
                          active_on_target: Sequence[str]) -> list[Finding]:
        """What this kind's settings silently break or cost in a failover, read from the
        replicator (`drctl check`); `active_on_target`: groups with members on the target.
        Nothing when the kind has no settings drctl depends on."""
        return []

    def auto_translate_method(self, *, source_up: bool, forward: bool) -> str | None:
        """The translation method `auto` picks; None when no method works (source down).

        `forward` is true when groups move along the replication flow (failover)."""
        return "exact" if source_up else None

    def checkpoints_topic(self, rep: ReplicationSettings) -> str | None:
        """The target topic holding translatable checkpoints, or None without any."""
        return None

    def discover_flows(self, connectors: Mapping[str, Mapping[str, str]],
                       old_names_read: bool = True) -> list[DiscoveredFlow]:
        """The flows of this kind among Kafka Connect's connectors (name -> config, as
        `GET /connectors?expand=info` returns them), for `drctl config init`;
        `old_names_read`: whether the worker still reads the kind's old key names
        (ConnectControlled.aliases_honoured)."""
        return []


def kind_named(name: str, *, strimzi: bool = False) -> ReplicationKind:
    """The one (stateless) object of a registered kind, its module imported on first use;
    `strimzi`: the kind as controlled through Strimzi's KafkaMirrorMaker2 resource."""
    entry = kind_entry(name)
    return _kind_object(entry.strimzi_implementation if strimzi else entry.implementation)


@cache
def _kind_object(implementation: str) -> ReplicationKind:
    module_name, _, class_name = implementation.partition(":")
    kind: ReplicationKind = getattr(importlib.import_module(module_name), class_name)()
    return kind


def kind_for(settings: ReplicationSettings) -> ReplicationKind:
    """The kind object of a replication flow (validated by the config parser, so its kind is
    registered). A flow whose connectors Strimzi owns (`replication.strimzi`) is controlled
    through its KafkaMirrorMaker2 resource: the same kind, another owner."""
    return kind_named(settings.kind, strimzi=settings.strimzi is not None)
