"""Offset-preserving mirrors (Confluent Cluster Linking, DiDi mirror topics, Kafka's in-broker
cluster mirroring): target offsets equal the source's and topic names are kept.

Translation keeps offsets and the gap is [F, source end). Its forward flow is stopped through
the connectors named in `replication.connect` when there are any, otherwise by the operator;
reversing the link is manual, from instructions drctl writes.
"""

from __future__ import annotations

from typing import Any

from drctl.config import Config
from drctl.progress import Notify
from drctl.replication.base import ReverseRequest
from drctl.replication.connect import ConnectControlled
from drctl.reports import render


class Identity(ConnectControlled):
    offsets_preserved = True

    def auto_translate_method(self, *, source_up: bool, forward: bool) -> str | None:
        return "identity"  # needs neither the source nor checkpoints

    def start_reverse(self, config: Config, request: ReverseRequest,
                      notify: Notify) -> dict[str, Any]:
        rep = config.require_replication()
        request.out_dir.mkdir(parents=True, exist_ok=True)
        path = request.out_dir / f"{request.incident}-identity-reverse.md"
        path.write_text(render("identity-reverse.md.j2", config.redactor, starts=request.starts,
                               source=rep.target, target=rep.source, incident=request.incident))
        notify(f"Reverse mirroring for an offset-preserving link is manual: follow {path}")
        return {"kind": rep.kind, "start": request.starts, "steps": str(path)}
