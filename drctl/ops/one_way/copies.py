"""How a record and its copy on the other cluster compare in an incident.

By content: partition, key, value and client headers (drctl/fingerprint/) — and the
timestamp only when no topic of the incident has its broker stamp records on append
(message.timestamp.type LogAppendTime, which MirrorMaker 2's default config filter does not
copy): there a copy carries the time it arrived, never its original's. Every comparison of
an incident across the two clusters (late copies, reverse catch-up, failback's end-state
check, the return to protection) uses the same rule, so a record and its copy always agree.
"""

from __future__ import annotations

from drctl.context import OpsContext
from drctl.fingerprint import record_fingerprint
from drctl.kafka.records import Record
from drctl.kafka.topics import log_append_time_topics
from drctl.state import FailoverMarker


def timestamps_kept(ctx: OpsContext, marker: FailoverMarker) -> bool:
    """False when any source, mirror or failover topic of the incident — on either
    cluster — stamps records on append."""
    rep = ctx.rep
    names = {*marker.topics, *marker.topics.values(),
             *(rep.failover_topic(t) for t in marker.topics)}
    names |= {f"{rep.target_alias}.{rep.failover_topic(t)}" for t in marker.topics}
    for cluster in (rep.source, rep.target):
        admin = ctx.clients(cluster).admin()
        if log_append_time_topics(admin, names):
            return False
    return True


def copy_fingerprint(rec: Record, timestamps: bool) -> bytes:
    """The fingerprint a record and its copy share under the incident's rule."""
    return record_fingerprint(rec, timestamps and rec.timestamp_type != 0)
