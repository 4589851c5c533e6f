"""CLI-side renderers shared between commands (each command's own output stays in its module)."""

from __future__ import annotations

from drctl.cli.state import CURRENT
from drctl.translate.model import TranslationReport


def render_translation(report: TranslationReport) -> None:
    """The translation table and its one-line summary, on the current terminal."""
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
    verb = "applied to" if report.apply else "computed for (dry run; --apply commits)"
    term.success(f"{s['partitions']} positions of {s['groups']} groups {verb}; "
                 f"{s['exact']} exact, {s['redelivered']} records re-delivered, "
                 f"{s['missing']} consumed records missing on {report.target}.")
