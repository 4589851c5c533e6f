"""One client for a schema registry's Confluent API (`/schemas/ids/N`, `/subjects/...`), which
Confluent's registry, Karapace and Apicurio (under `/apis/ccompat/v7`) all serve.

Read-only but for `register`, which the lab and the tests use. A lookup that finds nothing
(HTTP 404 with the API's not-found `error_code`, e.g. `{"error_code": 40403, ...}`) is an
answer, None; a 404 without one, a `/subjects` that is no list, or an answer that is not
JSON, is `NotARegistry` (a wrong path, an ingress's default backend: exit 4 naming the URL,
never an empty registry whose lack of everything reads as "in parity"); a registry that does
not answer within the deadline is `Unreachable` (exit 4: parity unknown, never "in
parity"); one that refuses drctl (401, 403, an untrusted certificate) is `RegistryRejected`.
Ids and their schemas never change in a registry, so what one command looked up is asked
once.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from drctl.config import Config, HttpSettings
from drctl.errors import DrctlError, UsageError
from drctl.kafka.causes import Cause
from drctl.kafka.http import EndpointUnreachable, JsonEndpoint, Transient
from drctl.registry.canonical import Schema
from drctl.retry import RetryPolicy

# A registry that restarts answers within seconds; one that is down is reported as unknown
# rather than waited on for the policy's half hour. The command's --deadline replaces it.
REGISTRY_RETRY = RetryPolicy(deadline_s=20.0)


class RegistryError(DrctlError):
    """The registry answered with an error other than "not found"."""


class RegistryRejected(UsageError):
    """The registry refused drctl's login or its certificate failed verification: the
    configuration is wrong, and no retry changes that."""


class NotARegistry(EndpointUnreachable):
    """What answers at the URL is not a schema registry's Confluent API: a 404 without the
    API's not-found `error_code`, a `/subjects` that is no list, an answer that is not JSON.
    The registry was not reached (exit 4, its URL named); asking again changes nothing."""


@dataclass(frozen=True)
class SubjectVersion:
    subject: str
    version: int
    id: int
    schema: Schema


class RegistryClient(JsonEndpoint):
    content_type = "application/vnd.schemaregistry.v1+json"
    accept = f"{content_type}, application/json"

    def __init__(self, cluster: str, settings: HttpSettings, *,
                 policy: RetryPolicy = REGISTRY_RETRY, config_path: str | None = None,
                 notify: Callable[[str], object] | None = None) -> None:
        assert settings.url, "a registry's settings always have a URL (config.py)"
        super().__init__(settings.url, username=settings.username, password=settings.password,
                         token=settings.token, ca_file=settings.ca_file,
                         cert_file=settings.cert_file, key_file=settings.key_file,
                         timeout_s=settings.timeout_s, policy=policy, config_path=config_path,
                         notify=notify, keys=f"clusters.{cluster}.schema_registry",
                         what="the schema registry")
        self.cluster = cluster
        self._schemas: dict[int, Schema | None] = {}
        self._versions: dict[int, list[tuple[str, int]]] = {}
        self._subject_versions: dict[tuple[str, int], Schema | None] = {}

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

    def version(self, subject: str, version: int) -> Schema | None:
        """The schema of one version of a subject (what a reference names); None when the
        registry has no such subject or version."""
        if (subject, version) not in self._subject_versions:
            raw = self.get(f"/subjects/{_quoted(subject)}/versions/{version}")
            self._subject_versions[subject, version] = (None if raw is None
                                                        else Schema.from_registry(raw))
        return self._subject_versions[subject, version]

    def subjects(self) -> list[str]:
        """Every subject; an answer that is no list of names is no registry's."""
        raw = self.get("/subjects")
        if not isinstance(raw, list):
            raise self._not_a_registry(f"GET /subjects answered {_shown(raw)}, not a list of "
                                       "subjects")
        return sorted(str(s) for s in raw)

    def server_version(self) -> str | None:
        """What the registry says it is: Confluent's `/v1/metadata/version`, or Apicurio's
        system info beside its Confluent API; None when neither answers (a registry older
        than the call may answer it with a bare 404)."""
        try:
            raw = self.get("/v1/metadata/version")
            if isinstance(raw, dict):
                return str(raw.get("version"))
            if apicurio_root(self.url) is not None:
                info = self.get("/apis/registry/v2/system/info")
                if isinstance(info, dict):
                    return f"{info.get('name', 'apicurio-registry')} {info.get('version')}"
        except NotARegistry:
            pass
        return None

    def register(self, subject: str, schema: Schema) -> int:
        """Register `schema` under `subject` (idempotent): its id here."""
        raw = self.request("POST", f"/subjects/{_quoted(subject)}/versions",
                           schema.as_registered())
        return int(raw["id"])

    # -- HTTP -----------------------------------------------------------------------------

    def get(self, path: str) -> Any:
        """GET `path`: the JSON answer, None when the registry has no such thing (its
        404)."""
        return self.request("GET", path)

    def hint(self, cause: Cause) -> str:
        return registry_hint(self.cluster, cause)

    def rejected(self, message: str, hint: str, detail: str | None = None) -> DrctlError:
        return RegistryRejected(message, hint, detail=detail)

    def on_status(self, code: int, what: str, detail: str, body: Any = None) -> Any:
        """404 with one of the API's not-found codes (`error_code` 404xx: 40401 subject,
        40402 version, 40403 schema...): nothing of that id or subject, an answer. 404
        without one: not a registry — no error body (a proxy), or the web server's own
        "no such resource" (Confluent's and Apicurio's say `error_code` 404 or 0 for a path
        their API lacks). 5xx and 408: worth another try."""
        if code == 404:
            if _not_found_code(body):
                return None
            raise self._not_a_registry(f"{what.partition(' with ')[0]} answered 404 without "
                                       "the API's not-found error_code")
        error = RegistryError(f"{self.name} answered {what}")
        if code >= 500 or code == 408:
            raise Transient(error, f"answered {code}")
        raise error

    def not_json(self, method: str, path: str) -> DrctlError:
        return self._not_a_registry(f"{method} {path} answered with something that is not "
                                    "JSON")

    def _not_a_registry(self, seen: str) -> NotARegistry:
        key = f"clusters.{self.cluster}.schema_registry.url"
        return NotARegistry(
            self.url, f"{self.name} is not a schema registry: {seen} (a wrong path, e.g. "
            "Apicurio's root without /apis/ccompat/v7, or a proxy's default backend).",
            f"Set {key} to the registry's Confluent API: https://host:8081 for Confluent's "
            "registry and Karapace, https://host/apis/ccompat/v7 for Apicurio.")

    def url_of(self, path: str) -> str:
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


def _not_found_code(body: Any) -> bool:
    """Whether an error body is the Confluent API's "not found" (`error_code` 40401...)."""
    code = body.get("error_code") if isinstance(body, dict) else None
    return isinstance(code, int) and 40400 <= code <= 40499


def _shown(raw: Any) -> str:
    if raw is None:
        return "404 or nothing"
    text = repr(raw)
    return text if len(text) <= 60 else text[:57] + "..."


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
