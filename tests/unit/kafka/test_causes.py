"""Each cause of a failed attempt, in words, and the hint that follows it
(drctl/kafka/causes.py): librdkafka's errors and urllib's, as the libraries word them."""

from __future__ import annotations

import socket
import ssl
import urllib.error

import pytest
from confluent_kafka import KafkaError

from drctl.kafka.causes import (
    Cause,
    connect_cause,
    connect_hint,
    identity_provider_failed,
    kafka_cause,
    kafka_hint,
)

PLAIN = {"bootstrap.servers": "kafka-1.example:9092"}
SCRAM = {**PLAIN, "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512"}
OAUTH = {**PLAIN, "security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER",
         "sasl.oauthbearer.method": "oidc",
         "sasl.oauthbearer.token.endpoint.url": "https://idp.example/token"}


@pytest.mark.parametrize(("code", "text", "cause"), [
    (KafkaError._TRANSPORT, "127.0.0.1:9/bootstrap: Connect to ipv4#127.0.0.1:9 failed: "
     "Connection refused (after 0ms in state CONNECT)", Cause.REFUSED),
    (KafkaError._RESOLVE, "nohost.invalid:9092/bootstrap: Failed to resolve "
     "'nohost.invalid:9092': Name or service not known (after 1ms in state CONNECT)",
     Cause.DNS),
    (KafkaError._SSL, "ssl://b:9093/bootstrap: SSL handshake failed: error:0A000086:SSL "
     "routines::certificate verify failed", Cause.TLS),
    # Under load a refused certificate arrives as _TRANSPORT; OpenSSL's words name it.
    (KafkaError._TRANSPORT, "ssl://b:9093/bootstrap: error:0A000086:SSL routines::"
     "certificate verify failed (after 9ms in state SSL_HANDSHAKE)", Cause.TLS),
    (KafkaError._AUTHENTICATION, "sasl_ssl://b:9093/bootstrap: SASL authentication error: "
     "Authentication failed during authentication due to invalid credentials with SASL "
     "mechanism SCRAM-SHA-512", Cause.AUTHENTICATION),
    (KafkaError.SASL_AUTHENTICATION_FAILED, "Broker: SASL Authentication failed",
     Cause.AUTHENTICATION),
    (KafkaError.CLUSTER_AUTHORIZATION_FAILED, "Broker: Cluster authorization failed",
     Cause.AUTHORIZATION),
    (KafkaError._TRANSPORT, "b:9092/bootstrap: Connection setup timed out in state CONNECT "
     "(after 5030ms in state CONNECT)", Cause.TIMEOUT),
    (KafkaError._TIMED_OUT, "Failed while waiting for controller: Local: Timed out",
     Cause.TIMEOUT),
    (KafkaError._TRANSPORT, "b:9092/1: Disconnected (after 12ms in state UP)",
     Cause.DISCONNECTED),
    (KafkaError.UNKNOWN, "Broker: Unknown error", Cause.NO_ANSWER),
])
def test_librdkafka_errors_name_their_cause(code: int, text: str, cause: Cause) -> None:
    assert kafka_cause(KafkaError(code, text)) is cause


def test_an_identity_provider_that_does_not_resolve_is_named_not_the_credentials() -> None:
    """Issue 38: librdkafka reports the token fetch as an authentication error; the hint
    must point at the identity provider's URL, not at sasl.username and sasl.password."""
    err = KafkaError(KafkaError._AUTHENTICATION, "Failed to acquire SASL OAUTHBEARER token: "
                     "Could not resolve host: idp.does-not-exist.invalid")
    assert kafka_cause(err) is Cause.DNS and identity_provider_failed(err)
    hint = kafka_hint(Cause.DNS, OAUTH, identity_provider=True)
    assert "sasl.oauthbearer.token.endpoint.url" in hint and "does not resolve" in hint
    assert "sasl.password" not in hint and "credentials" not in hint


@pytest.mark.parametrize(("cause", "properties", "provider", "expected", "not_expected"), [
    (Cause.REFUSED, PLAIN, False, ["bootstrap.servers", "brokers run"], []),
    (Cause.DNS, PLAIN, False, ["does not resolve", "bootstrap.servers", "DNS"], []),
    (Cause.TLS, SCRAM, False, ["ssl.ca.location", "security.protocol is SASL_SSL"], []),
    (Cause.AUTHENTICATION, SCRAM, False, ["SCRAM-SHA-512", "sasl.username", "sasl.password"],
     ["oauthbearer"]),
    (Cause.AUTHENTICATION, OAUTH, False, ["OAUTHBEARER token", "sasl.oauthbearer.scope"],
     ["sasl.password"]),
    (Cause.AUTHENTICATION, {**PLAIN, "sasl.mechanism": "GSSAPI"}, False,
     ["sasl.kerberos.keytab"], ["sasl.password"]),
    (Cause.AUTHENTICATION, {**PLAIN, "security.protocol": "SSL"}, False,
     ["ssl.certificate.location"], ["sasl.password"]),
    (Cause.AUTHENTICATION, OAUTH, True, ["sasl.oauthbearer.client.id"], ["sasl.password"]),
    (Cause.AUTHORIZATION, PLAIN, False, ["DESCRIBE", "principal"], ["sasl.password"]),
    (Cause.TIMEOUT, PLAIN, False, ["firewall", "--deadline"], []),
    (Cause.TIMEOUT, OAUTH, True, ["identity provider", "token.endpoint.url"], []),
    (Cause.DISCONNECTED, SCRAM, False, ["restarting", "security.protocol"], []),
])
def test_each_cause_has_its_own_hint(cause: Cause, properties: dict[str, str], provider: bool,
                                     expected: list[str], not_expected: list[str]) -> None:
    hint = kafka_hint(cause, properties, identity_provider=provider)
    for text in expected:
        assert text in hint, (text, hint)
    for text in not_expected:
        assert text not in hint, (text, hint)


def test_kafka_hints_differ_by_cause() -> None:
    hints = {kafka_hint(c, SCRAM) for c in Cause}
    assert len(hints) == len(Cause)


@pytest.mark.parametrize(("error", "cause"), [
    (urllib.error.URLError(ConnectionRefusedError(111, "Connection refused")), Cause.REFUSED),
    (urllib.error.URLError(socket.gaierror(-2, "Name or service not known")), Cause.DNS),
    (urllib.error.URLError(ssl.SSLError(1, "[SSL: WRONG_VERSION_NUMBER] wrong version")),
     Cause.TLS),
    (urllib.error.URLError(TimeoutError("timed out")), Cause.TIMEOUT),
    (TimeoutError("The read operation timed out"), Cause.TIMEOUT),
    (ConnectionResetError(104, "Connection reset by peer"), Cause.DISCONNECTED),
    (urllib.error.URLError("something else"), Cause.NO_ANSWER),
])
def test_connect_errors_name_their_cause(error: BaseException, cause: Cause) -> None:
    assert connect_cause(error) is cause


@pytest.mark.parametrize(("cause", "expected"), [
    (Cause.REFUSED, "replication.connect.url"),
    (Cause.DNS, "does not resolve"),
    (Cause.TLS, "replication.connect.ca_file"),
    (Cause.AUTHENTICATION, "replication.connect.username"),
    (Cause.AUTHORIZATION, "does not allow"),
    (Cause.TIMEOUT, "--deadline"),
    (Cause.DISCONNECTED, "http/https"),
])
def test_each_connect_cause_has_its_own_hint(cause: Cause, expected: str) -> None:
    assert expected in connect_hint(cause)
    assert len({connect_hint(c) for c in Cause}) == len(Cause)
