"""Replication control through Kafka Connect's REST API (MirrorMaker 2 and Replicator alike),
or a manual mode that says exactly what the operator must do."""

from __future__ import annotations

import time
from abc import ABC

from drctl.config import ReplicationSettings
from drctl.errors import Aborted, DrctlError, Unreachable
from drctl.kafka.connect_rest import ConnectClient, ConnectError, ConnectorMissing
from drctl.replication.base import Confirm, ReplicationKind, StopOutcome


def connect_client(rep: ReplicationSettings) -> ConnectClient | None:
    if not rep.connect.url:
        return None
    return ConnectClient(rep.connect.url, username=rep.connect.username,
                         password=rep.connect.password, timeout_s=rep.connect.timeout_s)


class ConnectControlled(ReplicationKind, ABC):
    """Forward replication runs as the connectors named in `replication.connect`; without
    them, drctl asks the operator to stop it by hand."""

    def component_states(self, rep: ReplicationSettings) -> dict[str, str]:
        """State per configured connector; UNREACHABLE or MISSING when it cannot be read."""
        client = connect_client(rep)
        states: dict[str, str] = {}
        for name in rep.connect.connectors:
            if client is None:
                states[name] = "NOT-CONFIGURED"
                continue
            try:
                states[name] = client.connector_state(name)[0]
            except ConnectorMissing:
                states[name] = "MISSING"
            except Unreachable:
                states[name] = "UNREACHABLE"
        return states

    def stop_forward(self, rep: ReplicationSettings, *, confirm: Confirm | None = None,
                     deadline_s: float = 60.0) -> StopOutcome:
        """Stop every configured connector of the flow and wait until Connect says so."""
        client = connect_client(rep)
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
        except Unreachable:
            return StopOutcome("pending", list(rep.connect.connectors),
                               f"Kafka Connect at {rep.connect.url} is unreachable")
        for name in rep.connect.connectors:
            try:
                client.stop(name)
            except ConnectorMissing as exc:
                raise DrctlError(f"Connector '{name}' does not exist on {rep.connect.url}.",
                                 "Fix replication.connect in the config.") from exc
            except ConnectError as exc:
                if exc.status not in (404, 405):
                    raise
                client.pause(name)  # Connect before 3.5 has no stop
        end = time.monotonic() + deadline_s
        while True:
            states = {n: client.connector_state(n) for n in rep.connect.connectors}
            # Connect accepted the stop and tore the tasks down, which is what stops the
            # copying. A connector whose source is unreachable can hang in its own stop() and
            # keep reporting RUNNING with no tasks; its target state is STOPPED all the same.
            if all((s in ("STOPPED", "PAUSED") or not tasks)
                   and all(t in ("PAUSED", "STOPPED") for t in tasks)
                   for s, tasks in states.values()):
                return StopOutcome("stopped", list(rep.connect.connectors),
                                   ", ".join(f"{n}: {s}" for n, (s, _) in states.items()))
            if time.monotonic() > end:
                raise DrctlError("Connectors did not stop in time: "
                                 + ", ".join(f"{n}: {s}" for n, (s, _) in states.items()),
                                 "Check the Connect worker's log.")
            time.sleep(0.5)

    def forward_stopped(self, rep: ReplicationSettings,
                        stopped_by_drctl: frozenset[str] = frozenset()) -> bool | None:
        """True when every connector is stopped/paused; None when it cannot be told.

        A connector drctl stopped that still reports RUNNING without tasks is stopped: its
        target state is STOPPED and its tasks are gone (see `stop_forward`)."""
        client = connect_client(rep)
        if client is None or not rep.connect.connectors:
            return None
        for name in rep.connect.connectors:
            try:
                state, tasks = client.connector_state(name)
            except ConnectorMissing:
                continue
            except Unreachable:
                return None
            if state in ("STOPPED", "PAUSED"):
                continue
            if state == "RUNNING" and not tasks and name in stopped_by_drctl:
                continue
            return False
        return True


def wait_connector_state(client: ConnectClient, name: str, want: str,
                         deadline_s: float = 60) -> None:
    """Until `name` is in state `want` (RUNNING: with every task running)."""
    end = time.monotonic() + deadline_s
    while True:
        try:
            state, tasks = client.connector_state(name)
        except ConnectorMissing:  # just created: no status yet
            state, tasks = "UNASSIGNED", []
        if state == want and (want != "RUNNING" or all(t == "RUNNING" for t in tasks)):
            return
        if "FAILED" in (state, *tasks):
            raise DrctlError(f"Connector {name} failed.", "Read the Connect worker's log.")
        if time.monotonic() > end:
            raise DrctlError(f"Connector {name} is {state}, not {want}, after {deadline_s:.0f} s.",
                             "Read the Connect worker's log.")
        time.sleep(0.5)
