"""A small client for the Kubernetes API (discovery, get, create, JSON and merge patches,
delete, watch) in drctl's HTTP endpoint style (`drctl.kafka.http.JsonEndpoint`): retried while
transient, refusals never retried, the server's own words in the message, the token never
shown. The one client: drctl's Strimzi control and the lab (its API server, its operator)
speak through it."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from drctl.errors import DrctlError, UsageError
from drctl.kafka.causes import Cause
from drctl.kafka.http import EndpointUnreachable, JsonEndpoint, Transient
from drctl.kube.kubeconfig import KubeLogin, load_login
from drctl.retry import RetryPolicy

# The API server restarting or a control plane failing over answers again within seconds;
# a command's --deadline bounds it (`with_deadline`).
KUBE_RETRY = RetryPolicy(deadline_s=20.0)
JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"


class KubeError(DrctlError):
    """The API server answered with an error status (its Status message quoted)."""

    def __init__(self, message: str, status: int, reason: str | None = None,
                 hint: str | None = None) -> None:
        super().__init__(message, hint)
        self.status = status
        self.reason = reason  # the Status object's reason: NotFound, Conflict, Invalid...


class KubeNotFound(KubeError):
    pass


class KubeConflict(KubeError):
    """The object changed since drctl read it (409, or a JSON patch `test` that failed):
    read it again and decide again."""


class KubeRejected(UsageError):
    """The API server refused drctl (401/403) or its certificate failed verification."""


class KubeUnreachable(EndpointUnreachable):
    pass


_HINTS = {
    Cause.AUTHENTICATION: "The kubeconfig's token or client certificate is not accepted: "
                          "renew it (a service account token expires).",
    Cause.AUTHORIZATION: "Grant drctl's identity get/list/patch/create on "
                         "kafkamirrormaker2s.kafka.strimzi.io and get/create/update on "
                         "configmaps in the flow's namespaces (a Role and RoleBinding).",
    Cause.TLS: "Check the kubeconfig's certificate-authority(-data) for this server.",
}


class KubeClient(JsonEndpoint):
    certificate = "the API server's certificate"

    def __init__(self, login: KubeLogin, *, timeout_s: float = 10.0,
                 policy: RetryPolicy = KUBE_RETRY,
                 notify: Callable[[str], object] | None = None) -> None:
        super().__init__(login.server, username=login.username, password=login.password,
                         token=login.token, timeout_s=timeout_s, policy=policy,
                         notify=notify, keys="replication.strimzi",
                         what="the Kubernetes API")
        self.login = login
        if login.tls is not None:
            self._tls = login.tls

    @classmethod
    def from_kubeconfig(cls, path: Path | str, context: str | None = None,
                        **kwargs: Any) -> KubeClient:
        return cls(load_login(str(path), context), **kwargs)

    @property
    def name(self) -> str:
        return f"the Kubernetes API at {self.url}"

    def hint(self, cause: Cause) -> str:
        return _HINTS.get(cause, f"Is the API server up, and is {self.login.source} the "
                                 "cluster's?")

    def rejected(self, message: str, hint: str, detail: str | None = None) -> DrctlError:
        return KubeRejected(message, hint, detail=detail)

    def unreachable(self, message: str, hint: str | None,
                    detail: str | None) -> KubeUnreachable:
        return KubeUnreachable(self.url, message, hint, detail=detail)

    def on_status(self, code: int, what: str, detail: str, body: Any = None) -> Any:
        reason = body.get("reason") if isinstance(body, dict) else None
        message = f"{self.name} answered {what}"
        if code >= 500 or code == 429:
            raise Transient(KubeError(message, code, reason), f"answered {code}")
        if code == 404:
            raise KubeNotFound(message, code, reason)
        if code == 409 or (code == 422 and patch_not_applied(body)):
            # The object is not as the caller read it: read it again and decide again
            # (a JSON patch guarded by a `test` of its resourceVersion).
            raise KubeConflict(message, code, reason)
        raise KubeError(message, code, reason)

    # -- calls ----------------------------------------------------------------------------

    def get(self, path: str) -> Any:
        return self.request("GET", path)

    def create(self, path: str, body: dict[str, Any]) -> Any:
        return self.request("POST", path, body)

    def replace(self, path: str, body: dict[str, Any]) -> Any:
        return self.request("PUT", path, body)

    def json_patch(self, path: str, ops: Sequence[dict[str, Any]]) -> Any:
        return self.request("PATCH", path, list(ops), content_type=JSON_PATCH)

    def merge_patch(self, path: str, patch: Mapping[str, Any]) -> Any:
        """A JSON merge patch (RFC 7386): a key set to None is removed."""
        return self.request("PATCH", path, dict(patch), content_type=MERGE_PATCH)

    def get_or_none(self, path: str) -> Any:
        try:
            return self.get(path)
        except KubeNotFound:
            return None

    def apply(self, collection: str, obj: Mapping[str, Any]) -> Any:
        """Create `obj` in `collection`, or merge it over the one of its name."""
        try:
            return self.create(collection, dict(obj))
        except KubeError as exc:
            if exc.status != 409:
                raise
            return self.merge_patch(f"{collection}/{obj['metadata']['name']}", obj)

    def ready(self) -> bool:
        """Whether `/readyz` answers 200 (every check of the server passed); an answer of
        another status raises like any call."""
        with self._raw("/readyz", self.timeout_s) as resp:
            return bool(resp.status == 200)

    def watch(self, path: str, resource_version: str, timeout_s: float
              ) -> Iterator[dict[str, Any]]:
        """The watch events on `path` after `resource_version`, for up to `timeout_s` (the
        server ends the watch then). Not retried: a caller lists and watches again."""
        sep = "&" if "?" in path else "?"
        query = (f"{sep}watch=1&allowWatchBookmarks=false&resourceVersion={resource_version}"
                 f"&timeoutSeconds={max(1, int(timeout_s))}")
        with self._raw(path + query, timeout_s + 5) as resp:
            for line in resp:
                if line.strip():
                    yield json.loads(line)

    def _raw(self, path: str, timeout_s: float) -> Any:
        """A GET whose answer is read by the caller (a stream, or no JSON at all), tried
        once; an error status means what it means for any call (`error_status`)."""
        req = urllib.request.Request(self.url_of(path), method="GET")
        req.add_header("Accept", self.accept)
        if self._auth:
            req.add_header("Authorization", self._auth)
        try:
            return urllib.request.urlopen(req, timeout=timeout_s, context=self._tls)
        except urllib.error.HTTPError as exc:
            try:
                return self.error_status("GET", path, exc)
            except Transient as transient:
                raise transient.error from exc

    def delete(self, path: str) -> Any:
        return self.request("DELETE", path)

    def served_versions(self, group: str) -> tuple[list[str], str | None]:
        """The versions of API group `group` the server serves, and its preferred one
        (`GET /apis/<group>`); ([], None) when it serves none (the CRDs are not installed)."""
        try:
            doc = self.get(f"/apis/{group}") or {}
        except KubeNotFound:
            return [], None
        versions = [str(v.get("version")) for v in doc.get("versions") or []]
        preferred = (doc.get("preferredVersion") or {}).get("version")
        return versions, str(preferred) if preferred else None


def patch_not_applied(body: Any) -> bool:
    """Whether a 422 says a JSON patch could not be applied to the object as it stands (a
    `test` that failed: the object changed since it was read; or a path no longer there),
    not that the patched object was refused. kube-apiserver 1.34 answers the former with a
    bare Status — reason Invalid, "the server rejected our request due to an error in our
    request", empty details — and a schema refusal with details naming the object and its
    causes (measured on the lab's server). Older servers quote the patch library in a cause:
    "testing value /metadata/resourceVersion failed: test failed"."""
    if not isinstance(body, dict) or body.get("reason") not in (None, "Invalid"):
        return False
    details = body.get("details") or {}
    causes = [c for c in details.get("causes") or [] if isinstance(c, dict)]
    if any("testing value" in str(c.get("message") or "") for c in causes):
        return True
    return not causes and not details.get("name") and not details.get("kind")
