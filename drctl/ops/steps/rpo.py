"""RPO in seconds: how much data, in time, a flow would lose (or lost) at a moment — measured,
never assumed. One computation for the failover report, `drctl status` and `drctl check`.

Three answers, best first:

- from the records (the source answers): the oldest source record the target lacks has
  timestamp T; everything from T on is missing, so at time `at` up to `at - T` seconds of
  data (0 when the target lacks nothing) — `rpo_from_records`;
- from MirrorMaker 2's heartbeats (the source is gone): the newest heartbeat the flow copied
  from the source to the target says when the target last heard from the source, T; up to
  `at - T` seconds of data may be missing. A bound in time, not a count: a partition that
  lagged behind the heartbeats' one may lack older records — `rpo_from_heartbeat`, with
  `newest_copied_heartbeat` reading the target;
- unknown (neither could be read): never 0 — `unknown_rpo`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from drctl.codecs.mm2 import decode_heartbeat
from drctl.errors import DecodeError
from drctl.kafka.clients import ClusterClients, cluster_metadata
from drctl.kafka.offsets import watermarks
from drctl.kafka.records import stream_ranges
from drctl.kafka.topics import TP
from drctl.timeparse import format_duration

# MirrorMaker 2 names the copy of a source cluster's `heartbeats` topic `<alias>.heartbeats`
# with its default and its identity replication policy alike (heartbeats keep the prefix).
HEARTBEATS_TOPIC = "heartbeats"
# How many of a heartbeats partition's last offsets are read (it gets one a second).
_HEARTBEAT_TAIL = 50


class RpoMethod(StrEnum):
    records = "records"  # the oldest source record the target lacks
    heartbeats = "heartbeats"  # the newest heartbeat copied from the source
    unknown = "unknown"


@dataclass(frozen=True)
class Rpo:
    """An RPO measured at `at_ms` (epoch ms): since `since_ms` (T) data is, or may be,
    missing; `seconds` is None when unknown. `lagging` (records) names, per topic or
    partition, the oldest record the target lacks."""

    method: RpoMethod
    at_ms: int
    since_ms: int | None = None
    lagging: tuple[dict[str, Any], ...] = ()
    source: str | None = None  # where the bound was read (the heartbeats topic)
    reason: str | None = None  # why unknown

    @property
    def seconds(self) -> float | None:
        if self.method == RpoMethod.unknown:
            return None
        if self.since_ms is None:
            return 0.0  # measured: the target lacks nothing
        return round(max(0, self.at_ms - self.since_ms) / 1000, 3)

    def sentence(self) -> str:
        """What the report, the JSON and the summary say, in one sentence."""
        seconds = self.seconds
        if seconds is None:
            return f"RPO unknown: {self.reason}" if self.reason else "RPO unknown"
        if self.since_ms is None:
            return "the target held every source record: no data lost (0 s)"
        when = _iso(self.since_ms)
        if self.method == RpoMethod.records:
            return (f"records after {when} were not replicated: up to {_amount(seconds)} of "
                    "data")
        return (f"the target last heard from the source at {when}: up to {_amount(seconds)} "
                "of data may be missing")

    def as_dict(self) -> dict[str, Any]:
        return {"method": self.method.value, "seconds": self.seconds,
                "since_ms": self.since_ms,
                "since": None if self.since_ms is None else _iso(self.since_ms),
                "at_ms": self.at_ms, "at": _iso(self.at_ms), "text": self.sentence(),
                "lagging": [dict(r) for r in self.lagging], "source": self.source,
                "reason": self.reason}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Rpo:
        """An RPO as `as_dict` wrote it (a failover marker keeps it)."""
        return cls(RpoMethod(data["method"]), int(data["at_ms"]), data.get("since_ms"),
                   tuple(data.get("lagging") or ()), data.get("source"), data.get("reason"))


def rpo_from_records(oldest_unreplicated: Mapping[TP, int | None] | Mapping[str, int | None],
                     at_ms: int) -> Rpo:
    """The RPO with the source readable: per topic (`"orders"`) or partition
    (`("orders", 0)`), the timestamp (epoch ms) of the oldest record the target lacks, None
    where it lacks none — `kafka.lag.oldest_records`, or `mm2_replication_lag`'s
    `oldest_unreplicated_ms` per topic. An empty mapping means nothing lacks: 0 s."""
    lagging: list[dict[str, Any]] = []
    items: list[tuple[str | TP, int | None]] = list(oldest_unreplicated.items())
    for key, ts in items:
        if ts is None:
            continue
        topic, partition = (key, None) if isinstance(key, str) else key
        lagging.append({"topic": topic, "partition": partition, "oldest_ms": int(ts),
                        "oldest": _iso(int(ts)),
                        "seconds": round(max(0, at_ms - int(ts)) / 1000, 3)})
    lagging.sort(key=lambda r: (r["oldest_ms"], r["topic"], r["partition"] or 0))
    future = [r for r in lagging if r["oldest_ms"] > at_ms]
    if future:
        # Records are missing, but their producer-set time says nothing about their age: a
        # record time in the future never makes the RPO 0.
        name = future[0]["topic"] + ("" if future[0]["partition"] is None
                                     else f"-{future[0]['partition']}")
        return Rpo(RpoMethod.unknown, at_ms, lagging=tuple(lagging),
                   reason=f"{name} lacks records whose timestamp ({future[0]['oldest']}) "
                          "lies in the future: how old the missing data is cannot be told")
    since = int(lagging[0]["oldest_ms"]) if lagging else None
    return Rpo(RpoMethod.records, at_ms, since, tuple(lagging))


def rpo_from_heartbeat(last_heard_ms: int | None, at_ms: int, topic: str) -> Rpo:
    """The RPO with the source gone, from the newest heartbeat copied from it (read from
    `topic` on the target); unknown without one."""
    if last_heard_ms is None:
        return unknown_rpo(at_ms, f"the source cannot be read and {topic} on the target "
                                  "holds no heartbeat copied from it")
    return Rpo(RpoMethod.heartbeats, at_ms, min(last_heard_ms, at_ms), source=topic)


def unknown_rpo(at_ms: int, reason: str) -> Rpo:
    return Rpo(RpoMethod.unknown, at_ms, reason=reason)


def heartbeats_topic(source_alias: str) -> str:
    """Where the target keeps the heartbeats copied from the source aliased `source_alias`."""
    return f"{source_alias}.{HEARTBEATS_TOPIC}"


def newest_copied_heartbeat(target: ClusterClients, source_alias: str, *,
                            until_ms: int | None = None, topic: str | None = None,
                            timeout_s: float = 30.0) -> int | None:
    """The timestamp (epoch ms) of the newest heartbeat the target holds that was copied from
    the source (`<source_alias>.heartbeats`: the heartbeats written into the source cluster,
    e.g. by MirrorMaker 2's heartbeats of the opposite direction, which the forward flow
    copies); only those at or before `until_ms` when given (a failover point). None when the
    topic is missing, empty or unreadable. Heartbeats a MirrorMaker 2 worker writes straight
    into the target (`heartbeats`) are not read: they prove the worker ran, not that the
    source answered."""
    name = topic or heartbeats_topic(source_alias)
    try:
        # A bound of the report: asked again for seconds, not for the command's deadline.
        meta = cluster_metadata(target, deadline_s=10.0).topics.get(name)
        if meta is None or meta.error is not None:
            return None
        marks = watermarks(target.admin(), [(name, p) for p in meta.partitions])
        ranges = {tp: (max(low, high - _HEARTBEAT_TAIL), high)
                  for tp, (low, high) in marks.items() if high > low}
        newest: int | None = None
        for rec in stream_ranges(target, ranges, timeout_s=timeout_s):
            try:
                beat = decode_heartbeat(rec.key, rec.value)
            except DecodeError:
                continue
            if until_ms is not None and beat.timestamp_ms > until_ms:
                continue
            newest = beat.timestamp_ms if newest is None else max(newest, beat.timestamp_ms)
    except Exception:  # noqa: BLE001 - a bound that cannot be read is "unknown", never a failure
        return None
    return newest


def flow_rpo(source: ClusterClients | None, target: ClusterClients, source_alias: str,
             lag: list[dict[str, Any]] | None, at_ms: int, *,
             lag_error: str | None = None) -> Rpo:
    """The flow's RPO now: from the lag rows measured against the target (ops/steps/target_lag.py:
    per partition, the oldest record the target lacks) while the source answers (`source`
    given), else from the newest heartbeat copied from it; unknown when neither can be read,
    when a partition cannot be measured or retention deleted records before they were copied
    — never 0."""
    if source is not None:
        if lag is None:
            return unknown_rpo(at_ms, lag_error or "the replicator does not tell its position")
        oldest: dict[TP, int | None] = {}
        for row in lag:
            for part in row.get("by_partition", []):
                name = f"{row['topic']}-{part['partition']}"
                if part.get("unknown"):
                    return unknown_rpo(at_ms, f"what {name} lacks cannot be measured: "
                                              f"{part['unknown']}")
                if part.get("deleted"):
                    return unknown_rpo(at_ms, f"retention deleted up to {part['deleted']} "
                                              f"offset(s) of {name} before they were copied: "
                                              "how old the lost records were is unknown")
                if part.get("behind") and part["oldest_unreplicated_ms"] is None:
                    return unknown_rpo(at_ms, f"the oldest record {name} lacks could not "
                                              "be read")
                if part["oldest_unreplicated_ms"] is not None:
                    oldest[(row["topic"], part["partition"])] = part["oldest_unreplicated_ms"]
        return rpo_from_records(oldest, at_ms)
    topic = heartbeats_topic(source_alias)
    return rpo_from_heartbeat(newest_copied_heartbeat(target, source_alias), at_ms, topic)


def _amount(seconds: float) -> str:
    text = format_duration(seconds)
    return text if seconds < 60 else f"{text} ({seconds:g} s)"


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="seconds").replace(
        "+00:00", "Z")
