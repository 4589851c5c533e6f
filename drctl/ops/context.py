"""What an operation works with, built once from the config: clients per cluster, the marker
store and the replication kind. Tests build one from fakes of these types."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from drctl.config import Config
from drctl.kafka.clients import ClusterClients
from drctl.replication.base import ReplicationKind, kind_for
from drctl.state import MarkerStore, marker_store

ClientsFactory = Callable[[str], ClusterClients]  # cluster name -> its clients
# The cluster holding the state topic (None: the local state directory only) -> the store.
MarkerStoreFactory = Callable[[str | None], MarkerStore]


@dataclass(frozen=True)
class OpsContext:
    config: Config
    clients: ClientsFactory
    markers: MarkerStoreFactory
    kind: ReplicationKind | None  # None when the config has no replication section

    @classmethod
    def from_config(cls, config: Config) -> OpsContext:
        rep = config.replication
        return cls(config=config,
                   clients=partial(ClusterClients.for_cluster, config),
                   markers=partial(marker_store, config),
                   kind=None if rep is None else kind_for(rep))

    def require_kind(self) -> ReplicationKind:
        """The replication kind; a config error naming the missing section without one."""
        self.config.require_replication()
        assert self.kind is not None, "from_config sets a kind with every replication section"
        return self.kind
