"""CLI-side renderers shared between commands (each command's own output stays in its module)."""

from __future__ import annotations

from typing import Any

from drctl.cli.state import CURRENT
from drctl.translate.model import TranslationReport


def render_plan(plan: list[dict[str, Any]]) -> None:
    """A dry run's plan, one line per step with the values it would apply."""
    term = CURRENT.terminal()
    term.info("[bold]Dry run[/] — nothing was changed. The plan:", markup=True)
    for step in plan:
        term.emit_text(f"  • {step['step']}: " + ", ".join(
            f"{k}={v}" for k, v in step.items() if k != "step"))


def render_translation(report: TranslationReport, *, pending: bool = False) -> None:
    """The translation table and its one-line summary, on the current terminal; `pending`:
    positions about to be committed once the operator says yes."""
    term = CURRENT.terminal()
    for note in report.notes:
        term.warn(note)
    rows = []
    for g in report.groups:
        for p in g.partitions:
            rows.append([g.group, f"{p.topic}[{p.partition}]", p.source_offset, p.method,
                         p.target_offset, p.confidence,
                         p.redelivered if p.redelivered else "",
                         p.missing if p.missing else "",
                         "yes" if p.applied else ("skipped" if g.skipped else "no")])
    term.table(f"Offsets {report.source} -> {report.target}",
               ["group", "partition", "source", "method", "target", "confidence",
                "re-delivered", "missing", "applied"], rows)
    s = report.summary()
    verb = ("computed for (not committed yet)" if pending else "applied to" if report.apply
            else "computed for (dry run; nothing committed)")
    line = (f"{s['partitions']} positions of {s['groups']} groups {verb}; "
            f"{s['exact']} exact, {s['redelivered']} records re-delivered, "
            f"{s['missing']} consumed records missing on {report.target}")
    if s["unplaced"]:
        term.warn(f"{line}; {s['unplaced']} not placed (left where they were).")
    else:
        term.success(line + ".")


def render_audit(audit: dict[str, Any]) -> None:
    """The audit of a failover's positions (ops/steps/audit.py data), worst first."""
    term = CURRENT.terminal()
    for note in audit.get("notes", []):
        term.info(note)
    rows = [[p["group"], f"{p['topic']}[{p['partition']}]",
             p["applied"] if p.get("placed", True) else "not placed", p["confidence"],
             p["exact"], p["redelivered"] or "", p["skipped"] or "",
             "" if p["max_redelivered"] is None else p["max_redelivered"], p["note"] or ""]
            for p in sorted(audit.get("positions", []),
                            key=lambda p: (-p["skipped"], -p["redelivered"]))]
    if rows:
        term.table("Failover positions audited", ["group", "partition", "applied", "from",
                                                  "exact", "re-delivered", "skipped",
                                                  "bound", "note"], rows)
    t = audit.get("totals", {})
    term.info(f"Audit: {t.get('audited', 0)} of {t.get('positions', 0)} positions compared; "
              f"{t.get('redelivered', 0)} records re-delivered, {t.get('skipped', 0)} skipped"
              + (f"; {t['over_bound']} over the stated bound" if t.get("over_bound") else "")
              + (f"; {t['not_placed']} committed partition(s) failover placed no position"
                 if t.get("not_placed") else "")
              + ".")


def describe_preview(preview: dict[str, Any]) -> list[str]:
    """The failover about to happen, in the lines shown before the operator is asked."""
    incident = (f"continuing incident {preview['incident']} (done: "
                f"{', '.join(preview['done']) or 'nothing yet'})" if preview["continuing"]
                else f"new incident {preview['incident']}")
    scope = preview.get("scope", "the whole flow")
    lines = [f"Plan: fail over {preview['source']} -> {preview['target']} "
             f"({preview['mode']}), {incident}"
             + ("" if scope == "the whole flow" else f", {scope} only: the rest of the flow "
                                                     "keeps replicating"),
             f"  source {preview['source']}: "
             f"{'answers' if preview['source_reachable'] else 'does not answer (treated as down)'}",
             f"  {preview['topics']} topic(s) switch to {preview['target']}; groups matching "
             f"'{preview['groups']}' move"]
    if preview["unmirrored"]:
        lines.append(f"  left behind (never mirrored): {', '.join(preview['unmirrored'])}")
    if preview["active_groups_on_target"]:
        lines.append("  groups already active on the target (not moved): "
                     f"{', '.join(preview['active_groups_on_target'])}")
    if preview["supersedes"]:
        lines.append(f"  closes as superseded: {', '.join(preview['supersedes'])}")
    return lines


def _done(preview: dict[str, Any]) -> str:
    return f" (done before: {', '.join(preview['done'])})" if preview["done"] else ""


def describe_failback_preview(preview: dict[str, Any]) -> list[str]:
    """The failback about to happen, in the lines shown before the operator is asked."""
    source, target = preview["source"], preview["target"]
    order = "with the order check" if preview["check_order"] else "without the order check"
    return [f"Plan: fail back {target} -> {source}, incident {preview['incident']} "
            f"({preview['phase']}){_done(preview)}",
            f"  {source} and {target}: both answer",
            f"  gap analysis of {preview['topics']} topic(s) {order}; reconcile: "
            f"{preview['reconcile']}",
            f"  reverse replication {target} -> {source} from the failover point",
            f"  groups matching '{preview['groups']}' move back to {source} "
            f"({preview['groups_moved_at_failover']} moved at failover)"]


def describe_reprotect_preview(preview: dict[str, Any]) -> list[str]:
    """The return to protection about to happen, shown before the operator is asked."""
    source, target = preview["source"], preview["target"]
    connectors = ", ".join(preview["connectors"]) or "forward replication"
    return [f"Plan: return {source} -> {target} to protection, incident "
            f"{preview['incident']} ({preview['phase']}){_done(preview)}",
            f"  {source} and {target}: both answer",
            f"  {target}'s failover topics must stay quiet {preview['settle_s']:g} s"
            + (" (--force: or not)" if preview["force"] else ""),
            f"  retire the reverse flow {target} -> {source} "
            f"({len(preview['reverse_topics'])} topic(s))",
            f"  restart {connectors} {source} -> {target} from the cut-over, check it "
            "copies, close the incident"]
