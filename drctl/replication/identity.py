"""Offset-preserving mirrors (Confluent Cluster Linking, DiDi mirror topics, Kafka's in-broker
cluster mirroring): target offsets equal the source's and topic names are kept.

Translation keeps offsets and the gap is [F, source end). Its forward flow is stopped through
the connectors named in `replication.connect` when there are any, otherwise by the operator;
reversing the link is manual, from instructions drctl writes.
"""

from __future__ import annotations

from typing import Any

from drctl.errors import Aborted
from drctl.progress import Notify
from drctl.replication.base import Confirm, FlowContext, ReturnRequest, ReverseRequest
from drctl.replication.connect import ConnectControlled
from drctl.reports import render


class Identity(ConnectControlled):
    offsets_preserved = True

    def auto_translate_method(self, *, source_up: bool, forward: bool) -> str | None:
        return "identity"  # needs neither the source nor checkpoints

    def start_reverse(self, ctx: FlowContext, request: ReverseRequest,
                      notify: Notify) -> dict[str, Any]:
        rep = ctx.rep
        request.out_dir.mkdir(parents=True, exist_ok=True)
        path = request.out_dir / f"{request.incident}-identity-reverse.md"
        path.write_text(render("identity-reverse.md.j2", ctx.config.redactor, starts=request.starts,
                               source=rep.target, target=rep.source, incident=request.incident))
        notify(f"Reverse mirroring for an offset-preserving link is manual: follow {path}")
        return {"kind": rep.kind, "start": request.starts, "steps": str(path)}

    def retire_reverse(self, ctx: FlowContext, request: ReturnRequest, notify: Notify,
                       confirm: Confirm | None = None) -> dict[str, Any]:
        rep = ctx.rep
        return _manual(confirm, f"Delete the reverse link {rep.target} -> {rep.source} (and "
                       f"its mirror topics' link state on {rep.source}: "
                       f"{', '.join(request.reverse_topics)}), then confirm.")

    def set_forward_start(self, ctx: FlowContext, request: ReturnRequest, notify: Notify,
                          confirm: Confirm | None = None, *,
                          dry_run: bool = False) -> dict[str, Any]:
        rep = ctx.rep
        starts = "; ".join(f"{t}: " + ", ".join(f"{p}:{o}" for p, o in sorted(parts.items()))
                           for t, parts in sorted(request.forward_starts.items()))
        out = {"starts": request.forward_starts}
        if dry_run:
            return out
        return {**out, **_manual(confirm, (
            f"Make the topics on {rep.target} mirrors of {rep.source} again, mirroring only "
            f"from these source offsets on ({starts}): below them {rep.target} holds the data "
            "already. Then confirm."))}


def _manual(confirm: Confirm | None, text: str) -> dict[str, Any]:
    """An offset-preserving link is reversed and re-created by the link itself."""
    if confirm is None or not confirm(text):
        raise Aborted("Not confirmed: " + text.removesuffix(" Then confirm.").removesuffix(
            ", then confirm."), "Do it, then run the same command again.")
    return {"state": "confirmed by the operator", "instruction": text}
