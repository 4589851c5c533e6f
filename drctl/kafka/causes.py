"""Why a cluster or a Connect worker did not answer, in words, and the hint that follows.

The client libraries say it at length ("Connect to ipv4#127.0.0.1:9 failed: Connection refused
(after 0ms in state CONNECT)"); an operator needs the cause once, in a few words, and what to
check for that cause. The library's own text stays available as the error's detail, shown
with --debug only. One classifier per library (librdkafka, urllib), one hint per cause.
"""

from __future__ import annotations

import re
import socket
import ssl
from collections.abc import Mapping
from enum import StrEnum

from confluent_kafka import KafkaError


class Cause(StrEnum):
    """Why an attempt got no answer, in the words an operator reads."""

    REFUSED = "connection refused"
    DNS = "name does not resolve"
    TLS = "TLS handshake failed"
    AUTHENTICATION = "authentication failed"
    AUTHORIZATION = "not authorized"
    TIMEOUT = "timed out"
    DISCONNECTED = "connection lost"  # accepted, then closed (a restart, a wrong protocol)
    NO_ANSWER = "no answer"  # nothing more precise was said


_AUTHORIZATION_CODES = {KafkaError.CLUSTER_AUTHORIZATION_FAILED,
                        KafkaError.TOPIC_AUTHORIZATION_FAILED,
                        KafkaError.GROUP_AUTHORIZATION_FAILED,
                        KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
_AUTHENTICATION_CODES = {KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED}
_TIMEOUT_CODES = {KafkaError._TIMED_OUT, KafkaError.REQUEST_TIMED_OUT,
                  KafkaError._MSG_TIMED_OUT}
# A handshake that failed: librdkafka reports a refused certificate as _SSL, or as _TRANSPORT
# when it surfaces on a read during the handshake (seen under load); OpenSSL's text names it.
_TLS_TEXT = re.compile(r"certificate verify failed|SSL handshake failed|wrong version number",
                       re.IGNORECASE)
# What an OAUTHBEARER token fetch from the identity provider says (librdkafka's OIDC support
# quotes curl): the cause is the provider's, not the brokers'.
_TOKEN_TEXT = re.compile(r"OAUTHBEARER token|OIDC token", re.IGNORECASE)
_DNS_TEXT = re.compile(r"resolve|Name or service not known|nodename nor servname",
                       re.IGNORECASE)
_TIMEOUT_TEXT = re.compile(r"timed out|timeout", re.IGNORECASE)


def kafka_cause(err: KafkaError) -> Cause:
    """The cause of one librdkafka error (its error callback's, or a request's)."""
    code, text = err.code(), err.str()
    if code in _AUTHORIZATION_CODES:
        return Cause.AUTHORIZATION
    if _TOKEN_TEXT.search(text):
        # The identity provider did not give a token: say why it did not.
        if _DNS_TEXT.search(text):
            return Cause.DNS
        if _TIMEOUT_TEXT.search(text):
            return Cause.TIMEOUT
        if "refused" in text.lower():
            return Cause.REFUSED
        return Cause.AUTHENTICATION
    if code in _AUTHENTICATION_CODES:
        return Cause.AUTHENTICATION
    if code == KafkaError._SSL or _TLS_TEXT.search(text):
        return Cause.TLS
    if code == KafkaError._RESOLVE or "Failed to resolve" in text:
        return Cause.DNS
    if "refused" in text.lower():
        return Cause.REFUSED
    if code in _TIMEOUT_CODES or _TIMEOUT_TEXT.search(text):
        return Cause.TIMEOUT
    if code == KafkaError._TRANSPORT:
        return Cause.DISCONNECTED
    return Cause.NO_ANSWER


def identity_provider_failed(err: KafkaError) -> bool:
    """Whether the error is about getting an OAUTHBEARER token, not about the brokers."""
    return bool(_TOKEN_TEXT.search(err.str()))


def kafka_hint(cause: Cause, properties: Mapping[str, str], *,
               identity_provider: bool = False) -> str:
    """What to check, for a cluster configured with `properties` (librdkafka's), when an
    attempt failed for `cause`; `identity_provider`: the OAUTHBEARER token fetch failed."""
    mechanism = (properties.get("sasl.mechanism") or properties.get("sasl.mechanisms")
                 or "").upper()
    protocol = (properties.get("security.protocol") or "PLAINTEXT").upper()
    if identity_provider:
        endpoint = "sasl.oauthbearer.token.endpoint.url"
        return {
            Cause.DNS: f"The identity provider's host name does not resolve: check {endpoint} "
                       "and this machine's DNS.",
            Cause.REFUSED: f"Nothing listens at the identity provider's address: check "
                           f"{endpoint}.",
            Cause.TIMEOUT: f"The identity provider did not answer in time: check {endpoint} "
                           "and that this machine reaches it (a proxy, a firewall).",
        }.get(cause, "The identity provider refused drctl's client: check "
                     "sasl.oauthbearer.client.id, sasl.oauthbearer.client.secret and "
                     "sasl.oauthbearer.scope.")
    if cause is Cause.REFUSED:
        return ("Nothing listens at that address: check the host and port in "
                "bootstrap.servers and that the brokers run.")
    if cause is Cause.DNS:
        return "The host name does not resolve: check bootstrap.servers and this machine's DNS."
    if cause is Cause.TLS:
        return ("ssl.ca.location must hold the CA that signed the brokers' certificates, and "
                "bootstrap.servers the names in them; a TLS client at a plaintext listener "
                f"fails the same way (security.protocol is {protocol}).")
    if cause is Cause.AUTHENTICATION:
        if mechanism == "OAUTHBEARER":
            return ("The brokers refused drctl's OAUTHBEARER token: check "
                    "sasl.oauthbearer.scope and that the brokers trust the identity provider.")
        if mechanism == "GSSAPI":
            return ("The brokers refused drctl's Kerberos identity: check "
                    "sasl.kerberos.principal, sasl.kerberos.keytab and "
                    "sasl.kerberos.service.name.")
        if mechanism:
            return (f"The brokers refused drctl's credentials ({mechanism}): check "
                    "sasl.username and sasl.password, and that sasl.mechanism is one the "
                    "listener enables.")
        return ("The brokers refused drctl's certificate: check ssl.certificate.location and "
                "ssl.key.location (mutual TLS), or set sasl.mechanism if the listener "
                "wants SASL.")
    if cause is Cause.AUTHORIZATION:
        return ("The cluster answered but does not let drctl's principal in: grant it "
                "DESCRIBE on the cluster and on the topics and groups of the flow "
                "(docs/operations.md lists the ACLs).")
    if cause is Cause.TIMEOUT:
        return ("Nothing answered in time: check that this machine reaches that host and port "
                "(a firewall may drop the packets), or give a longer --deadline.")
    if cause is Cause.DISCONNECTED:
        return ("The brokers closed the connection: they may be restarting, or the listener "
                f"expects another security.protocol (it is {protocol}).")
    return "Check that the brokers run and that this machine can reach that address."


def connect_cause(exc: BaseException) -> Cause:
    """The cause of a failed request to a Connect worker (urllib's error, or its reason)."""
    reason = getattr(exc, "reason", exc)
    if isinstance(reason, ssl.SSLError):
        return Cause.TLS
    if isinstance(reason, socket.gaierror):
        return Cause.DNS
    if isinstance(reason, ConnectionRefusedError):
        return Cause.REFUSED
    if isinstance(reason, TimeoutError | socket.timeout):
        return Cause.TIMEOUT
    if isinstance(reason, ConnectionError):
        return Cause.DISCONNECTED
    text = str(reason)
    if "refused" in text.lower():
        return Cause.REFUSED
    if _TIMEOUT_TEXT.search(text):
        return Cause.TIMEOUT
    return Cause.NO_ANSWER


def connect_hint(cause: Cause) -> str:
    """What to check when a Connect worker did not answer for `cause`."""
    return {
        Cause.REFUSED: "Nothing listens at that address: check replication.connect.url and "
                       "that the Connect worker runs.",
        Cause.DNS: "The host name does not resolve: check replication.connect.url and this "
                   "machine's DNS.",
        Cause.TLS: "Set replication.connect.ca_file to the CA that signed the worker's "
                   "certificate (and cert_file, key_file if it wants a client certificate).",
        Cause.AUTHENTICATION: "Set replication.connect.username and password, or token, to "
                              "credentials this worker accepts.",
        Cause.AUTHORIZATION: "The worker knows drctl's credentials but does not allow the "
                             "request: grant them access to the connectors.",
        Cause.TIMEOUT: "The worker did not answer in time: check that this machine reaches "
                       "it, or give a longer --deadline.",
        Cause.DISCONNECTED: "The worker closed the connection: it may be restarting, or the "
                            "URL's scheme (http/https) is not the one it serves.",
    }.get(cause, "Check that the Connect worker runs and replication.connect.url.")
