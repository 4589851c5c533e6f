"""Every HTTP endpoint drctl calls (Kafka Connect, a schema registry): credentials in the URL
or beside it, TLS against a CA file with an optional client certificate, and JSON calls
retried while the failure is transient (`JsonEndpoint`). One place, so each speaks to
secured and sick endpoints the same way."""

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

from drctl.errors import ConfigError, DrctlError, Unreachable
from drctl.kafka.causes import Cause, connect_cause
from drctl.retry import RetriesExhausted, RetryPolicy, retry_call, time_left
from drctl.timeparse import format_duration


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


def authorization(username: str | None, password: str | None,
                  token: str | None) -> str | None:
    """The Authorization header: basic with a username, bearer with a token, else none."""
    if username is not None:
        basic = base64.b64encode(f"{username}:{password or ''}".encode()).decode()
        return f"Basic {basic}"
    if token is not None:
        return f"Bearer {token}"
    return None


def tls_context(ca_file: str | None, cert_file: str | None, key_file: str | None,
                config_path: str | None, *, keys: str = "replication.connect",
                what: str = "Kafka Connect") -> ssl.SSLContext:
    """Verification against the system CAs, or `ca_file`'s; a client certificate when set.
    A file that cannot be used is a config error naming its key (under `keys`)."""
    key = f"{keys}.ca_file"
    try:
        context = ssl.create_default_context(cafile=ca_file)
        if cert_file is not None:
            key = f"{keys}.cert_file"
            context.load_cert_chain(cert_file, key_file)
    except (OSError, ssl.SSLError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ConfigError(f"cannot use it for {what}'s TLS: {reason}", path=config_path,
                          key=key, hint="Point it at a readable PEM file.") from exc
    return context


class EndpointUnreachable(Unreachable):
    """An endpoint that did not answer within the deadline its calls were retried for. That
    wait is over (not transient: a Kafka cluster that answers says nothing about it), so the
    command ends (exit 4) naming it rather than waiting again."""

    transient = False

    def __init__(self, url: str, message: str, hint: str | None = None, *,
                 detail: str | None = None) -> None:
        super().__init__(message, hint, detail=detail)
        self.url = url


class Transient(Exception):
    """A failure worth another try (no connection, a 5xx...): `error` is what the caller gets
    when the tries run out, `cause` why (in words)."""

    def __init__(self, error: DrctlError, cause: str) -> None:
        super().__init__(error.message)
        self.error = error
        self.cause = cause


class JsonEndpoint:
    """A JSON API over HTTP(S) — Kafka Connect's REST API, a schema registry: its URL without
    credentials (it appears in messages), a login, TLS, and one call retried under a policy
    while the failure is transient, each attempt no longer than the policy's deadline
    leaves. A refusal (401, 403, an untrusted certificate) is never retried: the
    configuration is wrong. Subclasses say how messages name it, what an error status means
    (`on_status`) and what to check when it does not answer (`hint`)."""

    accept = content_type = "application/json"
    certificate = "its certificate"  # whose certificate failed verification, in words

    def __init__(self, url: str, *, username: str | None = None, password: str | None = None,
                 token: str | None = None, ca_file: str | None = None,
                 cert_file: str | None = None, key_file: str | None = None,
                 timeout_s: float = 10.0, policy: RetryPolicy,
                 config_path: str | None = None,
                 notify: Callable[[str], object] | None = None,
                 keys: str = "replication.connect", what: str = "Kafka Connect") -> None:
        url, url_user, url_password = split_userinfo(url.rstrip("/"))
        if username is None and token is None and url_user is not None:
            username, password = url_user, url_password  # http://user:pass@host/ is basic auth
        self.url = url
        self.timeout_s = timeout_s
        self.policy = policy
        self.notify = notify  # hears each retry: one line naming the endpoint and the cause
        self._auth = authorization(username, password, token)
        self._tls = tls_context(ca_file, cert_file, key_file, config_path, keys=keys,
                                what=what) if self.url.startswith("https:") else None

    # -- what each endpoint says ----------------------------------------------------------

    @property
    def name(self) -> str:
        """How messages name it (`Kafka Connect at URL`)."""
        raise NotImplementedError

    @property
    def label(self) -> str:
        """How a retry line names it."""
        return self.name

    def hint(self, cause: Cause) -> str:
        """What to check when it did not answer, or refused drctl, for `cause`."""
        raise NotImplementedError

    def rejected(self, message: str, hint: str, detail: str | None = None) -> DrctlError:
        """The error of a refusal (a configuration problem)."""
        raise NotImplementedError

    def on_status(self, code: int, what: str, detail: str, body: Any = None) -> Any:
        """What an error status other than 401/403 means: the call's result (a lookup that
        found nothing), or an error raised (`Transient` to try again). `body`: the answer's
        JSON document (None when it was not JSON), e.g. to tell the API's own "not found"
        from a proxy's."""
        raise NotImplementedError

    def not_json(self, method: str, path: str) -> DrctlError:
        """The error of an answer that is not JSON."""
        return DrctlError(f"{self.name} answered {method} {path} with something that is not "
                          "JSON: is the URL right?")

    def unreachable(self, message: str, hint: str | None,
                    detail: str | None) -> EndpointUnreachable:
        """The error once its retries ran out without an answer."""
        return EndpointUnreachable(self.url, message, hint, detail=detail)

    def url_of(self, path: str) -> str:
        return self.url + path

    # -- calls ----------------------------------------------------------------------------

    def request(self, method: str, path: str, body: Any = None, *,
                content_type: str | None = None) -> Any:
        """One call, retried while transient; `content_type`: the body's, when not the
        endpoint's own (a Kubernetes JSON patch)."""
        started = time.monotonic()

        def on_retry(attempt: int, exc: BaseException, delay: float) -> None:
            if self.notify is not None and isinstance(exc, Transient):
                self.notify(f"{self.label}: {exc.cause}; attempt {attempt}, retrying in "
                            f"{format_duration(delay)}")

        try:
            return retry_call(
                lambda: self._once(method, path, body,
                                   time_left(self.policy, started, cap_s=self.timeout_s),
                                   content_type),
                self.policy, retry_on=(Transient,), on_retry=on_retry)
        except RetriesExhausted as exc:
            assert isinstance(exc.last, Transient)
            error = exc.last.error
            if isinstance(error, Unreachable):
                raise self.unreachable(f"{error.message} ({exc.attempts} attempt(s) over "
                                       f"{exc.elapsed_s:.0f} s).", error.hint,
                                       error.detail).measured(exc.elapsed_s,
                                                              exc.deadline_s) from exc
            raise error from exc

    def error_status(self, method: str, path: str, exc: urllib.error.HTTPError) -> Any:
        """What an answer with an error status means: a refusal (401, 403) raised, else
        `on_status` given the server's own words (its JSON `message` when it sent one)."""
        detail = exc.read().decode(errors="replace")
        try:
            body = json.loads(detail)
        except ValueError:
            body = None
        if isinstance(body, dict):
            detail = str(body.get("message", detail))
        what = f"{method} {path} with {exc.code}: {detail}"
        if exc.code in (401, 403):
            cause = Cause.AUTHENTICATION if exc.code == 401 else Cause.AUTHORIZATION
            # Its own words say what it refused.
            raise self.rejected(f"{self.name} refused drctl: {cause} ({what})",
                                self.hint(cause)) from exc
        return self.on_status(exc.code, what, detail, body)

    def _once(self, method: str, path: str, body: Any, timeout_s: float,
              content_type: str | None = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url_of(path), data=data, method=method)
        req.add_header("Accept", self.accept)
        if data is not None:
            req.add_header("Content-Type", content_type or self.content_type)
        if self._auth:
            req.add_header("Authorization", self._auth)
        try:
            with urllib.request.urlopen(req, timeout=timeout_s, context=self._tls) as resp:
                payload = resp.read()
        except urllib.error.HTTPError as exc:
            return self.error_status(method, path, exc)
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            if isinstance(reason, ssl.SSLCertVerificationError):
                raise self.rejected(f"{self.name}: {Cause.TLS} ({self.certificate} failed "
                                    "verification).", self.hint(Cause.TLS),
                                    str(reason.verify_message)) from exc
            cause = connect_cause(exc)
            raise Transient(Unreachable(f"{self.name} did not answer: {cause}", self.hint(cause),
                                        detail=str(reason)), str(cause)) from exc
        try:
            return json.loads(payload) if payload.strip() else None
        except ValueError as exc:
            raise self.not_json(method, path) from exc
