"""Schema-id parity as readiness findings (the rules: drctl/registry/parity.py): an id the
target's registry lacks or reads as another schema, and a subject whose latest version
differs, are risks; an id neither registry knows, or one the writer's registry files under no
subject of the topic and side that carry it, is a note (bytes that only look
registry-encoded, e.g. 8-byte long keys); a registry that does not answer, or that is no
registry, makes parity blind, never clean."""

from __future__ import annotations

from drctl.findings import Area, Finding, Severity
from drctl.registry.parity import IssueKind, Parity


def parity_findings(parity: Parity) -> list[Finding]:
    out = []
    reader, writer = parity.reader, parity.writer
    for issue in parity.issues:
        seen = issue.detail + (f" (e.g. {issue.example})" if issue.example else "")
        if issue.kind == IssueKind.MISSING:
            out.append(Finding(Area.SCHEMAS, f"schema id {issue.schema_id}", seen,
                               f"after a failover consumers on {reader} cannot decode these "
                               "records (schema not found) and stop", parity.fix()))
        elif issue.kind == IssueKind.DIFFERENT:
            out.append(Finding(Area.SCHEMAS, f"schema id {issue.schema_id}", seen,
                               f"after a failover consumers on {reader} decode these records "
                               "with another schema: wrong data, or errors", parity.fix()))
        elif issue.kind == IssueKind.LATEST:
            out.append(Finding(Area.SCHEMAS, f"subject {issue.subject}", seen,
                               f"producers that move to {reader} register or find another "
                               f"id: their records carry ids {writer}'s registry lacks or "
                               "reads otherwise when they come back", parity.fix()))
        elif issue.kind == IssueKind.UNFILED:
            out.append(Finding(Area.SCHEMAS, f"schema id {issue.schema_id}", seen,
                               "none: these bytes are no schema id (a consumer of this "
                               "topic and side does not look them up)", "nothing; if they "
                               "are registry-encoded, register their schema under the "
                               "topic's subject on both registries", Severity.NOTE))
        else:
            out.append(Finding(Area.SCHEMAS, f"schema id {issue.schema_id}", seen,
                               "none if these records are not registry-encoded; else no "
                               "consumer can decode them", "nothing, if the topic's records "
                               "are not registry-encoded", Severity.NOTE))
    if parity.unknown:
        out.append(Finding(Area.SCHEMAS, f"schema registries of {writer} and {reader}",
                           parity.unknown, "whether the records' schema ids mean the same "
                           f"schema on {reader} after a failover is unknown",
                           parity.unknown_hint or "check both registries", Severity.BLIND))
    return out
