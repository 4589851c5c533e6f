"""The retired reverse flow's copies (MirrorMaker 2's default, prefixed names).

During an incident the reverse flow writes the target's post-failover writes to
`<target alias>.<topic>` on the source (`secondary.orders` on the primary). After the return to
protection those topics hold copies of records that live in the failover topic on the target
(`orders` on the secondary): they are never replicated, compared, or required at failover
(`ReplicationSettings.replicates`), and a group reading them goes on reading the failover topic
after the next failover (translate/engine.py).

They are kept while a group has copies left to read there; once none has, they can go: the
next incident's reverse flow creates the topic again. `status` and `check` list them with
their readers (docs/operations.md, "Reverse copies with prefixed names").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from drctl.config import ReplicationSettings
from drctl.findings import Area, Finding, Severity
from drctl.kafka.clients import ClusterClients, cluster_metadata
from drctl.kafka.offsets import watermarks
from drctl.kafka.topics import TP, is_internal_topic


@dataclass(frozen=True)
class ReverseCopies:
    """One reverse copy topic on the source."""

    topic: str  # on the source
    origin: str  # the failover topic on the target whose writes it copies
    records: int  # offsets it holds (end - log start, summed over partitions)
    # Group -> copies it has not read yet (0: it read them all). Groups with commits there.
    readers: dict[str, int] = field(default_factory=dict)

    @property
    def unread_by(self) -> dict[str, int]:
        return {g: n for g, n in sorted(self.readers.items()) if n}

    def describe_readers(self) -> str:
        if not self.readers:
            return "no group reads it"
        return ", ".join(f"{g} ({n:,} unread)" if n else f"{g} (read all)"
                         for g, n in sorted(self.readers.items()))

    def delete_command(self, bootstrap: str) -> str:
        return f"kafka-topics.sh --bootstrap-server {bootstrap} --delete --topic {self.topic}"

    def as_dict(self) -> dict[str, Any]:
        return {"topic": self.topic, "origin": self.origin, "records": self.records,
                "readers": dict(sorted(self.readers.items())),
                "deletable": not self.unread_by}


def reverse_copy_topics(rep: ReplicationSettings, source: ClusterClients) -> dict[str, int]:
    """The source's reverse copy topics in the flow's filter, with their partition counts."""
    meta = cluster_metadata(source).topics
    return {t: len(m.partitions) for t, m in meta.items()
            if m.error is None and not is_internal_topic(t, rep.separator) and rep.topics.matches(t)
            and rep.reverse_copy_origin(t) is not None}


def read_reverse_copies(rep: ReplicationSettings, source: ClusterClients,
                        commits: Mapping[str, Mapping[TP, int]]) -> list[ReverseCopies]:
    """Each reverse copy topic on the source with what it holds and who reads it; `commits`
    are the source's group commits the caller read (groups without one there are not
    readers)."""
    topics = reverse_copy_topics(rep, source)
    if not topics:
        return []
    marks = watermarks(source.admin(), [(t, p) for t, n in topics.items() for p in range(n)],
                       read_committed=False)
    out = []
    for topic in sorted(topics):
        parts = {p: marks[(topic, p)] for p in range(topics[topic])}
        readers: dict[str, int] = {}
        for group, offsets in commits.items():
            mine = {p: o for (t, p), o in offsets.items() if t == topic and p in parts}
            if mine:
                readers[group] = sum(max(0, parts[p][1] - max(o, parts[p][0]))
                                     for p, o in mine.items())
        out.append(ReverseCopies(topic, rep.reverse_copy_origin(topic) or "",
                                 sum(end - low for low, end in parts.values()), readers))
    return out


def reverse_copy_findings(copies: list[ReverseCopies], source: str, target: str,
                          bootstrap: str) -> list[Finding]:
    """What `drctl check` says of each: a note — never a risk to the next failover."""
    found = []
    for c in copies:
        unread = c.unread_by
        fix = ("keep it while they read it" if unread else
               f"nothing needs it: delete it when you like ({c.delete_command(bootstrap)})")
        found.append(Finding(
            Area.TOPICS, f"topic {c.topic} on {source}",
            f"reverse copies of {c.origin}'s post-failover writes ({c.records:,} record(s)); "
            f"{c.describe_readers()}",
            f"none: never replicated nor required at failover; after a failover a group "
            f"goes on in {c.origin} on {target}", fix, Severity.NOTE))
    return found
