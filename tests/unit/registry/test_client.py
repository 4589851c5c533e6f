"""The registry client against a local fake of Confluent's API (Apicurio's paths beside it):
not found is an answer, a refusal is a config problem, silence is unreachable — and the
`schema_registry` section that configures it (drctl/registry/client.py, drctl/config.py)."""

from __future__ import annotations

import base64
import json
import socket
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler

import pytest

from drctl.config import config_as_data, parse_config
from drctl.errors import ConfigError, ExitStatus, Unreachable
from drctl.registry.canonical import AVRO, Schema
from drctl.registry.client import (
    NotARegistry,
    RegistryClient,
    RegistryRejected,
    check_registries,
)
from drctl.retry import RetryPolicy
from tests.unit.support import http_server

FAST = RetryPolicy(initial_s=0.05, deadline_s=3)
SCHEMA = '{"type": "record", "name": "A", "fields": []}'


@dataclass
class FakeRegistry:
    url: str
    calls: list[tuple[str, str, str | None]] = field(default_factory=list)  # method, path, auth
    fail_first: list[int] = field(default_factory=list)  # statuses to answer first


@pytest.fixture
def registry() -> Iterator[FakeRegistry]:
    state = FakeRegistry("")

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def answer(self, status: int, body: object) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            state.calls.append(("GET", self.path, self.headers.get("Authorization")))
            if state.fail_first:
                return self.answer(state.fail_first.pop(0), {"message": "busy"})
            if self.headers.get("Authorization") == "Bearer wrong":
                return self.answer(401, {"message": "Unauthorized"})
            routes = {
                "/apis/ccompat/v7/schemas/ids/1": {"schema": SCHEMA},
                "/apis/ccompat/v7/schemas/ids/1/versions": [{"subject": "a-value",
                                                             "version": 1}],
                "/apis/ccompat/v7/subjects": ["a-value"],
                "/apis/ccompat/v7/subjects/a%2Fb-value/versions/latest": {
                    "subject": "a/b-value", "version": 2, "id": 1, "schema": SCHEMA},
                "/apis/registry/v2/system/info": {"name": "apicurio-registry",
                                                  "version": "2.4.2.Final"},
            }
            if self.path in routes:
                return self.answer(200, routes[self.path])
            return self.answer(404, {"error_code": 40403, "message": "not found"})

    with http_server(Handler) as url:
        state.url = url + "/apis/ccompat/v7"
        yield state


def client(url: str, **settings: object) -> RegistryClient:
    config = parse_config({"clusters": {"secondary": {
        "bootstrap.servers": "b:9092", "schema_registry": {"url": url, **settings}}}})
    found = RegistryClient.for_cluster(config, "secondary")
    assert found is not None
    found.policy = FAST
    return found


def test_lookups_and_not_found_answers(registry: FakeRegistry) -> None:
    reg = client(registry.url)
    assert reg.schema(1) == Schema(AVRO, SCHEMA)
    assert reg.schema(2) is None  # an id the registry lacks is an answer
    assert reg.versions_of(1) == [("a-value", 1)]
    assert reg.versions_of(2) == []
    latest = reg.latest("a/b-value")  # subjects are quoted in the path
    assert latest is not None and (latest.version, latest.id) == (2, 1)
    assert reg.latest("nope") is None
    assert reg.subjects() == ["a-value"]
    assert reg.server_version() == "apicurio-registry 2.4.2.Final"
    asked = len(registry.calls)
    assert reg.schema(1) is not None and reg.schema(2) is None
    assert len(registry.calls) == asked  # an id's schema never changes: asked once


def test_url_credentials_are_basic_auth_and_never_in_messages(registry: FakeRegistry) -> None:
    url = registry.url.replace("http://", "http://drctl:s3cret@")
    reg = client(url)
    assert "s3cret" not in reg.name
    reg.subjects()
    assert registry.calls[-1][2] == "Basic " + base64.b64encode(b"drctl:s3cret").decode()


def test_a_refusal_is_a_configuration_problem(registry: FakeRegistry) -> None:
    with pytest.raises(RegistryRejected) as refused:
        client(registry.url, token="wrong").subjects()
    assert refused.value.exit_status == ExitStatus.USAGE
    assert "clusters.secondary.schema_registry.username" in (refused.value.hint or "")


def test_a_busy_registry_is_asked_again(registry: FakeRegistry) -> None:
    registry.fail_first = [503, 503]
    assert client(registry.url).subjects() == ["a-value"]
    assert len(registry.calls) == 3


def test_a_registry_that_does_not_answer_is_unreachable() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(Unreachable) as silent:
        client(f"http://127.0.0.1:{port}").subjects()
    assert "secondary's registry" in silent.value.message
    assert "clusters.secondary.schema_registry.url" in (silent.value.hint or "")


def test_the_section_is_checked_and_its_secrets_masked(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError) as bad:
        parse_config({"clusters": {"p": {"bootstrap.servers": "a:1", "schema_registry": {
            "username": "u", "token": "t", "colour": "red"}}}})
    reasons = {p.key: p.reason for p in bad.value.problems}
    assert reasons["clusters.p.schema_registry.url"] == "required key is missing"
    assert reasons["clusters.p.schema_registry.token"] == "set a token or a username, not both"
    assert reasons["clusters.p.schema_registry.colour"] == "unknown key"
    monkeypatch.setenv("SR_PASSWORD", "hunter2")
    config = parse_config({"clusters": {"p": {"bootstrap.servers": "a:1", "schema_registry": {
        "url": "https://sr:8081", "username": "drctl", "password": "${env:SR_PASSWORD}"}}}})
    assert config.schema_registries["p"].password == "hunter2"
    assert "schema_registry" not in config.clusters["p"]  # never a librdkafka property
    shown = config_as_data(config)["clusters"]["p"]["schema_registry"]
    assert shown["password"] == "${env:SR_PASSWORD}"
    assert "hunter2" not in json.dumps(config_as_data(config))


def test_a_404_without_the_apis_error_code_is_no_registry() -> None:
    """An ingress's default backend answers 404 to everything: not an empty registry."""

    class DefaultBackend(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            data = b"default backend - 404"
            self.send_response(404)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    with http_server(DefaultBackend) as url:
        # `config check` asks each registry first and says what answers there.
        config = parse_config({"clusters": {"secondary": {
            "bootstrap.servers": "b:9092", "schema_registry": {"url": url}}}})
        rows, errors = check_registries(config, 3)
        assert [(r["reachable"], r["subjects"]) for r in rows] == [(False, None)]
        assert rows[0]["error"].startswith(f"secondary's registry ({url}) is not a schema "
                                           "registry: GET /subjects answered 404")
        assert [type(e) for e in errors] == [NotARegistry]
        reg = client(url)
        for ask in (reg.subjects, lambda: reg.schema(1), lambda: reg.latest("a-value")):
            with pytest.raises(NotARegistry) as wrong:
                ask()
            assert wrong.value.exit_status == ExitStatus.UNREACHABLE
            assert wrong.value.message.startswith(f"secondary's registry ({url}) is not a "
                                                   "schema registry: GET /")
            assert "answered 404 without the API's not-found error_code" in wrong.value.message
            assert "clusters.secondary.schema_registry.url" in (wrong.value.hint or "")
            assert wrong.value.url == url
        assert reg.server_version() is None


def test_a_wrong_path_whose_404s_carry_an_error_code_lists_no_subjects(
        registry: FakeRegistry) -> None:
    """Under a wrong version of the path every lookup is "not found", the API's error code
    and all; `/subjects`, which every registry answers with a list, tells it apart."""
    reg = client(registry.url.replace("/v7", "/v6"))
    assert reg.schema(1) is None
    with pytest.raises(NotARegistry) as wrong:
        reg.subjects()
    assert "/apis/ccompat/v6) is not a schema registry: GET /subjects answered 404 or " \
           "nothing, not a list of subjects" in wrong.value.message


def test_an_answer_that_is_not_json_is_no_registry() -> None:
    class Html(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            data = b"<html>Welcome</html>"
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    with http_server(Html) as url, pytest.raises(NotARegistry) as wrong:
        client(url).subjects()
    assert "is not a schema registry: GET /subjects answered with something that is not " \
           "JSON" in wrong.value.message


def test_a_404_for_a_path_the_api_lacks_is_no_registry_though_it_has_an_error_code() -> None:
    """Apicurio (measured, 2.4.2) and Confluent's registry answer a path their API lacks with
    their web server's 404 (`error_code` 404, or 0 under /apis/ccompat/v7): the registry's
    root without its API path is no registry; its 404xx codes are lookups that found
    nothing."""
    bodies = {"/subjects": {"error_code": 404, "message": "RESTEASY003210: Could not find "
                                                          "resource for full path"},
              "/schemas/ids/1": {"error_code": 0, "message": "RESTEASY003210"},
              "/schemas/ids/2": {"error_code": 40403, "message": "No content with id 2"},
              "/subjects/s/versions/latest": {"error_code": 40402, "message": "No version"}}

    class Apicurio(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            data = json.dumps(bodies[self.path]).encode()
            self.send_response(404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    with http_server(Apicurio) as url:
        reg = client(url)
        assert reg.schema(2) is None and reg.latest("s") is None
        for ask in (reg.subjects, lambda: reg.schema(1)):
            with pytest.raises(NotARegistry):
                ask()
