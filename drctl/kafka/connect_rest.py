"""A small client for Kafka Connect's REST API (status, pause/resume/stop, offsets)."""

from __future__ import annotations

import base64
import json
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from typing import Any

from drctl.errors import ConfigError, DrctlError, Unreachable, UsageError
from drctl.kafka.causes import Cause, connect_cause, connect_hint
from drctl.retry import RetriesExhausted, RetryPolicy, retry_call, time_left
from drctl.timeparse import format_duration

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


class ConnectUnreachable(Unreachable):
    """A Connect worker that did not answer within the deadline: Connect has its own wait (a
    Kafka cluster that answers says nothing about it), and once that wait is over the
    command ends (exit 4) naming Connect, rather than waiting again."""

    transient = False

    def __init__(self, url: str, message: str, hint: str | None = None, *,
                 detail: str | None = None) -> None:
        super().__init__(message, hint, detail=detail)
        self.url = url


class _Transient(Exception):
    """A failure worth another try: no connection, 5xx, or 409 while the workers rebalance;
    `error` is what the caller gets when the tries run out, `cause` why (in words)."""

    def __init__(self, error: ConnectError | Unreachable, cause: str) -> None:
        super().__init__(error.message)
        self.error = error
        self.cause = cause


class ConnectClient:
    def __init__(self, url: str, *, username: str | None = None, password: str | None = None,
                 token: str | None = None, ca_file: str | None = None,
                 cert_file: str | None = None, key_file: str | None = None,
                 timeout_s: float = 10.0, policy: RetryPolicy = CONNECT_RETRY,
                 config_path: str | None = None,
                 notify: Callable[[str], object] | None = None) -> None:
        url, url_user, url_password = split_userinfo(url.rstrip("/"))
        if username is None and token is None and url_user is not None:
            username, password = url_user, url_password  # http://user:pass@host/ is basic auth
        self.url = url  # without credentials: it appears in messages
        self.timeout_s = timeout_s
        self.policy = policy
        self.notify = notify  # hears each retry: one line naming the worker and the cause
        self._auth = None
        if username is not None:
            basic = base64.b64encode(f"{username}:{password or ''}".encode()).decode()
            self._auth = f"Basic {basic}"
        elif token is not None:
            self._auth = f"Bearer {token}"
        self._tls = _tls_context(ca_file, cert_file, key_file, config_path) \
            if self.url.startswith("https:") else None

    def request(self, method: str, path: str, body: Any = None) -> Any:
        """One call, retried under the policy while the failure is transient (no connection,
        5xx, 409 during a rebalance); each attempt waits no longer than the policy's
        deadline leaves."""
        started = time.monotonic()

        def on_retry(attempt: int, exc: BaseException, delay: float) -> None:
            if self.notify is not None and isinstance(exc, _Transient):
                self.notify(f"Kafka Connect ({self.url}): {exc.cause}; attempt {attempt}, "
                            f"retrying in {format_duration(delay)}")

        try:
            return retry_call(
                lambda: self._request_once(method, path, body,
                                           time_left(self.policy, started,
                                                     cap_s=self.timeout_s)),
                self.policy, retry_on=(_Transient,), on_retry=on_retry)
        except RetriesExhausted as exc:
            assert isinstance(exc.last, _Transient)
            error = exc.last.error
            if isinstance(error, Unreachable):
                raise ConnectUnreachable(self.url, f"{error.message} ({exc.attempts} "
                                         f"attempt(s) over {exc.elapsed_s:.0f} s).",
                                         error.hint, detail=error.detail) from exc
            raise error from exc

    def _request_once(self, method: str, path: str, body: Any, timeout_s: float) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method)
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        if self._auth:
            req.add_header("Authorization", self._auth)
        try:
            with urllib.request.urlopen(req, timeout=timeout_s, context=self._tls) as resp:
                payload = resp.read()
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode(errors="replace")
            try:
                detail = json.loads(detail).get("message", detail)
            except (ValueError, AttributeError):
                pass
            what = f"{method} {path} with {exc.code}: {detail}"
            if exc.code in (401, 403):
                cause = Cause.AUTHENTICATION if exc.code == 401 else Cause.AUTHORIZATION
                raise ConnectRejected(  # the worker's own words say what it refused
                    f"Kafka Connect at {self.url} refused drctl: {cause} ({what})",
                    connect_hint(cause)) from exc
            cls = ConnectorMissing if exc.code == 404 else ConnectError
            error = cls(f"Kafka Connect at {self.url} answered {what}", exc.code)
            if exc.code >= 500 or (exc.code == 409 and "rebalanc" in str(detail).lower()):
                raise _Transient(error, f"answered {exc.code}") from exc
            raise error from exc
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            if isinstance(reason, ssl.SSLCertVerificationError):
                raise ConnectRejected(
                    f"Kafka Connect at {self.url}: {Cause.TLS} (the worker's certificate "
                    "failed verification).", connect_hint(Cause.TLS),
                    detail=str(reason.verify_message)) from exc
            cause = connect_cause(exc)
            raise _Transient(Unreachable(
                f"Kafka Connect at {self.url} did not answer: {cause}", connect_hint(cause),
                detail=str(reason)), str(cause)) from exc
        return json.loads(payload) if payload.strip() else None

    def info(self) -> dict[str, Any]:
        return self.request("GET", "/")

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
        return self.request("GET", f"/connectors/{name}/status")

    def config(self, name: str) -> dict[str, Any]:
        return self.request("GET", f"/connectors/{name}/config")

    def put_config(self, name: str, config: dict[str, str]) -> Any:
        return self.request("PUT", f"/connectors/{name}/config", config)

    def create(self, name: str, config: dict[str, str], initial_state: str | None = None) -> Any:
        body: dict[str, Any] = {"name": name, "config": config}
        if initial_state:
            body["initial_state"] = initial_state
        return self.request("POST", "/connectors", body)

    def delete(self, name: str) -> None:
        self.request("DELETE", f"/connectors/{name}")

    def pause(self, name: str) -> None:
        self.request("PUT", f"/connectors/{name}/pause")

    def resume(self, name: str) -> None:
        self.request("PUT", f"/connectors/{name}/resume")

    def stop(self, name: str) -> None:
        self.request("PUT", f"/connectors/{name}/stop")

    def restart_failed(self, name: str) -> None:
        """Restart the connector and its tasks where they FAILED (Kafka 3.0+); a FAILED task
        stays so until restarted, even once its cause is gone."""
        self.request("POST", f"/connectors/{name}/restart?includeTasks=true&onlyFailed=true")

    def offsets(self, name: str) -> dict[str, Any]:
        return self.request("GET", f"/connectors/{name}/offsets")

    def alter_offsets(self, name: str, offsets: list[dict[str, Any]]) -> Any:
        return self.request("PATCH", f"/connectors/{name}/offsets", {"offsets": offsets})

    def connector_state(self, name: str) -> tuple[str, list[str]]:
        """(connector state, task states) — e.g. ('RUNNING', ['RUNNING'])."""
        st = self.status(name)
        return st["connector"]["state"], [t["state"] for t in st.get("tasks", [])]


def split_userinfo(url: str) -> tuple[str, str | None, str | None]:
    """(url without user-info, user, password) of `scheme://user:password@host/...`."""
    parts = urllib.parse.urlsplit(url)
    if parts.username is None:
        return url, None, None
    host = parts.hostname or ""
    netloc = f"[{host}]" if ":" in host else host
    if parts.port is not None:
        netloc += f":{parts.port}"
    bare = urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, parts.query,
                                    parts.fragment))
    return bare, urllib.parse.unquote(parts.username), (
        urllib.parse.unquote(parts.password) if parts.password is not None else None)


def _tls_context(ca_file: str | None, cert_file: str | None, key_file: str | None,
                 config_path: str | None) -> ssl.SSLContext:
    """Verification against the system CAs, or `ca_file`'s; a client certificate when set."""
    key = "replication.connect.ca_file"
    try:
        context = ssl.create_default_context(cafile=ca_file)
        if cert_file is not None:
            key = "replication.connect.cert_file"
            context.load_cert_chain(cert_file, key_file)
    except (OSError, ssl.SSLError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ConfigError(f"cannot use it for Kafka Connect's TLS: {reason}", path=config_path,
                          key=key, hint="Point it at a readable PEM file.") from exc
    return context
