"""A small client for the Kubernetes API (discovery, get, create, JSON patch, delete) in
drctl's HTTP endpoint style (`drctl.kafka.http.JsonEndpoint`): retried while transient,
refusals never retried, the server's own words in the message, the token never shown."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from drctl.errors import DrctlError, UsageError
from drctl.kafka.causes import Cause
from drctl.kafka.http import EndpointUnreachable, JsonEndpoint, Transient
from drctl.kube.kubeconfig import KubeLogin
from drctl.retry import RetryPolicy

# The API server restarting or a control plane failing over answers again within seconds;
# a command's --deadline bounds it (`with_deadline`).
KUBE_RETRY = RetryPolicy(deadline_s=20.0)
JSON_PATCH = "application/json-patch+json"


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
        # A JSON patch whose `test` failed is the object changed under drctl, like a 409: the
        # API server answers 422 quoting the patch library ("testing value
        # /metadata/resourceVersion failed: test failed").
        if code == 409 or (code == 422 and "testing value" in detail
                           and "resourceversion" in detail.lower()):
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
