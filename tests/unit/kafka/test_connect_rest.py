"""Kafka Connect's REST API over HTTPS: a private CA, a client certificate, a bearer
token, URL credentials as basic auth, retries of transient answers and a clear refusal —
against a real local HTTPS server (drctl/kafka/connect_rest.py)."""

from __future__ import annotations

import json
import shutil
import ssl
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from drctl.config import ReplicationSettings, parse_config
from drctl.errors import ConfigError, ExitStatus, Unreachable
from drctl.kafka.connect_rest import ConnectClient, ConnectError, ConnectorMissing, ConnectRejected
from drctl.replication.base import kind_for
from drctl.replication.connect import connect_client
from drctl.retry import RetryPolicy

FAST = RetryPolicy(initial_s=0.05, deadline_s=5)


TOKEN = "t0ken-for-tests"


@dataclass
class Certs:
    ca: Path
    server: tuple[Path, Path]
    client: tuple[Path, Path]


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    """A private CA, and a server and a client certificate it signed."""
    if shutil.which("openssl") is None:
        pytest.fail("openssl is needed to make test certificates")
    d = tmp_path_factory.mktemp("certs")
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
             "/CN=drctl-test-ca", "-keyout", str(d / "ca.key"), "-out", str(d / "ca.pem"))
    for name, ext in (("server", "subjectAltName=IP:127.0.0.1"),
                      ("client", "extendedKeyUsage=clientAuth")):
        (d / f"{name}.ext").write_text(ext + "\n")
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN=drctl-{name}",
                 "-keyout", str(d / f"{name}.key"), "-out", str(d / f"{name}.csr"))
        _openssl("x509", "-req", "-in", str(d / f"{name}.csr"), "-CA", str(d / "ca.pem"),
                 "-CAkey", str(d / "ca.key"), "-CAcreateserial", "-days", "1",
                 "-extfile", str(d / f"{name}.ext"), "-out", str(d / f"{name}.pem"))
    return Certs(d / "ca.pem", (d / "server.pem", d / "server.key"),
                 (d / "client.pem", d / "client.key"))


@dataclass
class Worker:
    """What the fake worker was asked, and the failures it still has to give."""

    url: str
    calls: list[str] = field(default_factory=list)
    failures: dict[str, list[tuple[int, object]]] = field(default_factory=dict)
    # Seconds the worker holds a call before it answers, once (a herder still joining).
    held: dict[str, float] = field(default_factory=dict)


@pytest.fixture
def worker(certs: Certs) -> Iterator[Worker]:
    """An HTTPS server speaking enough of Connect's API; it requires a client certificate
    signed by the test CA and the bearer token."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(*certs.server)
    context.load_verify_locations(certs.ca)
    context.verify_mode = ssl.CERT_REQUIRED
    state = Worker("")

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass  # quiet test output

        def answer(self) -> None:
            call = f"{self.command} {self.path}"
            state.calls.append(call)
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                return self.reply(401, {"message": "Unauthorized"})
            time.sleep(state.held.pop(call, 0.0))
            pending = state.failures.get(call)
            if pending:
                return self.reply(*pending.pop(0))
            if call == "GET /":
                return self.reply(200, {"version": "4.0.0"})
            if call.endswith("/status"):
                return self.reply(200, {"connector": {"state": "STOPPED"}, "tasks": []})
            return self.reply(204, None)

        def reply(self, code: int, body: object) -> None:
            data = b"" if body is None else json.dumps(
                body if not isinstance(body, str) else {"message": body}).encode()
            self.send_response(code)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_PUT = do_POST = answer

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    state.url = f"https://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield state
    server.shutdown()
    server.server_close()


def _rep(worker: Worker, certs: Certs, **connect: str) -> ReplicationSettings:
    settings = {"url": worker.url, "token": "${env:DRCTL_TEST_CONNECT_TOKEN}",
                "ca_file": str(certs.ca), "cert_file": str(certs.client[0]),
                "key_file": str(certs.client[1]), "source_connector": "src", **connect}
    config = parse_config({
        "clusters": {"a": {"bootstrap.servers": "x"}, "b": {"bootstrap.servers": "y"}},
        "replication": {"kind": "mirrormaker2", "source": "a", "target": "b",
                        "connect": {k: v for k, v in settings.items() if v}}})
    return config.require_replication()


@pytest.fixture(autouse=True)
def _token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DRCTL_TEST_CONNECT_TOKEN", TOKEN)


def test_private_ca_client_certificate_and_bearer_token_from_the_config(
        worker: Worker, certs: Certs) -> None:
    client = connect_client(_rep(worker, certs))
    assert client is not None
    assert client.info() == {"version": "4.0.0"}
    assert kind_for(_rep(worker, certs)).component_states(_rep(worker, certs)) == \
        {"src": "STOPPED"}


def test_without_the_ca_the_worker_is_refused_not_unreachable(
        worker: Worker, certs: Certs) -> None:
    client = ConnectClient(worker.url, token=TOKEN, policy=FAST)
    with pytest.raises(ConnectRejected) as info:
        client.info()
    assert info.value.exit_status == ExitStatus.USAGE
    assert worker.url in info.value.message and "certificate" in info.value.message
    assert info.value.hint and "ca_file" in info.value.hint


def test_wrong_token_is_a_clear_exit_2_naming_the_worker(worker: Worker, certs: Certs) -> None:
    client = ConnectClient(worker.url, token="wrong", ca_file=str(certs.ca),
                           cert_file=str(certs.client[0]), key_file=str(certs.client[1]),
                           policy=FAST)
    with pytest.raises(ConnectRejected) as info:
        client.info()
    assert info.value.exit_status == ExitStatus.USAGE
    assert f"Kafka Connect at {worker.url} refused drctl" in info.value.message
    assert "401" in info.value.message
    assert worker.calls == ["GET /"]  # never retried


def test_a_refused_stop_ends_the_failover_step_with_exit_2(worker: Worker, certs: Certs) -> None:
    worker.failures["PUT /connectors/src/stop"] = [(403, "not allowed to stop connectors")]
    rep = _rep(worker, certs)
    with pytest.raises(ConnectRejected) as info:
        kind_for(rep).stop_forward(rep)
    assert info.value.exit_status == ExitStatus.USAGE
    assert info.value.message.startswith("Replication was not stopped: Kafka Connect at "
                                         f"{worker.url} refused drctl")
    assert "not allowed to stop connectors" in info.value.message


def test_transient_answers_are_retried_under_the_policy(worker: Worker, certs: Certs) -> None:
    worker.failures["GET /connectors/src/status"] = [(503, "starting"), (500, "oops")]
    worker.failures["PUT /connectors/src/stop"] = [
        (409, "Cannot complete request momentarily due to stale configuration (typically "
              "caused by a concurrent config change or a rebalance)")]
    client = ConnectClient(worker.url, token=TOKEN, ca_file=str(certs.ca),
                           cert_file=str(certs.client[0]), key_file=str(certs.client[1]),
                           policy=FAST)
    assert client.connector_state("src") == ("STOPPED", [])
    client.stop("src")
    assert worker.calls.count("GET /connectors/src/status") == 3
    assert worker.calls.count("PUT /connectors/src/stop") == 2


def test_a_worker_starting_answers_404_before_its_rest_api_is_up_and_is_waited_for(
        worker: Worker, certs: Certs) -> None:
    """Issue 53, a drill campaign's round (seed 17, step failover): the Connect worker
    SIGTERMed and started again, its web server answered `GET /` with 404 before Connect
    installed its REST resources, and failover ended on it as on a missing connector. A 404
    on the root, or without Connect's own error document, is asked again within the
    deadline (then unreachable: exit 4); Connect's own 404 is a missing connector at once."""
    jetty = {"servlet": "default", "message": "Not Found", "url": "/", "status": "404"}
    worker.failures["GET /"] = [(404, jetty), (404, jetty)]
    worker.failures["GET /connectors/src/status"] = [(404, "Not Found")]
    worker.failures["GET /connectors/gone/status"] = [
        (404, {"error_code": 404, "message": "No status found for connector gone"})]
    client = ConnectClient(worker.url, token=TOKEN, ca_file=str(certs.ca),
                           cert_file=str(certs.client[0]), key_file=str(certs.client[1]),
                           policy=FAST)
    assert client.info() == {"version": "4.0.0"}
    assert client.connector_state("src") == ("STOPPED", [])
    with pytest.raises(ConnectorMissing):
        client.status("gone")
    assert worker.calls.count("GET /") == 3
    assert worker.calls.count("GET /connectors/src/status") == 2
    assert worker.calls.count("GET /connectors/gone/status") == 1

    worker.failures["GET /"] = [(404, jetty)] * 100  # never up: a wrong URL reads the same
    client.policy = RetryPolicy(initial_s=0.05, deadline_s=0.5)
    with pytest.raises(Unreachable) as info:
        client.info()
    assert info.value.exit_status == ExitStatus.UNREACHABLE
    assert "answered GET / with 404" in info.value.message, info.value.message
    assert info.value.hint and "replication.connect.url" in info.value.hint


def test_a_conflict_that_is_no_rebalance_is_not_retried(worker: Worker, certs: Certs) -> None:
    worker.failures["POST /connectors"] = [(409, "Connector src already exists")]
    client = ConnectClient(worker.url, token=TOKEN, ca_file=str(certs.ca),
                           cert_file=str(certs.client[0]), key_file=str(certs.client[1]),
                           policy=FAST)
    with pytest.raises(ConnectError) as info:
        client.create("src", {})
    assert info.value.status == 409 and worker.calls == ["POST /connectors"]


def test_a_worker_that_is_down_is_unreachable_after_the_policy(certs: Certs) -> None:
    client = ConnectClient("https://127.0.0.1:9", policy=RetryPolicy(initial_s=0.05,
                                                                      deadline_s=0.3))
    with pytest.raises(Unreachable) as info:
        client.info()
    assert info.value.message.startswith("Kafka Connect at https://127.0.0.1:9 did not "
                                         "answer: connection refused (")
    assert "attempt(s)" in info.value.message
    assert info.value.hint and "replication.connect.url" in info.value.hint
    assert "Connection refused" in (info.value.detail or "")  # urllib's words: --debug


def test_each_attempt_waits_no_longer_than_the_deadline_leaves_and_each_retry_is_said(
        ) -> None:
    """A worker that accepts and never answers holds each attempt for its timeout (here 1 s):
    retried, each retry said, until the deadline decides — never past it by more than the
    last attempt."""
    import socket
    import time

    said: list[str] = []
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        client = ConnectClient(url, timeout_s=1, notify=said.append,
                               policy=RetryPolicy(initial_s=0.2, deadline_s=2.5))
        started = time.monotonic()
        with pytest.raises(Unreachable) as info:
            client.info()
        took = time.monotonic() - started
    assert took < 2.5 + 1 + 1  # the deadline, one last attempt of at least a second, slack
    assert ": timed out (" in info.value.message
    assert said and said[0].startswith(f"Kafka Connect ({url}): timed out; attempt 1, "
                                       "retrying in")


def test_unreadable_tls_files_are_config_errors(tmp_path: Path, certs: Certs) -> None:
    with pytest.raises(ConfigError) as info:
        ConnectClient("https://127.0.0.1:9", ca_file=str(tmp_path / "missing-ca.pem"))
    assert info.value.key == "replication.connect.ca_file"
    with pytest.raises(ConfigError) as info:
        ConnectClient("https://127.0.0.1:9", cert_file=str(certs.client[0]),
                      key_file=str(certs.server[0]))  # a certificate is no key
    assert info.value.key == "replication.connect.cert_file"


def test_token_and_username_together_are_a_config_error(worker: Worker, certs: Certs) -> None:
    with pytest.raises(ConfigError, match="set a token or a username, not both"):
        _rep(worker, certs, username="u")


def test_connect_takes_url_credentials_as_basic_auth_and_names_the_bare_url() -> None:
    client = ConnectClient("https://operator:p%40ss@connect.example:8083/")
    assert client.url == "https://connect.example:8083"
    assert client._auth == "Basic b3BlcmF0b3I6cEBzcw=="  # operator:p@ss



def test_the_command_deadline_bounds_the_connect_retries_of_a_stop() -> None:
    """Failover's --deadline bounds how long a Connect worker that does not answer is retried
    (the worker's own policy alone: 20 s); the stop is then left pending."""
    rep = parse_config({
        "clusters": {"a": {"bootstrap.servers": "x"}, "b": {"bootstrap.servers": "y"}},
        "replication": {"kind": "mirrormaker2", "source": "a", "target": "b",
                        # Port 9 on loopback: nothing listens there.
                        "connect": {"url": "http://127.0.0.1:9", "source_connector": "src"}},
    }).require_replication()
    client = connect_client(rep, 0.5)
    assert client is not None and client.policy.deadline_s == 0.5
    assert connect_client(rep).policy.deadline_s == 20.0  # type: ignore[union-attr]
    outcome = kind_for(rep).stop_forward(rep, reach_deadline_s=0.5)
    assert outcome.state == "pending" and outcome.connectors == ["src"]
    assert "http://127.0.0.1:9 is unreachable" in outcome.detail


def test_a_worker_that_answers_but_holds_the_stop_is_waited_for_not_left_pending(
        worker: Worker, certs: Certs) -> None:
    """A restarted worker answers `GET /` before its herder has joined the group, and holds
    a stop until then: reachable, so the stop is waited for (within the stop's own bound),
    however short the command's --deadline."""
    worker.held["PUT /connectors/src/stop"] = 1.5
    outcome = kind_for(_rep(worker, certs)).stop_forward(_rep(worker, certs),
                                                         reach_deadline_s=0.5)
    assert outcome.state == "stopped", outcome
    assert worker.calls.count("PUT /connectors/src/stop") == 1
