"""Errors that name their cause: librdkafka's own reason (refused, TLS, rejected settings) with
the cluster, against real sockets on loopback (no broker needed to refuse or to fail TLS)."""

from __future__ import annotations

import shutil
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaError

from drctl.cli.app import main
from drctl.errors import ConfigError, ExitStatus, Unreachable
from drctl.kafka.clients import ClusterClients, NoAnswer, describe_with_retry
from drctl.retry import RetryPolicy


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _write(tmp_path: Path, clusters: str) -> Path:
    cfg = tmp_path / "drctl.yaml"
    cfg.write_text(f"clusters:\n{clusters}retry: {{initial_s: 0.2}}\n")
    return cfg


def test_wrong_port_fails_with_the_refusal_in_seconds(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    port = _closed_port()
    cfg = _write(tmp_path, f"  payments: {{bootstrap.servers: '127.0.0.1:{port}'}}\n")
    started = time.monotonic()
    assert main(["--config", str(cfg), "config", "check", "--deadline", "3"]) == 4
    assert time.monotonic() - started < 15  # the deadline, not librdkafka's 30-60 s
    err = " ".join(capsys.readouterr().err.split())
    assert f"cluster 'payments' at 127.0.0.1:{port} did not answer: connection refused" in err
    assert "Timed out" not in err and "ipv4#" not in err  # librdkafka's text: --debug's
    assert "Nothing listens at that address" in err  # the hint, printed by config check
    assert main(["--config", str(cfg), "--debug", "config", "check", "--deadline", "1"]) == 4
    assert "detail: Connect to ipv4#127.0.0.1" in capsys.readouterr().err


def test_missing_ca_file_is_a_config_error_naming_the_file(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ca = tmp_path / "no-such-ca.pem"
    cfg = _write(tmp_path, f"  payments:\n    bootstrap.servers: '127.0.0.1:{_closed_port()}'\n"
                           f"    security.protocol: SSL\n    ssl.ca.location: '{ca}'\n")
    started = time.monotonic()
    assert main(["--config", str(cfg), "config", "check", "--deadline", "30"]) == 2
    assert time.monotonic() - started < 5  # never retried
    err = " ".join(capsys.readouterr().err.split())
    assert f"clusters.payments.ssl.ca.location: {ca} does not exist" in err


def test_misspelt_property_and_unknown_mechanism_name_the_property(tmp_path: Path) -> None:
    clients = ClusterClients("payments", {"bootstrap.servers": "127.0.0.1:9",
                                          "sasl.pasword": "x"}, config_path="drctl.yaml")
    with pytest.raises(ConfigError) as info:
        clients.admin()
    assert info.value.exit_status == ExitStatus.USAGE
    assert info.value.key == "clusters.payments.sasl.pasword"
    assert 'No such configuration property: "sasl.pasword"' in info.value.message

    clients = ClusterClients("payments", {"bootstrap.servers": "127.0.0.1:9",
                                          "security.protocol": "SASL_SSL",
                                          "sasl.mechanism": "SCRAM-SHA-999",
                                          "sasl.username": "u", "sasl.password": "p"})
    with pytest.raises(ConfigError) as info:
        clients.consumer()
    assert "cluster 'payments'" in info.value.message and "SCRAM-SHA-999" in info.value.message
    assert info.value.key == "clusters.payments.sasl.mechanism"


def test_dump_reports_a_rejected_setting_not_an_unexpected_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = _write(tmp_path, "  payments: {bootstrap.servers: '127.0.0.1:9', "
                           "bootstrap.server: typo}\n")
    assert main(["--config", str(cfg), "dump-consumer-timestamps", "--cluster", "payments"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "clusters.payments.bootstrap.server" in err and "unexpected" not in err


@pytest.fixture
def tls_listener(tmp_path: Path) -> Iterator[int]:
    """A TLS server with a self-signed certificate: a client that verifies it must refuse."""
    if shutil.which("openssl") is None:
        pytest.fail("openssl is needed to make a test certificate")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=localhost", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            try:
                with ctx.wrap_socket(conn, server_side=True) as tls:
                    tls.recv(1)
            except (ssl.SSLError, OSError):
                pass  # the client gave up on our certificate: what the test wants

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield int(server.getsockname()[1])
    stop.set()
    thread.join(2)
    server.close()


def test_tls_verification_failure_is_named_and_not_retried(tls_listener: int) -> None:
    clients = ClusterClients("payments", {"bootstrap.servers": f"127.0.0.1:{tls_listener}",
                                          "security.protocol": "SSL"})
    started = time.monotonic()
    with pytest.raises(Unreachable) as info:
        describe_with_retry(clients, RetryPolicy(initial_s=0.2, deadline_s=60))
    assert time.monotonic() - started < 15  # not retried until the 60 s deadline
    assert info.value.exit_status == ExitStatus.UNREACHABLE
    assert "cluster 'payments'" in info.value.message
    assert ": TLS handshake failed (1 attempt(s)" in info.value.message
    assert "certificate verify failed" in (info.value.detail or "")  # --debug shows it
    assert info.value.hint and "ssl.ca.location" in info.value.hint


def test_a_certificate_refusal_reported_as_transport_is_final() -> None:
    # Under load librdkafka reports the failed verification as _TRANSPORT; the text names it.
    refused = KafkaError(KafkaError._TRANSPORT,
                         "ssl://127.0.0.1:9093/bootstrap: error:0A000086:SSL routines::"
                         "certificate verify failed (after 9ms in state SSL_HANDSHAKE)")
    restarting = KafkaError(KafkaError._TRANSPORT,
                            "ssl://127.0.0.1:9093/1: SSL transport error: error:0A000126:"
                            "SSL routines::unexpected eof while reading")
    assert NoAnswer(refused).final and NoAnswer(refused).tls
    assert not NoAnswer(restarting).final
    assert NoAnswer(KafkaError(KafkaError._SSL, "handshake failed")).final



def test_the_shared_admin_client_is_replaced_once_it_lost_its_brokers() -> None:
    """An admin client that lived through its cluster's outage can hang every group request
    (librdkafka#5511): once a lost connection is on record, the next ask for the shared one
    gets a new one; until then it stays the same."""
    with socket.socket() as silent:  # accepts connections, never answers: no error yet
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        clients = ClusterClients("lost", {
            "bootstrap.servers": f"127.0.0.1:{silent.getsockname()[1]}"})
        first = clients.admin()
        assert clients.admin() is first
        clients.wire.record(KafkaError(KafkaError._ALL_BROKERS_DOWN))
        second = clients.admin()
        assert second is not first
        assert clients.admin() is second  # what was lost before it does not count again


class _Restarting:
    """An admin client whose broker restarts: `drops` metadata requests fail with a
    transport error, then it answers."""

    def __init__(self, drops: int) -> None:
        self.drops = drops
        self.asked = 0

    def list_topics(self, timeout: float) -> str:
        from confluent_kafka import KafkaException

        self.asked += 1
        if self.asked <= self.drops:
            raise KafkaException(KafkaError(KafkaError._TRANSPORT, "Failed to get metadata"))
        return "metadata"

    def poll(self, _timeout: float) -> int:
        return 0


def test_metadata_is_asked_again_while_a_broker_restarts_then_names_the_cluster(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from drctl.kafka.clients import ClusterUnreachable, cluster_metadata

    clients = ClusterClients("secondary", {"bootstrap.servers": f"127.0.0.1:{_closed_port()}"},
                             deadline_s=1.5)
    restarting = _Restarting(drops=2)
    monkeypatch.setattr(clients, "admin", lambda: restarting)
    assert cluster_metadata(clients) == "metadata" and restarting.asked == 3
    gone = _Restarting(drops=10**6)
    monkeypatch.setattr(clients, "admin", lambda: gone)
    started = time.monotonic()
    with pytest.raises(ClusterUnreachable) as raised:
        cluster_metadata(clients)
    assert "cluster 'secondary'" in raised.value.message and gone.asked > 1
    assert time.monotonic() - started < 15  # within the deadline, not the request timeouts
