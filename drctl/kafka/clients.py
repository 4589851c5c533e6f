"""Kafka clients built from a cluster's librdkafka properties, with timeouts fit for operators."""

from __future__ import annotations

import logging
import os
import re
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_futures
from dataclasses import dataclass
from typing import Any, TypeVar

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, ClusterMetadata

from drctl.config import Config
from drctl.errors import ConfigError, Unreachable
from drctl.kafka import request_count
from drctl.kafka.causes import Cause, identity_provider_failed, kafka_cause, kafka_hint
from drctl.kafka.coordinator import Coordinator
from drctl.kafka.librdkafka import KERBEROS_NEEDS, lacks_kerberos
from drctl.kafka.retriable import transient
from drctl.retry import RetriesExhausted, RetryPolicy, retry_call, time_left
from drctl.secrets import is_secret_key
from drctl.suggest import did_you_mean
from drctl.timeparse import format_duration

ClientT = TypeVar("ClientT", AdminClient, Consumer, Producer)

# librdkafka logs every refused connection; route it to Python logging (quiet unless --debug).
_LIBRDKAFKA_LOG = logging.getLogger("drctl.librdkafka")
_LIBRDKAFKA_LOG.addHandler(logging.NullHandler())

# Fail fast per attempt; the retry policy decides how long to keep trying.
_OPERATOR_DEFAULTS = {
    "socket.connection.setup.timeout.ms": "5000",
    "reconnect.backoff.max.ms": "2000",
}


# Properties naming a file librdkafka reads when it builds a client.
_FILE_PROPERTIES = ("ssl.ca.location", "ssl.certificate.location", "ssl.key.location",
                    "ssl.keystore.location", "ssl.crl.location", "sasl.kerberos.keytab")

# What librdkafka's error callback says about the connection: the reasons an operator needs
# when a cluster does not answer.
_WIRE_CODES = {KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN, KafkaError._SSL,
               KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED,
               KafkaError._RESOLVE}
# Of those, the ones that say the client lost its brokers. librdkafka 2.16 can keep a broker
# it decommissioned meanwhile as a group's coordinator, and every coordinator request
# (OffsetFetch, OffsetCommit, DescribeGroups) on that client then waits out its timeout,
# however long the cluster has been back (confluentinc/librdkafka#5511).
_LOST_CODES = {KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN}
# Of those, the ones another attempt will not cure: the certificate or the credentials.
_FINAL_WIRE_CODES = {KafkaError._SSL, KafkaError._AUTHENTICATION,
                     KafkaError.SASL_AUTHENTICATION_FAILED}
# librdkafka reports a refused certificate as _SSL, or as _TRANSPORT when the failure surfaces
# on a read during the handshake (seen under load); OpenSSL's text names it either way. Other
# "SSL routines" texts (an EOF while a broker restarts) are transient, so only this one.
_TLS_REFUSAL = re.compile(r"certificate verify failed", re.IGNORECASE)


def _is_tls_refusal(code: int, text: str) -> bool:
    return code == KafkaError._SSL or bool(_TLS_REFUSAL.search(text))


def _is_final(err: KafkaError) -> bool:
    """Another attempt will fail the same way: a refused certificate or credentials."""
    return err.code() in _FINAL_WIRE_CODES or _is_tls_refusal(err.code(), err.str())


class WireLog:
    """librdkafka's connection errors for one cluster (its `error_cb`), numbered so that an
    attempt reads only what happened since it began. They arrive while a client is polled."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._recent: deque[tuple[int, KafkaError]] = deque(maxlen=20)
        self._count = 0

    def record(self, err: KafkaError) -> None:
        if err.code() in _WIRE_CODES:
            with self._lock:
                self._recent.append((self._count, err))
                self._count += 1

    def mark(self) -> int:
        with self._lock:
            return self._count

    def since(self, mark: int) -> list[KafkaError]:
        with self._lock:
            return [err for n, err in self._recent if n >= mark]


class NoAnswer(Exception):
    """One attempt at a cluster ended without an answer: its cause in words (the message),
    librdkafka's own text as `detail`."""

    def __init__(self, err: KafkaError) -> None:
        self.cause = kafka_cause(err)
        super().__init__(str(self.cause))
        self.code = err.code()
        self.detail = _reason_text(err)
        # Another attempt will fail the same way (TLS verification, authentication).
        self.final = _is_final(err)
        self.transient = not self.final and self.cause is not Cause.AUTHORIZATION
        self.tls = _is_tls_refusal(self.code, err.str())
        self.identity_provider = identity_provider_failed(err)


def _reason_text(err: KafkaError) -> str:
    # "host:9092/bootstrap: Connect to ipv4#... failed: ..." -> the part after the broker name
    text = err.str()
    return re.sub(r"^\S+/(?:bootstrap|\d+): ", "", text)


def cause_of(exc: BaseException) -> Cause:
    """The cause, in words, of a failed attempt at a cluster."""
    if isinstance(exc, NoAnswer):
        return exc.cause
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return kafka_cause(exc.args[0])
    if isinstance(exc, TimeoutError):
        return Cause.TIMEOUT
    return Cause.NO_ANSWER


@dataclass(frozen=True)
class ClusterInfo:
    name: str
    bootstrap: str
    cluster_id: str | None
    broker_count: int
    controller_id: int | None
    rtt_ms: float


class ClusterClients:
    """Builds clients for one named cluster."""

    def __init__(self, name: str, properties: Mapping[str, str], *,
                 config_path: str | None = None, deadline_s: float = 30.0,
                 notify: Callable[[str], object] | None = None) -> None:
        self.name = name
        self.properties = dict(properties)
        self.config_path = config_path
        self.wire = WireLog()
        # How long a group request that fails transiently is retried (the command's
        # --deadline), and who hears each retry (kafka/groups.py).
        self.deadline_s = deadline_s
        self.notify = notify
        self._admin: AdminClient | None = None
        self._admin_mark = 0  # the wire log's count when the shared admin client was made
        self._coordinator: Coordinator | None = None
        # Steps may ask from two threads at once (check): one shared admin client, one child.
        self._making = threading.Lock()

    @classmethod
    def for_cluster(cls, config: Config, name: str, *, deadline_s: float = 30.0,
                    notify: Callable[[str], object] | None = None) -> ClusterClients:
        return cls(name, config.cluster(name),
                   config_path=str(config.path) if config.path else None,
                   deadline_s=deadline_s, notify=notify)

    @property
    def bootstrap(self) -> str:
        return self.properties["bootstrap.servers"]

    def _conf(self, overrides: Mapping[str, Any]) -> dict[str, Any]:
        conf: dict[str, Any] = {**_OPERATOR_DEFAULTS, **self.properties, **overrides}
        conf["logger"] = _LIBRDKAFKA_LOG
        conf["error_cb"] = self.wire.record
        conf.update(request_count.counting_properties())  # benchmarks only; {} by default
        return conf

    def _create(self, factory: Callable[[dict[str, Any]], ClientT],
                overrides: Mapping[str, Any]) -> ClientT:
        """A client, or a ConfigError naming the property librdkafka rejected: building a
        client touches no network, so a failure here is the configuration's, never retried."""
        try:
            client = factory(self._conf(overrides))
        except KafkaException as exc:
            raise self._rejected(exc.args[0] if exc.args else exc) from exc
        request_count.watch(client)
        return client

    def _rejected(self, err: Any) -> ConfigError:
        reason = err.str() if isinstance(err, KafkaError) else str(err)
        reason = re.sub(r"^Failed to create \w+(?: client)?: ", "", reason)
        # The property librdkafka names, else the one whose value it quotes ("Unsupported
        # hash function: SCRAM-SHA-999" is about sasl.mechanism).
        prop = next((p for p in self.properties if re.search(rf"\b{re.escape(p)}\b", reason)),
                    None) or next((p for p, v in self.properties.items()
                                   if p != "bootstrap.servers" and len(v) > 2
                                   and v in reason and not is_secret_key(p)), None)
        if lacks_kerberos(reason):
            # librdkafka's own advice ("recompile librdkafka") is not what a Python host does.
            mechanism = next((p for p in ("sasl.mechanism", "sasl.mechanisms")
                              if p in self.properties), "sasl.mechanism")
            return ConfigError(
                f"cluster '{self.name}' logs in with Kerberos (GSSAPI), which the librdkafka "
                f"inside this confluent-kafka was built without (librdkafka: {reason})",
                path=self.config_path, key=f"clusters.{self.name}.{mechanism}",
                hint=KERBEROS_NEEDS)
        missing = [(p, self.properties[p]) for p in _FILE_PROPERTIES
                   if p in self.properties and self.properties[p] != "probe"
                   and not os.access(self.properties[p], os.R_OK)]
        if missing:
            prop, path = missing[0]
            what = "does not exist" if not os.path.exists(path) else "cannot be read"
            return ConfigError(f"{path} {what} (cluster '{self.name}': {reason})",
                               path=self.config_path, key=f"clusters.{self.name}.{prop}",
                               hint="Point it at a readable PEM file on this machine.")
        return ConfigError(
            f"the Kafka client rejects cluster '{self.name}': {reason}",
            path=self.config_path,
            key=f"clusters.{self.name}" + (f".{prop}" if prop else ""),
            hint="Cluster keys are librdkafka properties (its CONFIGURATION.md); Java client "
                 "names such as ssl.truststore.location or sasl.jaas.config do not apply.")

    def connection_errors(self) -> list[KafkaError]:
        """The latest connection errors librdkafka reported (the shared admin client is
        polled first: they queue until then)."""
        if self._admin is not None:
            self._admin.poll(0)
        return self.wire.since(0)

    def admin(self, *, fresh: bool = False, **overrides: Any) -> AdminClient:
        """One shared admin client per cluster (connecting costs a metadata round trip);
        `fresh` or overrides get a new one. A shared one that lost its brokers since it was
        made is replaced (see _LOST_CODES): one that lived through a broker's restart can
        hang every group request."""
        if fresh or overrides:
            return self._create(AdminClient, overrides)
        with self._making:
            if self._admin is not None:
                self._admin.poll(0)  # its connection errors reach the wire log
                if any(err.code() in _LOST_CODES for err in self.wire.since(self._admin_mark)):
                    self._admin = None
            if self._admin is None:
                self._admin_mark = self.wire.mark()
                self._admin = self._create(AdminClient, {})
            return self._admin

    def coordinator(self) -> Coordinator:
        """The child process that sends this cluster's group-coordinator requests
        (kafka/coordinator.py), one per cluster; only kafka/groups.py asks for it."""
        with self._making:
            if self._coordinator is None:
                counting = request_count.counting_properties()
                wire = self.wire
                # Nothing the child's threads hold may hold these clients (the wire log, not
                # self): clients dropped without close() must be collectable, and take their
                # child with them (the finalizer) — a live reader thread holding them kept
                # every child of a long-lived process alive until it exited.
                self._coordinator = Coordinator(
                    self.name, {**_OPERATOR_DEFAULTS, **self.properties},
                    on_wire=lambda code, text: wire.record(KafkaError(code, text)),
                    on_stats=counting.get("stats_cb"))
                weakref.finalize(self, self._coordinator.close)
            return self._coordinator

    def close(self) -> None:
        """Stop the group requests' child process (the librdkafka clients close as they are
        released). Whoever makes clients closes them when its command or step ends; a group
        request after close starts a new child."""
        if self._coordinator is not None:
            self._coordinator.close()

    def __enter__(self) -> ClusterClients:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def consumer(self, **overrides: Any) -> Consumer:
        # Every read assigns its own start offsets: one out of range is an event the reader
        # handles (kafka/records.py), never a silent jump to the end.
        base = {"group.id": "drctl-reader", "enable.auto.commit": "false",
                "enable.partition.eof": "false", "isolation.level": "read_committed",
                "auto.offset.reset": "error"}
        return self._create(Consumer, {**base, **overrides})

    def producer(self, **overrides: Any) -> Producer:
        base = {"enable.idempotence": "true", "linger.ms": "5"}
        return self._create(Producer, {**base, **overrides})


# librdkafka properties an operator sets in a cluster section: what a misspelt name is
# compared with (librdkafka itself knows every name, but names none to suggest).
KNOWN_PROPERTIES = (
    "bootstrap.servers", "client.id", "client.rack", "security.protocol", "sasl.mechanism",
    "sasl.mechanisms", "sasl.username", "sasl.password", "sasl.kerberos.service.name",
    "sasl.kerberos.principal", "sasl.kerberos.keytab", "sasl.kerberos.kinit.cmd",
    "sasl.kerberos.min.time.before.relogin", "sasl.oauthbearer.config",
    "sasl.oauthbearer.method", "sasl.oauthbearer.client.id",
    "sasl.oauthbearer.client.secret", "sasl.oauthbearer.scope",
    "sasl.oauthbearer.token.endpoint.url", "sasl.oauthbearer.extensions",
    "enable.sasl.oauthbearer.unsecure.jwt", "ssl.ca.location", "ssl.ca.pem",
    "ssl.certificate.location", "ssl.certificate.pem", "ssl.key.location", "ssl.key.pem",
    "ssl.key.password", "ssl.keystore.location", "ssl.keystore.password",
    "ssl.endpoint.identification.algorithm", "enable.ssl.certificate.verification",
    "ssl.cipher.suites", "ssl.curves.list", "ssl.sigalgs.list", "ssl.crl.location",
    "ssl.providers", "ssl.engine.location", "ssl.ca.certificate.stores",
    "socket.timeout.ms", "socket.keepalive.enable", "socket.connection.setup.timeout.ms",
    "socket.send.buffer.bytes", "socket.receive.buffer.bytes", "connections.max.idle.ms",
    "request.timeout.ms", "message.max.bytes", "receive.message.max.bytes", "fetch.max.bytes",
    "fetch.wait.max.ms", "metadata.max.age.ms", "topic.metadata.refresh.interval.ms",
    "reconnect.backoff.ms", "reconnect.backoff.max.ms", "retry.backoff.ms",
    "retry.backoff.max.ms", "broker.address.family", "broker.address.ttl",
    "api.version.request", "isolation.level", "debug", "log_level", "statistics.interval.ms",
    "client.dns.lookup",
)


def check_client_properties(config: Config) -> None:
    """Property names of every cluster section, checked when the config is loaded — a
    misspelt property is a config error (exit 2) naming the key and the closest name, never
    an unreachable cluster later. librdkafka stops at the first rejected property, so each
    one is tried alone, on a producer with no brokers: no network."""
    problems: list[ConfigError] = []
    for name in config.clusters:
        props = dict(config.cluster(name))
        for prop, value in props.items():
            if prop in KNOWN_PROPERTIES:
                continue
            try:
                Producer({"bootstrap.servers": "", prop: value, "logger": _LIBRDKAFKA_LOG})
            except KafkaException as exc:
                err = exc.args[0] if exc.args else exc
                reason = err.str() if isinstance(err, KafkaError) else str(err)
                # Other rejections (a JAAS line, a value librdkafka dislikes) are reported
                # when a client is built: `config show` must still show such a config.
                if "No such configuration property" in reason:
                    others = [p for p in (*KNOWN_PROPERTIES, *props) if p != prop]
                    problems.append(ConfigError(
                        f"'{prop}' is not a Kafka client property",
                        key=f"clusters.{name}.{prop}",
                        hint=did_you_mean(prop, others)
                        or "Cluster keys are librdkafka properties (its CONFIGURATION.md)."))
    if problems:
        raise ConfigError.of(problems, str(config.path) if config.path else None)


def describe(clients: ClusterClients, timeout_s: float = 5.0) -> ClusterInfo:
    """One metadata round trip: cluster id, brokers, controller and the time it took.

    The admin client is polled while it waits, so librdkafka's reasons (refused, TLS, SASL)
    arrive: the attempt ends with `NoAnswer` as soon as every broker is down or a handshake
    failed, rather than at the timeout. A fresh client per attempt: librdkafka says "all
    brokers are down" once per client, so a retry on the same one would wait out its timeout.

    A plain Metadata request (`list_topics`, in a thread of its own while this one polls),
    not the admin API's DescribeCluster: librdkafka 2.16's DescribeCluster answer parser
    returns "no error" and no result when the Metadata parser refuses an answer for a cause
    of its own (a top-level error code, no broker and no topic in it, the client shutting
    down), and the admin layer then aborts the process (`rd_kafka_admin_response_parse:
    Assertion 'rko_result' failed`, rdkafka_admin.c). The plain request's handler turns
    those causes into errors."""
    admin = clients.admin(fresh=True)
    mark = clients.wire.mark()
    started = time.monotonic()
    future: Future[ClusterMetadata] = Future()

    def ask() -> None:
        # The thread holds the client until its request ends (within `timeout_s`): a client
        # is never destroyed with a request of its own still waiting for an answer.
        try:
            future.set_result(admin.list_topics(timeout=timeout_s))
        except (KafkaException, TimeoutError) as exc:  # the caller's, from the future
            future.set_exception(exc)

    threading.Thread(target=ask, name=f"describe-{clients.name}", daemon=True).start()
    while not future.done():
        # Returns as soon as the answer is in (a poll would wait out its whole timeout);
        # the poll after it serves librdkafka's error callbacks, the reasons for a refusal.
        wait_futures([future], timeout=0.05)
        admin.poll(0)
        errors = clients.wire.since(mark)
        stop = next((e for e in errors if _is_final(e)), None) or (
            errors[-1] if any(e.code() == KafkaError._ALL_BROKERS_DOWN for e in errors)
            else None)
        if stop is not None:
            raise NoAnswer(_explaining(errors, stop))
        if time.monotonic() - started > timeout_s + 1:
            break
    try:
        result = future.result(timeout=0)
    except (KafkaException, TimeoutError) as exc:
        errors = clients.wire.since(mark)
        if errors:
            raise NoAnswer(_explaining(errors, errors[-1])) from exc
        raise
    rtt = (time.monotonic() - started) * 1000
    controller = result.controller_id if result.controller_id >= 0 else None
    return ClusterInfo(clients.name, clients.bootstrap, result.cluster_id, len(result.brokers),
                       controller, rtt)


def _explaining(errors: list[KafkaError], fallback: KafkaError) -> KafkaError:
    """The error that says why: "1/1 brokers are down" says less than the refusal before it."""
    telling = [e for e in errors if e.code() != KafkaError._ALL_BROKERS_DOWN]
    final = [e for e in telling if _is_final(e)]
    return (final or telling or [fallback])[-1]


def unreachable(clients: ClusterClients, exc: RetriesExhausted) -> ClusterUnreachable:
    """The error for a cluster that never answered: one line with its address and the cause
    in words, a hint that follows the cause, librdkafka's text as the detail (--debug)."""
    last = exc.last
    if not isinstance(last, NoAnswer):
        errors = clients.connection_errors()
        if errors:
            last = NoAnswer(_explaining(errors, errors[-1]))
    cause = cause_of(last)
    verb = "refused drctl" if cause in (Cause.AUTHENTICATION, Cause.AUTHORIZATION) \
        else "did not answer"
    return ClusterUnreachable(
        clients.name, clients.bootstrap, cause,
        f"cluster '{clients.name}' at {clients.bootstrap} {verb}: {cause} "
        f"({exc.attempts} attempt(s) over {exc.elapsed_s:.0f} s).",
        kafka_hint(cause, clients.properties,
                   identity_provider=isinstance(last, NoAnswer) and last.identity_provider),
        detail=reason_text(last)).measured(exc.elapsed_s, exc.deadline_s)


class ClusterUnreachable(Unreachable):
    """A cluster that did not answer within the deadline: which, where, and why in words (a
    table's cell says the cause alone; the message says all three in one line). Its wait is
    over: a command ends (exit 4) rather than waiting the deadline a second time."""

    transient = False

    def __init__(self, cluster: str, address: str, cause: Cause, message: str,
                 hint: str | None = None, *, detail: str | None = None) -> None:
        super().__init__(message, hint, detail=detail)
        self.cluster = cluster
        self.address = address
        self.cause = cause


class ClusterRefused(Unreachable):
    """A cluster answered, and refused: not authorized, an unknown topic, an invalid request.
    Permanent (drctl/kafka/retriable.py): the command ends at once (exit 4) with the cause."""

    transient = False


def retry_line(clients: ClusterClients, attempt: int, exc: BaseException, delay: float) -> str:
    """What an operator reads on stderr when a cluster did not answer and is tried again: the
    cluster, its address and the cause in words (librdkafka's text is --debug's)."""
    return (f"{clients.name} ({clients.bootstrap}): {cause_of(exc)}; attempt {attempt}, "
            f"retrying in {format_duration(delay)}")


def reason_text(exc: BaseException) -> str:
    """librdkafka's reason for a client error (`Connect to ipv4#… failed: Connection
    refused`), not the KafkaError{code=…} wrapper; any other error's own text."""
    if isinstance(exc, NoAnswer):
        return exc.detail
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return _reason_text(exc.args[0])
    return str(exc) or type(exc).__name__


def describe_with_retry(clients: ClusterClients, policy: RetryPolicy,
                        on_retry: Any = None, *,
                        notify: Callable[[str], object] | None = None) -> ClusterInfo:
    """`describe` under the retry policy; a rejected configuration (ConfigError) and a TLS,
    authentication or authorization failure end it at once. With `notify`, each retry is a
    line naming the cluster, its address and the cause (`retry_line`)."""
    if on_retry is None and notify is not None:
        def on_retry(attempt: int, exc: BaseException, delay: float) -> None:
            notify(retry_line(clients, attempt, exc, delay))
    started = time.monotonic()
    try:
        # An attempt waits no longer than the deadline leaves (a silent address would hold
        # each one for its full timeout).
        return retry_call(lambda: describe(clients, time_left(policy, started, cap_s=5.0)),
                          policy, on_retry=on_retry,
                          retry_on=(KafkaException, TimeoutError, NoAnswer),
                          give_up=lambda e: not transient(e))
    except RetriesExhausted as exc:
        raise unreachable(clients, exc) from exc


def cluster_metadata(clients: ClusterClients, *, timeout_s: float = 10.0,
                     deadline_s: float | None = None) -> ClusterMetadata:
    """The cluster's topics and brokers, from its shared admin client: drctl's one metadata
    read (every `list_topics` goes through here). A broker restarting answers the metadata
    request with a transport error: asked again within the command's deadline
    (`clients.deadline_s`; a quick probe passes its own short `deadline_s`), each retry a
    line naming the cluster (`retry_line`, through `clients.notify`), then exit 4 naming the
    cluster — a raw request ended a command as an unnamed or unexpected error.

    All topics are asked for, never one by name: the admin client is a producer to
    librdkafka, whose metadata request for a named topic lets a broker with
    auto.create.topics.enable create it."""
    notify = clients.notify

    def on_retry(attempt: int, exc: BaseException, delay: float) -> None:
        if notify is not None:
            notify(retry_line(clients, attempt, exc, delay))

    policy = RetryPolicy(initial_s=0.5, max_s=5).with_deadline(
        clients.deadline_s if deadline_s is None else deadline_s)
    started = time.monotonic()
    try:
        # An attempt waits no longer than the deadline leaves.
        return retry_call(lambda: clients.admin().list_topics(
                              timeout=time_left(policy, started, cap_s=timeout_s)),
                          policy, on_retry=on_retry, retry_on=(KafkaException,),
                          give_up=lambda exc: not transient(exc))
    except RetriesExhausted as exc:
        raise unreachable(clients, exc) from exc


def check_clusters(config: Config, policy: RetryPolicy,
                   notify: Callable[[str], object] | None = None,
                   ) -> tuple[list[dict[str, Any]], list[Unreachable]]:
    """Every configured cluster, all asked at once (one thread each): its facts when it
    answers, the error when it does not, in the config's order. `notify` hears each retry."""
    def ask(name: str) -> dict[str, Any] | Unreachable:
        clients = ClusterClients.for_cluster(config, name)
        try:
            info = describe_with_retry(clients, policy, notify=notify)
        except Unreachable as exc:
            return exc
        return {"cluster": name, "bootstrap": info.bootstrap, "reachable": True,
                "cluster_id": info.cluster_id, "brokers": info.broker_count,
                "controller": info.controller_id, "rtt_ms": round(info.rtt_ms, 1)}

    names = list(config.clusters)
    with ThreadPoolExecutor(max(1, len(names)), thread_name_prefix="config-check") as pool:
        answers = list(pool.map(ask, names))
    results: list[dict[str, Any]] = []
    failures: list[Unreachable] = []
    for name, answer in zip(names, answers, strict=True):
        if isinstance(answer, Unreachable):
            failures.append(answer)
            results.append({"cluster": name, "bootstrap": config.cluster(name)[
                "bootstrap.servers"], "reachable": False, "error": answer.message})
        else:
            results.append(answer)
    return results, failures
