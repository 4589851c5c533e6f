"""What one command works with, built once: the config, its replication flow and kind, one set
of clients per cluster, the marker stores, and where progress goes.

Every step of failover, failback, the return to protection and translation takes it and asks
it for what it needs, never re-deriving the config. A command builds one
(`OpsContext.from_config`) and closes it at the end; tests build one from fakes of the
factories, the way httpie's `Environment` is overridden by its test suite.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from drctl.config import Config, ReplicationSettings, Scope
from drctl.flow_lock import FileLog, FlowLock, LockLog, TopicLog, lock_topic
from drctl.kafka.clients import ClusterClients
from drctl.kafka.transactions import PinnedSightings
from drctl.progress import Notify
from drctl.state import MarkerStore, marker_store

if TYPE_CHECKING:
    from drctl.replication.base import ReplicationKind

ClientsFactory = Callable[[str], ClusterClients]  # cluster name -> its clients
# The cluster holding the state topic (None: the local state directory only) -> the store.
MarkerStoreFactory = Callable[[str | None], MarkerStore]


class OpsContext:
    """One command's context. Clients and marker stores are built on first use and kept:
    one admin client per cluster for the whole command, however many steps ask."""

    def __init__(self, config: Config, clients: ClientsFactory | None = None,
                 markers: MarkerStoreFactory | None = None,
                 kind: ReplicationKind | None = None, notify: Notify = lambda _: None,
                 deadline_s: float | None = None, scope: Scope | None = None) -> None:
        # The command's --deadline bounds every wait for an answer: the cluster holding the
        # markers must answer within it (each retry said through notify) before they are
        # read, and the flow's Connect worker is retried no longer. None: no such bound.
        self.config = config.under_deadline(deadline_s)
        self.notify = notify
        self.kind = kind
        # What the command's incident covers (--app, --topics/--groups); the whole flow by
        # default. A command that continues an incident takes the incident's own.
        self.scope = scope or Scope()
        self.deadline_s = deadline_s
        # Group requests retry a cluster within the command's --deadline, each retry said.
        self._clients_factory = clients or (lambda name: ClusterClients.for_cluster(
            config, name, deadline_s=self.reach_deadline_s, notify=notify))
        self._markers_factory = markers or (lambda cluster: marker_store(
            config, cluster, self.clients(cluster) if cluster else None))
        self._clients: dict[str, ClusterClients] = {}
        self._stores: dict[str | None, MarkerStore] = {}
        self._lock_logs: dict[str, LockLog] = {}
        # Steps may run side by side (check reads the RPO beside the positions): each
        # cluster's clients and marker store are still made once.
        self._making = threading.RLock()
        self.clients_built = 0  # how many ClusterClients this command made (tests count them)

    @classmethod
    def from_config(cls, config: Config, notify: Notify = lambda _: None,
                    deadline_s: float | None = None, scope: Scope | None = None) -> OpsContext:
        from drctl.replication.base import kind_for

        rep = config.replication
        return cls(config, kind=None if rep is None else kind_for(rep), notify=notify,
                   deadline_s=deadline_s, scope=scope)

    def in_scope(self, source_topic: str) -> bool:
        """A source topic the flow replicates and the command's scope covers."""
        return self.rep.replicates(source_topic) and self.scope.covers_topic(source_topic)

    @property
    def rep(self) -> ReplicationSettings:
        """The replication flow; a config error naming the missing section without one."""
        return self.config.require_replication()

    @property
    def reach_deadline_s(self) -> float:
        """How long a step retries a cluster that does not answer: the command's --deadline
        (30 s, its default, for a context made without one)."""
        return 30.0 if self.deadline_s is None else self.deadline_s

    def require_kind(self) -> ReplicationKind:
        """The replication kind; a config error naming the missing section without one."""
        self.config.require_replication()
        assert self.kind is not None, "from_config sets a kind with every replication section"
        return self.kind

    def clients(self, name: str) -> ClusterClients:
        """The clients of cluster `name`, made once per command."""
        with self._making:
            found = self._clients.get(name)
            if found is None:
                found = self._clients[name] = self._clients_factory(name)
                self.clients_built += 1
            return found

    @property
    def source(self) -> ClusterClients:
        return self.clients(self.rep.source)

    @property
    def target(self) -> ClusterClients:
        return self.clients(self.rep.target)

    @property
    def pinned_sightings(self) -> PinnedSightings:
        """When drctl first saw partitions pinned by open transactions, kept in the state
        directory across runs (kafka/transactions.py)."""
        return PinnedSightings(self.config.state.dir / "open-transactions.json")

    def markers(self, cluster: str | None) -> MarkerStore:
        """The marker store with the state topic on `cluster` (None: the local directory
        only), made once per command."""
        with self._making:
            found = self._stores.get(cluster)
            if found is None:
                if cluster and self.deadline_s is not None:
                    # Reading the state topic of a cluster that does not answer would wait out
                    # the consumer's own timeouts: the deadline decides instead (exit 4).
                    from drctl.errors import Unreachable
                    from drctl.kafka.clients import describe_with_retry

                    try:
                        describe_with_retry(self.clients(cluster),
                                            self.config.retry.with_deadline(self.deadline_s),
                                            notify=self.notify)
                    except Unreachable as exc:
                        # Unknown, never "no incident".
                        raise Unreachable(f"{exc.message} The failover markers in its topic "
                                          f"{self.config.state.topic} are unknown until it "
                                          "answers.", exc.hint).measured_as(exc) from None
                found = self._stores[cluster] = self._markers_factory(cluster)
            return found

    def flow_lock(self, what: str) -> FlowLock:
        """The flow's lock (drctl/flow_lock.py) beside its markers: in a topic on the cluster
        holding them, else in the state directory. `what`: the step, in words."""
        rep, store = self.rep, self.store
        key = f"{rep.source}->{rep.target}"
        log = self._lock_logs.get(key)
        if log is None:
            log = self._lock_logs[key] = (
                TopicLog(store.cluster, lock_topic(store.topic), key, self.notify)
                if store.cluster is not None
                else FileLog(store.dir.parent / "locks" / f"{rep.source}-{rep.target}.jsonl"))
        return FlowLock(log, key, what, notify=self.notify)

    @property
    def store(self) -> MarkerStore:
        """The flow's marker store: the local directory and the state topic on the target."""
        return self.markers(self.rep.target)

    def __enter__(self) -> OpsContext:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        """Forget the clients (librdkafka closes them as they are released) and stop their
        group requests' child processes."""
        for clients in self._clients.values():
            if isinstance(clients, ClusterClients):  # not the tests' fakes
                clients.close()
        self._clients.clear()
        self._stores.clear()
        self._lock_logs.clear()

    def reconnect(self) -> None:
        """After a cluster dropped mid-procedure: the next step builds new clients. A client
        that lived through a broker restart can keep failing its requests; new ones ask the
        cluster afresh."""
        self.close()

