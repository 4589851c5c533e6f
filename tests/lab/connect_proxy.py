"""A pass-through HTTP proxy in front of a Kafka Connect worker that answers `GET /` with
another version — as a Confluent Platform worker writes its own (`7.6.1-ccs`) — and every
other request as the worker does: the lab's Apache worker seen as another vendor's."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler

from tests.unit.support import http_server


class VersionProxy:
    def __init__(self, upstream: str, version: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.version = version
        self.asked: Counter[str] = Counter()  # "METHOD /path" -> times
        self.url = ""
        self._lock = threading.Lock()

    def forward(self, method: str, path: str, body: bytes | None,
                headers: dict[str, str]) -> tuple[int, str, bytes]:
        """(status, content type, body) of the worker's answer, `GET /`'s version replaced."""
        with self._lock:
            self.asked[f"{method} {path}"] += 1
        request = urllib.request.Request(self.upstream + path, data=body, method=method,
                                         headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=60) as answer:
                status, payload = answer.status, answer.read()
                kind = answer.headers.get("Content-Type", "application/json")
        except urllib.error.HTTPError as exc:
            status, payload = exc.code, exc.read()
            kind = exc.headers.get("Content-Type", "application/json")
        if method == "GET" and path == "/" and status == 200:
            info = json.loads(payload)
            info["version"] = self.version
            payload = json.dumps(info).encode()
        return status, kind, payload


@contextmanager
def version_proxy(upstream: str, version: str) -> Iterator[VersionProxy]:
    """A VersionProxy serving on a free loopback port for the block."""
    proxy = VersionProxy(upstream, version)

    class Handler(BaseHTTPRequestHandler):
        def _pass(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else None
            headers = {k: v for k, v in self.headers.items()
                       if k.lower() in ("content-type", "accept", "authorization")}
            status, kind, payload = proxy.forward(self.command, self.path, body, headers)
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        do_GET = do_PUT = do_POST = do_DELETE = do_PATCH = _pass

        def log_message(self, format: str, *args: object) -> None:
            pass  # quiet: the test asserts on `asked`

    with http_server(Handler) as url:
        proxy.url = url
        yield proxy
