"""A schema registry in memory behind Confluent's API on loopback (ids, subjects, versions,
latest; a 404 carries the API's error_code), for the parity code to ask through the real
RegistryClient."""

from __future__ import annotations

import json
import re
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from typing import Any

from drctl.config import HttpSettings
from drctl.registry.canonical import Schema
from drctl.registry.client import RegistryClient
from drctl.retry import RetryPolicy
from tests.unit.support import http_server


class FakeRegistry:
    """Schemas registered under subjects, numbered in registration order (one id per
    distinct registered body, as a registry does)."""

    def __init__(self) -> None:
        self.ids: dict[int, Schema] = {}
        self.subjects: dict[str, list[int]] = {}  # subject -> ids of its versions, in order
        self.asked: list[str] = []

    def register(self, subject: str, schema: Schema) -> int:
        found = next((i for i, s in self.ids.items() if s == schema), None)
        schema_id = found if found is not None else len(self.ids) + 1
        self.ids[schema_id] = schema
        versions = self.subjects.setdefault(subject, [])
        if schema_id not in versions:
            versions.append(schema_id)
        return schema_id

    def answer(self, path: str) -> tuple[int, Any]:
        self.asked.append(path)
        if path == "/subjects":
            return 200, sorted(self.subjects)
        if m := re.fullmatch(r"/schemas/ids/(\d+)(/versions)?", path):
            schema_id = int(m.group(1))
            if schema_id not in self.ids:
                return 404, {"error_code": 40403, "message": f"Schema {schema_id} not found"}
            if m.group(2):
                return 200, [{"subject": s, "version": v + 1}
                             for s, ids in sorted(self.subjects.items())
                             for v, i in enumerate(ids) if i == schema_id]
            return 200, self.ids[schema_id].as_registered()
        if m := re.fullmatch(r"/subjects/([^/]+)/versions/(latest|-?\d+)", path):
            subject = urllib.parse.unquote(m.group(1))
            ids = self.subjects.get(subject)
            if not ids:
                return 404, {"error_code": 40401, "message": f"Subject {subject} not found"}
            index = len(ids) - 1 if m.group(2) in ("latest", "-1") else int(m.group(2)) - 1
            if not 0 <= index < len(ids):
                return 404, {"error_code": 40402, "message": "Version not found"}
            return 200, {"subject": subject, "version": index + 1, "id": ids[index],
                         **self.ids[ids[index]].as_registered()}
        return 404, {"error_code": 404, "message": "HTTP 404 Not Found"}


@contextmanager
def serving(registry: FakeRegistry, cluster: str) -> Iterator[RegistryClient]:
    """A RegistryClient of `cluster` asking `registry` over HTTP for the block."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            status, body = registry.answer(self.path)
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    with http_server(Handler) as url:
        yield RegistryClient(cluster, HttpSettings(url),
                             policy=RetryPolicy(initial_s=0.05, deadline_s=3))
