"""Kafka clients built from a cluster's librdkafka properties, with timeouts fit for operators."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient

from drctl.config import Config
from drctl.errors import Unreachable
from drctl.retry import RetriesExhausted, RetryPolicy, retry_call

# librdkafka logs every refused connection; route it to Python logging (quiet unless --debug).
_LIBRDKAFKA_LOG = logging.getLogger("drctl.librdkafka")
_LIBRDKAFKA_LOG.addHandler(logging.NullHandler())

# Fail fast per attempt; the retry policy decides how long to keep trying.
_OPERATOR_DEFAULTS = {
    "socket.connection.setup.timeout.ms": "5000",
    "reconnect.backoff.max.ms": "2000",
}


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

    def __init__(self, name: str, properties: Mapping[str, str]) -> None:
        self.name = name
        self.properties = dict(properties)
        self._admin: AdminClient | None = None

    @classmethod
    def for_cluster(cls, config: Config, name: str) -> ClusterClients:
        return cls(name, config.cluster(name))

    @property
    def bootstrap(self) -> str:
        return self.properties["bootstrap.servers"]

    def _conf(self, overrides: Mapping[str, Any]) -> dict[str, Any]:
        conf: dict[str, Any] = {**_OPERATOR_DEFAULTS, **self.properties, **overrides}
        conf["logger"] = _LIBRDKAFKA_LOG
        return conf

    def admin(self, **overrides: Any) -> AdminClient:
        """One shared admin client per cluster (connecting costs a metadata round trip);
        overrides get a fresh one."""
        if overrides:
            return AdminClient(self._conf(overrides))
        if self._admin is None:
            self._admin = AdminClient(self._conf({}))
        return self._admin

    def consumer(self, **overrides: Any) -> Consumer:
        base = {"group.id": "drctl-reader", "enable.auto.commit": "false",
                "enable.partition.eof": "false", "isolation.level": "read_committed"}
        return Consumer(self._conf({**base, **overrides}))

    def producer(self, **overrides: Any) -> Producer:
        base = {"enable.idempotence": "true", "linger.ms": "5"}
        return Producer(self._conf({**base, **overrides}))


def describe(clients: ClusterClients, timeout_s: float = 5.0) -> ClusterInfo:
    """One metadata round trip: cluster id, brokers, controller and the time it took."""
    admin = clients.admin()
    started = time.monotonic()
    future = admin.describe_cluster(request_timeout=timeout_s)
    result = future.result(timeout=timeout_s + 1)
    rtt = (time.monotonic() - started) * 1000
    controller = result.controller.id if result.controller is not None else None
    return ClusterInfo(clients.name, clients.bootstrap, result.cluster_id, len(result.nodes),
                       controller, rtt)


def describe_with_retry(clients: ClusterClients, policy: RetryPolicy,
                        on_retry: Any = None) -> ClusterInfo:
    try:
        return retry_call(lambda: describe(clients), policy, on_retry=on_retry,
                          retry_on=(KafkaException, TimeoutError, Exception))
    except RetriesExhausted as exc:
        raise Unreachable(
            f"cluster '{clients.name}' at {clients.bootstrap} did not answer "
            f"({exc.attempts} attempts over {exc.elapsed_s:.0f} s; last error: {exc.last}).",
            "Check that the brokers run and that this machine can reach that address.",
        ) from exc


def check_clusters(config: Config, policy: RetryPolicy,
                   on_retry: Any = None) -> tuple[list[dict[str, Any]], list[Unreachable]]:
    """Every configured cluster: its facts when it answers, the error when it does not."""
    results: list[dict[str, Any]] = []
    failures: list[Unreachable] = []
    for name in config.clusters:
        clients = ClusterClients.for_cluster(config, name)
        try:
            info = describe_with_retry(
                clients, policy,
                on_retry=(lambda n, exc, delay, c=name: on_retry(c, n, exc, delay))
                if on_retry else None)
        except Unreachable as exc:
            failures.append(exc)
            results.append({"cluster": name, "bootstrap": clients.bootstrap,
                            "reachable": False, "error": exc.message})
            continue
        results.append({"cluster": name, "bootstrap": info.bootstrap, "reachable": True,
                        "cluster_id": info.cluster_id, "brokers": info.broker_count,
                        "controller": info.controller_id, "rtt_ms": round(info.rtt_ms, 1)})
    return results, failures
