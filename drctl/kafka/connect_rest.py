"""A small client for Kafka Connect's REST API (status, pause/resume/stop, offsets)."""

from __future__ import annotations

import urllib.parse
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from drctl.errors import DrctlError, ExitStatus, Unreachable, UsageError
from drctl.kafka.causes import Cause, connect_hint
from drctl.kafka.http import EndpointUnreachable, JsonEndpoint, Transient
from drctl.retry import RetryPolicy

# The one retry policy under a deadline: a worker that restarts or rebalances answers again
# within seconds; one that is down is reported (failover records a pending stop), not
# waited on for the policy's half hour.
CONNECT_RETRY = RetryPolicy(deadline_s=20.0)


class ConnectError(DrctlError):
    """Connect answered with an error status."""

    def __init__(self, message: str, status: int, hint: str | None = None) -> None:
        super().__init__(message, hint)
        self.status = status


class ConnectorMissing(ConnectError):
    pass


class ConnectRejected(UsageError):
    """The worker refused drctl (401/403) or its certificate failed verification: the
    configuration is wrong, and no retry changes that."""


class ConnectUnreachable(EndpointUnreachable):
    """A Connect worker that did not answer within the deadline: Connect has its own wait (a
    Kafka cluster that answers says nothing about it), and once that wait is over the
    command ends (exit 4) naming Connect, rather than waiting again."""


class LockNotHeld(DrctlError):
    """A change to a connector refused because the step making it no longer holds its flow's
    lock (drctl/flow_lock.py): another command took it over (exit 3), or its hold could not
    be renewed in time and another may take it over (exit 4, transient: once the lock's
    cluster answers, a run again continues). What the step left stopped is in the lock's
    journal: the next holder resumes it."""

    def __init__(self, message: str, hint: str, exit_status: ExitStatus, *,
                 transient: bool, detail: str | None = None) -> None:
        super().__init__(message, hint, detail=detail)
        self.exit_status = exit_status
        self.transient = transient


# The check of the hold a step runs under (this thread's): every change a ConnectClient makes
# asks it first. Reads are never refused.
_GUARD: ContextVar[Callable[[], None] | None] = ContextVar("drctl_connect_guard",
                                                           default=None)


@contextmanager
def guarded(check: Callable[[], None]) -> Iterator[None]:
    """Every connector change in the block (in this thread) asks `check` first, which raises
    (LockNotHeld) to refuse it: a step that no longer holds its flow's lock changes no shared
    connector, however far it got."""
    token = _GUARD.set(check)
    try:
        yield
    finally:
        _GUARD.reset(token)


def _path(name: str) -> str:
    """A connector's name as a path segment: Strimzi names them `a->b.MirrorSourceConnector`,
    and Connect's Jetty refuses a bare `>` (400 Illegal Path Character)."""
    return urllib.parse.quote(name, safe="")


class ConnectClient(JsonEndpoint):
    certificate = "the worker's certificate"

    def __init__(self, url: str, *, username: str | None = None, password: str | None = None,
                 token: str | None = None, ca_file: str | None = None,
                 cert_file: str | None = None, key_file: str | None = None,
                 timeout_s: float = 10.0, policy: RetryPolicy = CONNECT_RETRY,
                 config_path: str | None = None,
                 notify: Callable[[str], object] | None = None) -> None:
        super().__init__(url, username=username, password=password, token=token,
                         ca_file=ca_file, cert_file=cert_file, key_file=key_file,
                         timeout_s=timeout_s, policy=policy, config_path=config_path,
                         notify=notify)

    @property
    def name(self) -> str:
        return f"Kafka Connect at {self.url}"

    @property
    def label(self) -> str:
        return f"Kafka Connect ({self.url})"

    def hint(self, cause: Cause) -> str:
        return connect_hint(cause)

    def rejected(self, message: str, hint: str, detail: str | None = None) -> DrctlError:
        return ConnectRejected(message, hint, detail=detail)

    def unreachable(self, message: str, hint: str | None,
                    detail: str | None) -> ConnectUnreachable:
        return ConnectUnreachable(self.url, message, hint, detail=detail)

    def on_status(self, code: int, what: str, detail: str, body: Any = None) -> Any:
        """404: ConnectorMissing; 5xx, or 409 while the workers rebalance: worth another
        try; anything else: ConnectError.

        A 404 on the worker's root (`GET /`, there on every worker), or without Connect's own
        error document (`error_code`), is no missing connector: a worker starting answers
        so from its web server before Connect installed its REST resources (a restarted
        worker did, seconds long, and failover ended as if a connector were missing). Asked
        again within the deadline, then unreachable (exit 4, naming Connect)."""
        if code == 404 and (what.startswith("GET / with ") or not (
                isinstance(body, dict) and "error_code" in body)):
            raise Transient(Unreachable(
                f"{self.name} answered {what}: its REST API is not up (a worker starting)",
                "Is the Kafka Connect worker running and done starting, and is "
                "replication.connect.url its REST URL (a proxy's 404 reads the same)?"),
                "answered 404, its REST API not up yet")
        cls = ConnectorMissing if code == 404 else ConnectError
        error = cls(f"{self.name} answered {what}", code)
        if code >= 500 or (code == 409 and "rebalanc" in detail.lower()):
            raise Transient(error, f"answered {code}")
        raise error

    def request(self, method: str, path: str, body: Any = None, *,
                content_type: str | None = None) -> Any:
        if method != "GET" and (check := _GUARD.get()) is not None:
            check()  # raises when the step's hold on its flow's lock is gone
        return super().request(method, path, body, content_type=content_type)

    def info(self) -> dict[str, Any]:
        return self.request("GET", "/")

    def plugin_config_keys(self, plugin: str, connector_class: str) -> set[str] | None:
        """The config keys connector plugin `plugin` defines, as the worker's validation of a
        config lists them (`PUT /connector-plugins/<plugin>/config/validate`: nothing is
        created); None when its answer lists none."""
        answer = self.request("PUT", f"/connector-plugins/{plugin}/config/validate",
                              {"connector.class": connector_class, "name": "drctl-validate"})
        configs = answer.get("configs") if isinstance(answer, dict) else None
        if not isinstance(configs, list):
            return None
        keys = {str(c["definition"]["name"]) for c in configs
                if isinstance(c, dict) and isinstance(c.get("definition"), dict)
                and "name" in c["definition"]}
        return keys or None

    def connectors(self) -> list[str]:
        return self.request("GET", "/connectors")

    def connector_configs(self) -> dict[str, dict[str, str]]:
        """Every connector's config by name: one call where the worker can expand
        (`?expand=info`, Kafka 2.3+), else one per connector."""
        listed = self.request("GET", "/connectors?expand=info")
        if isinstance(listed, dict):
            return {name: {k: str(v) for k, v in entry["info"]["config"].items()}
                    for name, entry in listed.items()}
        return {name: {k: str(v) for k, v in self.config(name).items()} for name in listed}

    def status(self, name: str) -> dict[str, Any]:
        return self.request("GET", f"/connectors/{_path(name)}/status")

    def config(self, name: str) -> dict[str, Any]:
        return self.request("GET", f"/connectors/{_path(name)}/config")

    def put_config(self, name: str, config: dict[str, str]) -> Any:
        return self.request("PUT", f"/connectors/{_path(name)}/config", config)

    def create(self, name: str, config: dict[str, str], initial_state: str | None = None) -> Any:
        body: dict[str, Any] = {"name": name, "config": config}
        if initial_state:
            body["initial_state"] = initial_state
        return self.request("POST", "/connectors", body)

    def delete(self, name: str) -> None:
        self.request("DELETE", f"/connectors/{_path(name)}")

    def pause(self, name: str) -> None:
        self.request("PUT", f"/connectors/{_path(name)}/pause")

    def resume(self, name: str) -> None:
        self.request("PUT", f"/connectors/{_path(name)}/resume")

    def stop(self, name: str) -> None:
        self.request("PUT", f"/connectors/{_path(name)}/stop")

    def restart(self, name: str) -> None:
        """Restart the connector alone: the worker starts it again in its target state (a
        STOPPED or PAUSED one stays so, with no task started) and writes that status anew."""
        self.request("POST", f"/connectors/{_path(name)}/restart")

    def restart_failed(self, name: str) -> None:
        """Restart the connector and its tasks where they FAILED (Kafka 3.0+); a FAILED task
        stays so until restarted, even once its cause is gone."""
        self.request("POST", f"/connectors/{_path(name)}/restart?includeTasks=true&onlyFailed=true")

    def offsets(self, name: str) -> dict[str, Any]:
        return self.request("GET", f"/connectors/{_path(name)}/offsets")

    def alter_offsets(self, name: str, offsets: list[dict[str, Any]]) -> Any:
        return self.request("PATCH", f"/connectors/{_path(name)}/offsets", {"offsets": offsets})

    def connector_state(self, name: str) -> tuple[str, list[str]]:
        """(connector state, task states) — e.g. ('RUNNING', ['RUNNING'])."""
        st = self.status(name)
        return st["connector"]["state"], [t["state"] for t in st.get("tasks", [])]
