"""One client for a schema registry's Confluent API (`/schemas/ids/N`, `/subjects/...`), which
Confluent's registry, Karapace and Apicurio (under `/apis/ccompat/v7`) all serve.

Read-only but for `register`, which the lab and the tests use. A lookup that finds nothing
(HTTP 404) is an answer, None; a registry that does not answer within the deadline is
`Unreachable` (exit 4: parity unknown, never "in parity"); one that refuses drctl (401, 403,
an untrusted certificate) is `RegistryRejected`. Ids and their schemas never change in a
registry, so what one command looked up is asked once.
"""

from __future__ import annotations

import json
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from drctl.config import Config, HttpSettings
from drctl.errors import DrctlError, Unreachable, UsageError
from drctl.https import authorization, split_userinfo, tls_context
from drctl.kafka.causes import Cause, connect_cause
from drctl.registry.canonical import Schema
from drctl.retry import RetriesExhausted, RetryPolicy, retry_call, time_left
from drctl.timeparse import format_duration

# A registry that restarts answers within seconds; one that is down is reported as unknown
# rather than waited on for the policy's half hour. The command's --deadline replaces it.
REGISTRY_RETRY = RetryPolicy(deadline_s=20.0)
_CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


class RegistryError(DrctlError):
    """The registry answered with an error other than "not found"."""


class RegistryRejected(UsageError):
    """The registry refused drctl's login or its certificate failed verification: the
    configuration is wrong, and no retry changes that."""


class _Transient(Exception):
    def __init__(self, error: DrctlError, cause: str) -> None:
        super().__init__(error.message)
        self.error = error
        self.cause = cause


@dataclass(frozen=True)
class SubjectVersion:
    subject: str
    version: int
    id: int
    schema: Schema


class RegistryClient:
    def __init__(self, cluster: str, settings: HttpSettings, *,
                 policy: RetryPolicy = REGISTRY_RETRY, config_path: str | None = None,
                 notify: Callable[[str], object] | None = None) -> None:
        assert settings.url, "a registry's settings always have a URL (config.py)"
        url, user, password = split_userinfo(settings.url.rstrip("/"))
        username = settings.username
        if username is None and settings.token is None and user is not None:
            username, password = user, password  # https://user:pass@host/ is basic auth
        else:
            password = settings.password
        self.cluster = cluster
        self.url = url  # without credentials: it appears in messages
        self.timeout_s = settings.timeout_s
        self.policy = policy
        self.notify = notify
        self._auth = authorization(username, password, settings.token)
        key = f"clusters.{cluster}.schema_registry"
        self._tls = tls_context(settings.ca_file, settings.cert_file, settings.key_file,
                                config_path, keys=key, what="the schema registry") \
            if url.startswith("https:") else None
        self._schemas: dict[int, Schema | None] = {}
        self._versions: dict[int, list[tuple[str, int]]] = {}

    @classmethod
    def for_cluster(cls, config: Config, cluster: str, deadline_s: float | None = None,
                    notify: Callable[[str], object] | None = None) -> RegistryClient | None:
        """The registry of `cluster`, or None when the config names none."""
        settings = config.schema_registries.get(cluster)
        if settings is None:
            return None
        return cls(cluster, settings, policy=REGISTRY_RETRY.with_deadline(deadline_s),
                   config_path=str(config.path) if config.path else None, notify=notify)

    @property
    def name(self) -> str:
        """How messages name it: `secondary's registry (https://...)`."""
        return f"{self.cluster}'s registry ({self.url})"

    # -- lookups --------------------------------------------------------------------------

    def schema(self, schema_id: int) -> Schema | None:
        """The schema `schema_id` resolves to here; None when the registry has no such id."""
        if schema_id not in self._schemas:
            raw = self.get(f"/schemas/ids/{schema_id}")
            self._schemas[schema_id] = None if raw is None else Schema.from_registry(raw)
        return self._schemas[schema_id]

    def versions_of(self, schema_id: int) -> list[tuple[str, int]]:
        """Every (subject, version) registered with `schema_id` (none: the id is unknown)."""
        if schema_id not in self._versions:
            raw = self.get(f"/schemas/ids/{schema_id}/versions") or []
            self._versions[schema_id] = sorted((str(v["subject"]), int(v["version"]))
                                               for v in raw)
        return self._versions[schema_id]

    def latest(self, subject: str) -> SubjectVersion | None:
        """The subject's newest version; None when the registry has no such subject."""
        raw = self.get(f"/subjects/{_quoted(subject)}/versions/latest")
        if raw is None:
            return None
        return SubjectVersion(str(raw.get("subject", subject)), int(raw["version"]),
                              int(raw["id"]), Schema.from_registry(raw))

    def subjects(self) -> list[str]:
        return sorted(str(s) for s in self.get("/subjects") or [])

    def server_version(self) -> str | None:
        """What the registry says it is: Confluent's `/v1/metadata/version`, or Apicurio's
        system info beside its Confluent API; None when neither answers."""
        raw = self.get("/v1/metadata/version")
        if raw is not None:
            return str(raw.get("version"))
        if apicurio_root(self.url) is not None:
            info = self.get("/apis/registry/v2/system/info")
            if info is not None:
                return f"{info.get('name', 'apicurio-registry')} {info.get('version')}"
        return None

    def register(self, subject: str, schema: Schema) -> int:
        """Register `schema` under `subject` (idempotent): its id here."""
        raw = self.request("POST", f"/subjects/{_quoted(subject)}/versions",
                           schema.as_registered())
        return int(raw["id"])

    # -- HTTP -----------------------------------------------------------------------------

    def get(self, path: str) -> Any:
        """GET `path`: the JSON answer, None when the registry has no such thing (404)."""
        return self.request("GET", path)

    def request(self, method: str, path: str, body: Any = None) -> Any:
        started = time.monotonic()

        def on_retry(attempt: int, exc: BaseException, delay: float) -> None:
            if self.notify is not None and isinstance(exc, _Transient):
                self.notify(f"{self.name}: {exc.cause}; attempt {attempt}, retrying in "
                            f"{format_duration(delay)}")

        try:
            return retry_call(
                lambda: self._once(method, path, body,
                                   time_left(self.policy, started, cap_s=self.timeout_s)),
                self.policy, retry_on=(_Transient,), on_retry=on_retry)
        except RetriesExhausted as exc:
            assert isinstance(exc.last, _Transient)
            error = exc.last.error
            if isinstance(error, Unreachable):
                raise Unreachable(f"{error.message} ({exc.attempts} attempt(s) over "
                                  f"{exc.elapsed_s:.0f} s).", error.hint,
                                  detail=error.detail) from exc
            raise error from exc

    def _once(self, method: str, path: str, body: Any, timeout_s: float) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self._url_of(path), data=data, method=method)
        req.add_header("Accept", f"{_CONTENT_TYPE}, application/json")
        if data is not None:
            req.add_header("Content-Type", _CONTENT_TYPE)
        if self._auth:
            req.add_header("Authorization", self._auth)
        try:
            with urllib.request.urlopen(req, timeout=timeout_s, context=self._tls) as resp:
                payload = resp.read()
        except urllib.error.HTTPError as exc:
            text = exc.read().decode(errors="replace")
            try:
                detail = str(json.loads(text).get("message", text))
            except (ValueError, AttributeError):
                detail = text
            if exc.code == 404:
                return None
            what = f"{method} {path} with {exc.code}: {detail}"
            if exc.code in (401, 403):
                cause = Cause.AUTHENTICATION if exc.code == 401 else Cause.AUTHORIZATION
                raise RegistryRejected(f"{self.name} refused drctl: {cause} ({what})",
                                       registry_hint(self.cluster, cause)) from exc
            error = RegistryError(f"{self.name} answered {what}")
            if exc.code >= 500 or exc.code == 408:
                raise _Transient(error, f"answered {exc.code}") from exc
            raise error from exc
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            if isinstance(reason, ssl.SSLCertVerificationError):
                raise RegistryRejected(
                    f"{self.name}: {Cause.TLS} (its certificate failed verification).",
                    registry_hint(self.cluster, Cause.TLS),
                    detail=str(reason.verify_message)) from exc
            cause = connect_cause(exc)
            raise _Transient(Unreachable(f"{self.name} did not answer: {cause}",
                                         registry_hint(self.cluster, cause),
                                         detail=str(reason)), str(cause)) from exc
        try:
            return json.loads(payload) if payload.strip() else None
        except ValueError as exc:
            raise RegistryError(f"{self.name} answered {method} {path} with something that "
                                "is not JSON: is the URL its Confluent API?",
                                f"Check clusters.{self.cluster}.schema_registry.url (Apicurio: "
                                "https://host/apis/ccompat/v7).") from exc

    def _url_of(self, path: str) -> str:
        root = apicurio_root(self.url)
        if path.startswith("/apis/") and root is not None:
            return root + path  # Apicurio's own API, beside its Confluent one
        return self.url + path


def apicurio_root(url: str) -> str | None:
    """Apicurio's base URL (`https://host`) when `url` is its Confluent API
    (`https://host/apis/ccompat/v7`), else None."""
    head, sep, tail = url.rstrip("/").rpartition("/apis/ccompat/")
    return head if sep and tail.startswith("v") else None


def _quoted(subject: str) -> str:
    return urllib.parse.quote(subject, safe="")


def registry_hint(cluster: str, cause: Cause) -> str:
    """What to check when `cluster`'s registry did not answer, or refused drctl."""
    key = f"clusters.{cluster}.schema_registry"
    return {
        Cause.REFUSED: f"Nothing listens at that address: check {key}.url and that the "
                       "registry runs.",
        Cause.DNS: f"The host name does not resolve: check {key}.url and this machine's DNS.",
        Cause.TLS: f"Set {key}.ca_file to the CA that signed the registry's certificate (and "
                   "cert_file, key_file if it wants a client certificate).",
        Cause.AUTHENTICATION: f"Set {key}.username and password, or token, to credentials "
                              "the registry accepts.",
        Cause.AUTHORIZATION: "The registry knows drctl's credentials but does not let it "
                             "read: grant them read access to subjects and schemas.",
        Cause.TIMEOUT: "The registry did not answer in time: check that this machine reaches "
                       "it, or give a longer --deadline.",
    }.get(cause, f"Check that the registry runs and {key}.url.")


def check_registries(config: Config, deadline_s: float | None,
                     notify: Callable[[str], object] | None = None
                     ) -> tuple[list[dict[str, Any]], list[DrctlError]]:
    """Every configured registry asked once (`config check`): per cluster its URL, whether
    it answers, its version and how many subjects it has; and the errors of those that did
    not answer or refused drctl."""
    rows: list[dict[str, Any]] = []
    errors: list[DrctlError] = []
    for cluster in sorted(config.schema_registries):
        registry = RegistryClient.for_cluster(config, cluster, deadline_s, notify)
        assert registry is not None
        row: dict[str, Any] = {"cluster": cluster, "url": registry.url, "reachable": False,
                               "version": None, "subjects": None}
        try:
            row["subjects"] = len(registry.subjects())
            row["version"] = registry.server_version()
            row["reachable"] = True
        except DrctlError as exc:
            row["error"] = exc.message
            errors.append(exc)
        rows.append(row)
    return rows, errors
