"""drctl's one Kubernetes client (`drctl.kube.api.KubeClient`), the calls the lab and its
operator make beside drctl's own: merge patches, create-or-merge, /readyz, watch streams, and
a failed JSON-patch `test` told from a refusal by the server's answer."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from drctl.kube.api import KubeClient, KubeConflict, KubeError
from drctl.kube.kubeconfig import KubeLogin
from drctl.retry import RetryPolicy

Seen = list[tuple[str, str, str, Any]]


def _handler(seen: Seen) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _send(self, code: int, body: Any, content_type: str = "application/json") -> None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _status(self, code: int, message: str, causes: list[str] | None = None) -> None:
            body: dict[str, Any] = {"kind": "Status", "code": code, "message": message,
                                    "reason": {404: "NotFound", 409: "AlreadyExists",
                                               422: "Invalid"}.get(code, "Unknown")}
            if causes:
                body["details"] = {"causes": [{"message": c} for c in causes]}
            self._send(code, body)

        def do_GET(self) -> None:
            seen.append(("GET", self.path, "", None))
            if self.path == "/readyz":
                return self._send(200, b"ok", "text/plain")
            if self.path.startswith("/w?watch=1"):
                lines = b"".join(json.dumps({"type": t, "object": {"n": i}}).encode() + b"\n"
                                 for i, t in enumerate(("ADDED", "MODIFIED")))
                return self._send(200, lines)
            return self._status(404, "not found")

        def _write(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length))
            seen.append((self.command, self.path, self.headers["Content-Type"], body))
            if self.command == "POST":
                return self._status(409, "already exists")
            if isinstance(body, list) and body[0]["op"] == "test":
                # kube-apiserver 1.34's answer to a `test` that failed: a bare Status.
                return self._status(422, "the server rejected our request due to an error "
                                         "in our request")
            return self._send(200, {"patched": body})

        do_POST = do_PATCH = _write

    return Handler


@pytest.fixture
def kube() -> Iterator[tuple[KubeClient, Seen]]:
    seen: Seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(seen))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    login = KubeLogin(f"http://127.0.0.1:{server.server_address[1]}", "a test", token="t")
    try:
        yield KubeClient(login, policy=RetryPolicy(attempts=1)), seen
    finally:
        server.shutdown()
        server.server_close()


def test_merge_patch_and_create_or_merge(kube: tuple[KubeClient, Seen]) -> None:
    client, seen = kube
    assert client.merge_patch("/o", {"a": None}) == {"patched": {"a": None}}
    assert seen[-1][2] == "application/merge-patch+json"
    body = {"metadata": {"name": "cm"}, "data": {"k": "v"}}
    assert client.apply("/c", body) == {"patched": body}  # exists (409): merged over it
    assert [(m, p) for m, p, _, _ in seen[-2:]] == [("POST", "/c"), ("PATCH", "/c/cm")]


def test_get_or_none_ready_and_watch(kube: tuple[KubeClient, Seen]) -> None:
    client, _ = kube
    assert client.get_or_none("/missing") is None
    assert client.ready()
    events = list(client.watch("/w", "7", 1))
    assert [e["type"] for e in events] == ["ADDED", "MODIFIED"]


def test_a_failed_patch_test_is_a_conflict_a_refusal_is_not(kube: tuple[KubeClient, Seen]
                                                              ) -> None:
    client, _ = kube
    with pytest.raises(KubeConflict) as info:
        client.json_patch("/o", [{"op": "test", "path": "/metadata/resourceVersion",
                                  "value": "1"}])
    assert info.value.status == 422
    with pytest.raises(KubeError) as refused:
        client.get("/missing")
    assert not isinstance(refused.value, KubeConflict)
