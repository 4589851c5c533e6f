"""Confluent Replicator: a Connect connector; target offsets differ from the source's.

Every copy may carry the `__replicator_id` provenance header. The reverse flow resumes from
its consumer group, which drctl commits at the failover point; the operator deploys the
connector config drctl writes.
"""

from __future__ import annotations

from typing import Any

from drctl.codecs.confluent import PROVENANCE_HEADER
from drctl.config import Config
from drctl.kafka.clients import ClusterClients
from drctl.kafka.groups import alter_offsets
from drctl.progress import Notify
from drctl.replication.base import ReverseRequest
from drctl.replication.connect import ConnectControlled
from drctl.reports import render


class Replicator(ConnectControlled):
    provenance_header = PROVENANCE_HEADER

    def start_reverse(self, config: Config, request: ReverseRequest,
                      notify: Notify) -> dict[str, Any]:
        rep = config.require_replication()
        request.out_dir.mkdir(parents=True, exist_ok=True)
        group = rep.replicator_group or f"replicator-{rep.target_alias}-to-{rep.source_alias}"
        admin = ClusterClients.for_cluster(config, rep.target).admin()
        for topic, parts in request.starts.items():
            alter_offsets(admin, group, {(topic, p): off for p, off in parts.items()})
        path = request.out_dir / f"{request.incident}-replicator-reverse.json"
        path.write_text(render("replicator-connector.json.j2", config.redactor,
                               name=f"replicator-{rep.target_alias}-to-{rep.source_alias}",
                               group=group, topics=sorted(request.starts),
                               source_bootstrap=config.cluster(rep.target)["bootstrap.servers"],
                               target_bootstrap=config.cluster(rep.source)["bootstrap.servers"],
                               source_cluster=rep.target, target_cluster=rep.source))
        notify(f"Committed the reverse Replicator group '{group}' at the failover point on "
               f"{rep.target}; deploy {path}")
        return {"kind": rep.kind, "group": group, "start": request.starts, "config": str(path)}
