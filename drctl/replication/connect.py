"""Replication control through Kafka Connect's REST API (MirrorMaker 2 and Replicator alike),
or a manual mode that says exactly what the operator must do."""

from __future__ import annotations

import time
from abc import ABC
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from typing import Any, ClassVar

from drctl.config import ReplicationSettings
from drctl.errors import Aborted, CheckFailed, DrctlError, ExitStatus, Unreachable
from drctl.kafka.connect_rest import (
    CONNECT_RETRY,
    ConnectClient,
    ConnectError,
    ConnectorMissing,
    ConnectRejected,
    LockNotHeld,
)
from drctl.kafka_release import kafka_release
from drctl.progress import Notify
from drctl.replication.base import Confirm, FlowPart, FlowState, ReplicationKind, StopOutcome
from drctl.replication.control import (
    ConnectorActivity,
    ConnectorOwner,
    ConnectorReading,
    Edit,
)
from drctl.replication.edits import (
    ListEdit,
    apply_edits,
    by_connector,
    edits_hold,
    entries_of,
    leaves_out,
    plan_edit,
    undo_edits,
)
from drctl.retry import WaitTimedOut, wait_for


def flow_state_of(readings: Sequence[ConnectorReading],
                     restopped: Sequence[str] = ()) -> FlowState:
    by_activity = {a: tuple(r.name for r in readings if r.activity is a)
                   for a in ConnectorActivity}
    return FlowState(True, {r.name: r.describe() for r in readings},
                        copying=(*by_activity[ConnectorActivity.COPYING],
                                 *by_activity[ConnectorActivity.STOPPING]),
                        stopping=by_activity[ConnectorActivity.STOPPING],
                        unconfirmed=by_activity[ConnectorActivity.IDLE],
                        restopped=tuple(restopped), unconfirmed_remedy=_STRANDED)


# Measured on Kafka Connect 4.x: when the Kafka cluster holding the worker's internal topics
# restarts, connectors whose target state is STOPPED come back UNASSIGNED with no tasks and
# stay so; another PUT …/stop changes nothing, a restart of the worker clears it.
_STRANDED = ("Kafka Connect shows this after a restart of the Kafka cluster that holds its "
             "worker's internal topics, and another stop does not change it; restart the "
             "Connect worker to clear it (it comes back with the connectors STOPPED)")


def scoped_connector_name(base: str, part: FlowPart | None) -> str:
    """The connector `base` of an application's incident (`part`), e.g. a reverse flow's
    own: `<base>-<application>`. Connect puts the name in its URL paths, so every character
    but letters, digits, '.', '_' and '-' is written as '~' and its code point in hex: no two
    scopes share a name, and none needs escaping."""
    if part is None:
        return base
    safe = "".join(c if c.isascii() and (c.isalnum() or c in "._-") else f"~{ord(c):x}"
                   for c in part.name)
    return f"{base}-{safe}"


def connect_client(rep: ReplicationSettings, deadline_s: float | None = None,
                   notify: Notify | None = None) -> ConnectClient | None:
    """The flow's Connect client. How long a worker that does not answer is retried before
    it is unreachable: `deadline_s`, else the command's --deadline (the context puts it in
    `rep.connect.reach_deadline_s`). `notify` hears each retry. None for a flow Strimzi owns
    (`replication.strimzi`): its operator would put back any change made through REST."""
    c = rep.connect
    if not c.url or rep.strimzi is not None:
        return None
    deadline = deadline_s if deadline_s is not None else c.reach_deadline_s
    return ConnectClient(c.url, username=c.username, password=c.password, token=c.token,
                         ca_file=c.ca_file, cert_file=c.cert_file, key_file=c.key_file,
                         timeout_s=c.timeout_s, policy=CONNECT_RETRY.with_deadline(deadline),
                         notify=notify)


@dataclass(frozen=True)
class ConnectRestOwner:
    """The connectors through Kafka Connect's REST API (a `control.ConnectorOwner`)."""

    client: ConnectClient
    kind: ConnectControlled
    notify: Notify = lambda _: None

    @property
    def owner(self) -> str:
        return f"Kafka Connect at {self.client.url}"

    def readings(self, names: Sequence[str]) -> list[ConnectorReading]:
        return [ConnectorReading.read(self.client, n) for n in names]

    def set_states(self, wanted: Mapping[str, str], *, what: str) -> list[ConnectorReading]:
        """Resume (or pause, or stop) each connector, then wait until each is so (running:
        with all its tasks)."""
        for name, state in wanted.items():
            if state == "running":
                self.notify(f"Resuming {name}")
                self.client.resume(name)
            elif state == "paused":
                self.client.pause(name)
            else:
                stop_or_pause(self.client, name)
        for name, state in wanted.items():
            wait_connector_state(self.client, name, state.upper(), notify=self.notify)
        return self.readings(list(wanted))

    def config(self, name: str) -> dict[str, Any]:
        return self.client.config(name)

    def reconfigure(self, name: str, edit: Edit) -> bool:
        return reconfigure(self.client, name, edit)

    def old_names_read(self) -> bool:
        return self.kind.aliases_honoured(self.client)


def check_connect(rep: ReplicationSettings, notify: Notify | None = None
                  ) -> tuple[dict[str, Any] | None, DrctlError | None]:
    """The flow's Connect worker asked once (`GET /`) within the command's deadline, each
    retry said through `notify`: None without a URL, else its reading — and the error when
    it did not answer (Unreachable) or refused drctl (ConnectRejected)."""
    client = connect_client(rep, notify=notify)
    if client is None:
        return None, None
    try:
        info = client.info() or {}
    except (Unreachable, ConnectRejected) as exc:
        return {"url": client.url, "reachable": False, "error": exc.message}, exc
    version = info.get("version")
    release = kafka_release(str(version or ""))
    return {"url": client.url, "reachable": True, "version": version,
            "kafka": str(release) if release else None}, None


class ConnectControlled(ReplicationKind, ABC):
    """Forward replication runs as the connectors named in `replication.connect`; without
    them, drctl asks the operator to stop it by hand."""

    def component_states(self, rep: ReplicationSettings) -> dict[str, str]:
        """State per configured connector; MISSING when there is no such connector.
        Raises Unreachable when the worker does not answer within the command's deadline
        (asked once, not once per connector), ConnectRejected when it refuses drctl: what
        the connectors do cannot be known."""
        owner = self.owner(rep)
        if owner is None:
            return dict.fromkeys(rep.connect.connectors, "NOT-CONFIGURED")
        return {r.name: r.state for r in owner.readings(rep.connect.connectors)}

    # What a connector's list keys hold when its config does not set them (the replicator's
    # own defaults): leaving a part out keeps them.
    exclusion_defaults: ClassVar[Mapping[str, str]] = {}
    # Older names of those keys (MirrorMaker 2's `topics.blacklist`), which the replicator
    # honours while the key itself is absent, for as long as it still defines them. Never
    # edited: the key is written with their entries instead.
    exclusion_aliases: ClassVar[Mapping[str, str]] = {}
    # How to tell whether it still does: a connector plugin (its name, its class) whose
    # validation lists this old key exactly while the old names are read; else the worker's
    # Kafka release, read from its version: before `aliases_until` (a major release).
    alias_probe: ClassVar[tuple[str, str, str] | None] = None
    aliases_until: ClassVar[int] = 0

    def aliases_honoured(self, client: ConnectClient) -> bool:
        """Whether the worker's replicator still reads the old key names. The worker is asked
        first (`alias_probe`); when it cannot say, its version is read as its vendor writes
        it (Confluent Platform's 7.6.1-ccs is Kafka 3.6); a worker that says neither is
        taken to read them (as the oldest): what its operator left out stays out."""
        if self.alias_probe is not None:
            plugin, connector_class, key = self.alias_probe
            try:
                defined = client.plugin_config_keys(plugin, connector_class)
            except Unreachable:
                raise
            except DrctlError:  # no such endpoint or plugin (an old worker), or refused
                defined = None
            if defined is not None:
                return key in defined
        release = kafka_release(str((client.info() or {}).get("version") or ""))
        return release is None or release.major < self.aliases_until

    def owner(self, rep: ReplicationSettings, *, notify: Notify | None = None,
              changing: bool = False) -> ConnectorOwner | None:
        """Who owns the flow's connectors: its Connect worker (None without one). For a
        change (`changing`) the worker is asked once within the reach deadline, then held
        longer: a worker holds a config change while its herder rejoins its group; that is
        the change taking effect, bounded like a stop's wait (as `stop_forward` does)."""
        client = connect_client(rep, notify=notify)
        if client is None:
            return None
        if notify is None:
            notify = lambda _: None  # noqa: E731
        if changing:
            client.info()
            client = connect_client(rep, max(60.0, rep.connect.reach_deadline_s or 0.0),
                                    notify) or client
        return ConnectRestOwner(client, self, notify)

    def plan_leave_out(self, rep: ReplicationSettings, part: FlowPart,
                       others: Sequence[ListEdit] = ()) -> list[ListEdit] | None:
        """The exact entries that leave `part` out of the connectors, read against their
        configs now (`others`: the other open incidents' edits); None when drctl cannot
        (no Connect, or a kind without such keys): the operator does it."""
        owner = self.owner(rep)
        wanted = self.exclusions(rep, part)
        if owner is None or not wanted:
            return None
        honoured: list[bool] = []  # asked once, and only when an alias matters
        out = []
        for name, keys in wanted.items():
            config = owner.config(name)
            for key, entries in keys.items():
                effective = entries_of(self.exclusion_defaults.get(key))
                alias = self.exclusion_aliases.get(key)
                if key not in config and alias and alias in config:
                    if not honoured:
                        honoured.append(owner.old_names_read())
                    if honoured[0]:
                        effective = entries_of(str(config[alias]))
                out.append(plan_edit(config, name, key, entries, effective, others))
        return out

    def write_edits(self, rep: ReplicationSettings, edits: Sequence[ListEdit], *,
                    undo: bool = False, others: Sequence[ListEdit] = (),
                    notify: Notify | None = None) -> list[str]:
        """Write `edits` into their connectors (or, with `undo`, take them out, keeping what
        `others` need), each connector left in the state it was in: a running one is stopped,
        reconfigured and resumed — resumed whatever happens in between. Returns the
        connectors whose config changed."""
        owner = self.owner(rep, notify=notify, changing=True)
        if owner is None:
            return []
        changed = []
        for name, mine in by_connector(edits).items():
            edit = (partial(undo_edits, edits=mine, others=others) if undo
                    else partial(apply_edits, edits=mine))
            if owner.reconfigure(name, edit):
                changed.append(name)
        return changed

    def edits_hold(self, rep: ReplicationSettings, edits: Sequence[ListEdit],
                   part: FlowPart | None = None) -> bool | None:
        """Whether every entry of `edits` is in its connector's config (None: cannot be
        told, or nothing was edited); with `part`, False when they miss one of its topics."""
        if not edits:
            return None
        try:
            owner = self.owner(rep)
        except DrctlError:
            return None
        if owner is None:
            return None
        # Its topics only: the groups a marker names are those its failover moved, which
        # need not be those it left out.
        if part is not None and not leaves_out(
                self.exclusions(rep, FlowPart(part.name, part.topics)), edits):
            return False
        try:
            return all(edits_hold(owner.config(name), mine)
                       for name, mine in by_connector(edits).items())
        except (DrctlError, ConnectorMissing):
            return None

    def stop_forward(self, rep: ReplicationSettings, *, confirm: Confirm | None = None,
                     deadline_s: float = 60.0, reach_deadline_s: float | None = None,
                     part: FlowPart | None = None) -> StopOutcome:
        """Stop every configured connector of the flow and wait until Connect says so. With
        `part`, the operator leaves it out by hand (drctl writes the entries itself when it
        can: `plan_leave_out`, `write_edits`)."""
        if part is not None:
            return self._leave_out_by_hand(rep, part, confirm)
        client = connect_client(rep, reach_deadline_s)
        if client is None or not rep.connect.connectors:
            text = (f"drctl cannot reach your replicator. Stop replication from {rep.source} to "
                    f"{rep.target} now (stop or pause the {rep.kind} connectors or processes), "
                    "then confirm.")
            if confirm is None or not confirm(text):
                raise Aborted("Replication was not confirmed stopped.",
                              "Stop it, then run the same command again.")
            return StopOutcome("stopped", [], "confirmed by the operator (manual mode)")
        try:
            client.info()
            # It answered: the replicator is reachable, and pending is for one that is not
            # (DESIGN §6 step 2). A worker holds a stop while its herder joins its group (a
            # restart: seconds) or finishes a rebalance; that is the stop taking effect,
            # bounded like the wait for STOPPED below, not by the reach deadline.
            held = connect_client(rep, max(deadline_s, reach_deadline_s or 0.0)) or client
            for name in rep.connect.connectors:
                try:
                    stop_or_pause(held, name)
                except ConnectorMissing as exc:
                    raise DrctlError(f"Connector '{name}' does not exist on "
                                     f"{rep.connect.url}.",
                                     "Fix replication.connect in the config.") from exc
        except Unreachable:
            return StopOutcome("pending", list(rep.connect.connectors),
                               f"Kafka Connect at {rep.connect.url} is unreachable")
        except ConnectRejected as exc:
            # Not "unreachable": the worker answered. A pending stop would hide a config
            # error behind a fence; the run stops here and resumes once the config is fixed.
            raise ConnectRejected(f"Replication was not stopped: {exc.message}",
                                  f"{exc.hint} Then run the same command again: it resumes "
                                  "the incident.") from exc
        seen: list[ConnectorReading] = []

        def stopped() -> StopOutcome | None:
            seen[:] = [ConnectorReading.read(client, n) for n in rep.connect.connectors]
            # Connect accepted the stop and tore the tasks down, which is what stops the
            # copying (ConnectorReading.stop_held).
            if all(r.stop_held for r in seen):
                return StopOutcome("stopped", list(rep.connect.connectors), _detail(seen))
            return None

        try:
            return wait_for(stopped, deadline_s=deadline_s)
        except WaitTimedOut:
            raise DrctlError(f"Connectors did not stop in time: {_detail(seen)}",
                             "Check the Connect worker's log.") from None

    def _leave_out_by_hand(self, rep: ReplicationSettings, part: FlowPart,
                           confirm: Confirm | None) -> StopOutcome:
        text = (f"drctl cannot leave {part.name} out of your replicator. Stop replicating "
                f"{', '.join(part.topics)} from {rep.source} to {rep.target} now (and "
                f"checkpointing groups {', '.join(part.groups) or 'of those topics'}), "
                "leaving the rest of the flow running, then confirm.")
        if confirm is None or not confirm(text):
            raise Aborted(f"Replication of {part.name} was not confirmed stopped.",
                          "Stop it, then run the same command again.")
        return StopOutcome("stopped", [], "confirmed by the operator (manual mode)")

    def resume_forward(self, rep: ReplicationSettings, notify: Notify,
                       confirm: Confirm | None = None,
                       part: FlowPart | None = None) -> FlowState:
        """Resume every forward connector (idempotent) and wait until each runs. With `part`
        and no way to edit the connectors, the operator takes it back in by hand."""
        owner = self.owner(rep, notify=notify)
        if part is not None and (owner is None or not self.exclusions(rep, part)):
            text = (f"Take {part.name} back into replication from {rep.source} to "
                    f"{rep.target} now ({', '.join(part.topics)}), from the start positions "
                    "drctl set or printed, then confirm.")
            if confirm is None or not confirm(text):
                raise Aborted(f"Replication of {part.name} was not confirmed started.",
                              "Start it, then run the same command again.")
            return FlowState(False)
        if owner is None or not rep.connect.connectors:
            text = (f"drctl cannot reach your replicator. Start replication from {rep.source} "
                    f"to {rep.target} now, from the start positions drctl set or printed, "
                    "then confirm.")
            if confirm is None or not confirm(text):
                raise Aborted("Forward replication was not confirmed started.",
                              "Start it, then run the same command again.")
            return FlowState(False)
        return self.resume_components(rep, rep.connect.connectors, notify)

    def resume_components(self, rep: ReplicationSettings, names: Sequence[str],
                          notify: Notify) -> FlowState:
        """Resume these connectors (idempotent) through their owner and wait until each runs
        with all its tasks."""
        owner = self.owner(rep, notify=notify)
        if owner is None or not names:
            return FlowState(False)
        return flow_state_of(owner.set_states({n: "running" for n in names},
                                              what="forward replication running"))

    def forward_state(self, rep: ReplicationSettings) -> FlowState:
        owner = self.owner(rep)
        if owner is None or not rep.connect.connectors:
            return FlowState(False)
        try:
            return flow_state_of(owner.readings(rep.connect.connectors))
        except Unreachable:
            return FlowState(False)

    def restop_forward(self, rep: ReplicationSettings, names: Sequence[str],
                       deadline_s: float = 10.0) -> FlowState:
        client = connect_client(rep)
        if client is None or not names:
            return self.forward_state(rep)
        try:
            for name in names:
                try:
                    stop_or_pause(client, name)
                except ConnectorMissing:
                    continue  # nothing left to copy with
            # A connector stranded UNASSIGNED keeps that state whatever it is asked, so the
            # wait ends at the deadline; one that can stop does so within seconds.
            seen: list[ConnectorReading] = []

            def stopped() -> bool | None:
                seen[:] = [ConnectorReading.read(client, n) for n in rep.connect.connectors]
                return True if all(r.confirmed_stopped for r in seen if r.name in names) \
                    else None

            try:
                wait_for(stopped, deadline_s=deadline_s)
            except WaitTimedOut:
                pass
            return flow_state_of(seen, names)
        except Unreachable:
            return FlowState(False, restopped=tuple(names))


def reconfigure(client: ConnectClient, name: str,
                edit: Callable[[dict[str, Any]], dict[str, Any]]) -> bool:
    """Give connector `name` the config `edit` makes of its own, in its earlier state: a
    running one is stopped, reconfigured and resumed (`paused`), so no task copies with the
    old config after this returns. False when the config was so already (nothing touched)."""
    config = client.config(name)
    new = edit(dict(config))
    if new == config:
        return False
    with paused(client, [name]):
        client.put_config(name, {k: str(v) for k, v in new.items()})
    return True


class LeftStopped(DrctlError):
    """Shared connectors drctl stopped for a moment could not be resumed: the flow they copy
    is not replicated, every application in it unprotected, until they run again."""

    def __init__(self, message: str, hint: str, exit_status: ExitStatus) -> None:
        super().__init__(message, hint)
        self.exit_status = exit_status


def resume_command(client: ConnectClient, name: str) -> str:
    """The command that resumes `name` (the worker's URL without credentials)."""
    return f"curl -X PUT {client.url}/connectors/{name}/resume"


@contextmanager
def paused(client: ConnectClient, names: Sequence[str]) -> Iterator[list[str]]:
    """Those of `names` that run, stopped for the step inside (Connect alters a config or
    stored offsets of a stopped connector) and resumed when it ends, whatever happens in it.
    A resume that fails says the flow is unprotected and how to resume it (LeftStopped)."""
    running = [n for n in names
               if ConnectorReading.read(client, n).state not in ("STOPPED", "PAUSED", "MISSING")]
    try:
        for name in running:
            stop_or_pause(client, name)
        for name in running:
            wait_connector_state(client, name, "STOPPED")
        yield running
    finally:
        try:
            for name in running:
                client.resume(name)
            for name in running:
                wait_connector_state(client, name, "RUNNING")
        except LockNotHeld as exc:
            # Resuming now could undo what the lock's next holder does: its journal hands
            # them over instead.
            raise LeftStopped(
                f"{', '.join(running)} stayed stopped after drctl stopped it for a moment: "
                f"{exc.message}",
                "The flow's lock records it: the next drctl step on this flow resumes it "
                "first (run this command again once the lock's cluster answers).",
                exc.exit_status) from exc
        except DrctlError as exc:
            raise LeftStopped(
                f"{', '.join(running)} stayed stopped after drctl stopped it for a moment "
                f"({exc.message}): the flow it copies is not replicated — every application "
                "in it is unprotected.",
                "Resume it: " + "; ".join(resume_command(client, n) for n in running)
                + " — or run the same drctl command again: it resumes it first.",
                exc.exit_status) from exc


def retire_connector(client: ConnectClient, name: str, notify: Notify) -> dict[str, Any]:
    """Stop `name`, record the offsets it stored, delete it: a flow that is done. Idempotent:
    a connector already gone is reported absent."""
    try:
        stored = client.offsets(name).get("offsets", [])
    except ConnectorMissing:
        return {"connector": name, "state": "absent"}
    notify(f"Stopping and deleting {name} (its stored offsets are kept in the marker)")
    try:
        stop_or_pause(client, name)
        wait_connector_state(client, name, "STOPPED", notify=notify)
        client.delete(name)
    except ConnectorMissing:
        # Gone already, which is what was wanted: Connect applied a DELETE whose answer was
        # lost (a 500 while a broker restarted) and answered the client's next try 404.
        pass
    return {"connector": name, "state": "deleted", "offsets": stored}


def stopped_for_offsets(client: ConnectClient, name: str) -> None:
    """Connect alters a connector's offsets only while it is STOPPED: stop one that copies
    nothing (PAUSED, or idle); refuse one that copies."""
    reading = ConnectorReading.read(client, name)
    if reading.activity is ConnectorActivity.MISSING:
        raise DrctlError(f"Connector {name} does not exist on {client.url}.",
                         "Fix replication.connect in the config.")
    if reading.activity in (ConnectorActivity.COPYING, ConnectorActivity.STOPPING):
        raise CheckFailed(
            f"Forward replication is already copying ({name} is {reading.describe()}): it "
            "resumed from the positions it stored before the outage and may have copied the "
            "gap records and the reverse copies of the post-failover writes to the target a "
            "second time.",
            f"Stop {name}, compare the target with the source, then run reprotect again.")
    if reading.state != "STOPPED":
        stop_or_pause(client, name)
        wait_connector_state(client, name, "STOPPED")


def _detail(readings: Sequence[ConnectorReading]) -> str:
    return ", ".join(f"{r.name}: {r.describe()}" for r in readings)


def stop_or_pause(client: ConnectClient, name: str) -> None:
    """PUT …/stop, idempotent; ConnectorMissing when there is no such connector."""
    try:
        client.stop(name)
    except ConnectError as exc:
        if exc.status != 405:  # 404 is ConnectorMissing
            raise
        client.pause(name)  # Connect before 3.5 has no stop


# Kafka Connect writes a connector's status as it applies a new target state, and drops that
# write when it fails across one of its group's rebalances (the Kafka cluster holding its
# internal topics restarting under it): the connector is stopped, its status says RUNNING
# for good, and another stop changes nothing (seen in a drill under faults: a reprotect's
# retired reverse connector, 5 runs of 60 s). A restart of the connector alone makes the
# worker start it again in its target state and write that status (Kafka Connect 4.3: a
# stopped one says STOPPED, with no task started). Asked when a stop or pause has not shown
# after this long, then again at this interval: a stop takes seconds even on a sick cluster.
STATUS_REWRITE_AFTER_S = 10.0
STATUS_REWRITE_EVERY_S = 15.0


def wait_connector_state(client: ConnectClient, name: str, want: str,
                         deadline_s: float = 60, *, notify: Notify | None = None,
                         clock: Callable[[], float] = time.monotonic,
                         sleep: Callable[[float], None] = time.sleep) -> None:
    """Until `name` is in state `want` (RUNNING: with every task running). A STOPPED or
    PAUSED that has not shown after `STATUS_REWRITE_AFTER_S` is asked of the worker again
    by a restart of the connector (its status write may have been lost)."""
    last = ["UNASSIGNED"]
    started = clock()
    rewrite_at = [started + STATUS_REWRITE_AFTER_S]

    def there() -> bool | None:
        try:
            state, tasks = client.connector_state(name)
        except ConnectorMissing:  # just created: no status yet
            state, tasks = "UNASSIGNED", []
        last[0] = state
        if "FAILED" in (state, *tasks):
            raise DrctlError(f"Connector {name} failed.", "Read the Connect worker's log.")
        if state == want and (want != "RUNNING" or all(t == "RUNNING" for t in tasks)):
            return True
        if want in ("STOPPED", "PAUSED") and clock() >= rewrite_at[0]:
            rewrite_at[0] = clock() + STATUS_REWRITE_EVERY_S
            _rewrite_status(client, name, want, state, clock() - started, notify)
        return None

    try:
        wait_for(there, deadline_s=deadline_s, clock=clock, sleep=sleep)
    except WaitTimedOut:
        raise DrctlError(f"Connector {name} is {last[0]}, not {want}, after "
                         f"{deadline_s:.0f} s.", "Read the Connect worker's log.") from None


def _rewrite_status(client: ConnectClient, name: str, want: str, state: str, waited_s: float,
                    notify: Notify | None) -> None:
    if notify is not None:
        notify(f"{name} still says {state} {waited_s:.0f} s after it was asked to be {want}: "
               "restarting the connector alone, which starts it in its target state and "
               "writes its status again (Connect loses that write when its Kafka cluster "
               "restarts under it)")
    try:
        client.restart(name)
    except ConnectError:
        pass  # a rebalance (409) or the connector gone: the next reading says where it is
