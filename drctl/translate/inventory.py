"""The source inventory drctl keeps on the target whenever it reaches the source: the topics in
scope (with partition counts) and the groups with commits on them (snapshots.SourceInventory).
With the source gone, failover names what of it has no mirror or no position, so no topic or
group is left behind silently. `drctl guard` keeps it every round; `status`,
`translate-offsets` and failover's preflight keep it whenever they reach both clusters — all
through `keep_inventory`.

What one call costs: the source's topic metadata and group list (one request each). A group's
commits (one OffsetFetch per group) are read only when the group is new since the last call or
was last read more than INVENTORY_MAX_AGE_S ago, at most READS_PER_CALL groups a call, new ones
first; thousands of groups are read over several calls, and the ones not read yet are named
as such. The inventory (one record) is written only when what it says changed or it is older
than INVENTORY_MAX_AGE_S. What was read when is kept in the local state directory.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from drctl.config import Config
from drctl.errors import DrctlError
from drctl.kafka.clients import ClusterClients, cluster_metadata
from drctl.kafka.groups import (
    UNNAMEABLE,
    GroupClients,
    GroupListing,
    committed_offsets,
    group_listing,
)
from drctl.kafka.topics import TP, is_internal_topic
from drctl.translate.snapshots import SourceInventory, ensure_snapshot_topic, write_snapshots

INVENTORY_MAX_AGE_S = 300.0
READS_PER_CALL = 200
# Groups that belong to Kafka Connect, MirrorMaker 2 or drctl, never to an application.
_INTERNAL_GROUP = re.compile(r"^(connect-.*|__.*|drctl-.*|_.*)$")
# Where a group the source's list left out was known from (SourceGroups.unlisted).
IN_INVENTORY = "drctl's inventory of the source"
IN_CHECKPOINTS = "MirrorMaker 2's checkpoints"


def wanted_group(config: Config, groups: str | re.Pattern[str], group: str) -> bool:
    """A group in scope: it matches the request's regex and the config's filter, it belongs
    to an application (not Connect, MirrorMaker 2 or drctl), and a request can name it (not
    the group "": kafka/groups.py UNNAMEABLE, named where it is seen)."""
    pattern = re.compile(groups) if isinstance(groups, str) else groups
    return bool(pattern.fullmatch(group)) and config.groups.matches(group) \
        and not _INTERNAL_GROUP.match(group) and group not in UNNAMEABLE


@dataclass
class SourceGroups:
    """The groups of the source a command works on, with their commits: every group its
    ListGroups answers named, and every group drctl knew of elsewhere (this inventory, the
    replicator's checkpoints) that the list left out but that has commits there — a list
    can come back short with no error (kafka/groups.py `group_listing`); those are taken in
    and named, never left behind in silence. A group known elsewhere with no commits on the
    source is gone there: nothing of it to move."""

    source: str
    commits: dict[str, dict[TP, int]]
    unlisted: dict[str, str] = field(default_factory=dict)  # group -> where it was known
    skipped: dict[str, str] = field(default_factory=dict)  # listed, no request can name it
    # The ListGroups answers these came from: what `keep_inventory` takes in the same round
    # rather than list the source again (each listing waits LIST_PAUSE_S between answers).
    listing: GroupListing | None = None

    def also(self, clients: GroupClients, known: Mapping[str, str],
             wanted: Callable[[str], bool], *, deadline_s: float | None = None
             ) -> dict[str, dict[TP, int]]:
        """Take in the groups of `known` (group -> where it was seen) not here yet that have
        commits on the source (one OffsetFetch each); returns those."""
        todo = [g for g in sorted(known) if g not in self.commits and g not in UNNAMEABLE
                and wanted(g)]
        found = {g: offsets for g, offsets in committed_offsets(
            clients, todo, deadline_s=deadline_s).items() if offsets} if todo else {}
        for group, offsets in found.items():
            self.commits[group] = offsets
            self.unlisted[group] = known[group]
        return found

    def notes(self) -> list[str]:
        """What an operator is told: each group left out, and the groups the list missed."""
        lines = [f"{self.source}: {why}; skipped" for why in self.skipped.values()]
        by_where: dict[str, list[str]] = {}
        for group, where in sorted(self.unlisted.items()):
            by_where.setdefault(where, []).append(group)
        for where, groups in by_where.items():
            lines.append(f"{self.source}'s group list (ListGroups) left out {len(groups)} "
                         f"group(s) with commits there, known from {where} and taken in: "
                         + ", ".join(groups[:10])
                         + (f" (+{len(groups) - 10} more)" if len(groups) > 10 else ""))
        return lines


def source_groups(config: Config, clients: GroupClients, wanted: Callable[[str], bool], *,
                  known: Mapping[str, str] | None = None, deadline_s: float | None = None
                  ) -> SourceGroups:
    """The wanted groups of cluster `clients` and their commits (SourceGroups): the listed
    ones, and those of `known` (group -> where seen) and — on the flow's source — of this
    state directory's inventory that the list left out, read in the same batch."""
    listing = group_listing(clients, deadline_s=deadline_s)
    elsewhere = dict(known or {})
    rep = config.replication
    if rep is not None and clients.name == rep.source:
        for group in inventory_groups(config):
            elsewhere.setdefault(group, IN_INVENTORY)
    listed = [g for g in listing.groups if wanted(g)]
    extra = [g for g in sorted(elsewhere) if g not in set(listed) and g not in UNNAMEABLE
             and g not in listing.skipped and wanted(g)]
    commits = committed_offsets(clients, listed + extra, deadline_s=deadline_s)
    found = SourceGroups(clients.name, {g: commits[g] for g in listed},
                         skipped=dict(listing.skipped), listing=listing)
    for group in extra:
        if commits.get(group):
            found.commits[group] = commits[group]
            found.unlisted[group] = elsewhere[group]
    return found


def inventory_groups(config: Config) -> list[str]:
    """The groups this state directory's inventory last listed on the flow's source (no
    cluster asked)."""
    rep = config.require_replication()
    cache = _load(_cache_path(config, rep.source, rep.target))
    return sorted(set(cache.get("groups") or {}) | set(cache.get("unread") or []))


@dataclass
class InventoryRefresh:
    """What one `keep_inventory` call did, and when the inventory was last written."""

    written_ms: int | None = None  # as far as this state directory knows; None: never
    wrote: bool = False
    topics: int = 0
    groups: int = 0
    read_groups: int = 0  # groups whose commits this call read
    unread_groups: int = 0  # groups listed whose commits no call has read yet
    # Groups the source's list left out that the last call had and that still commit there.
    unlisted: list[str] = field(default_factory=list)
    error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        age = None if self.written_ms is None else round(time.time() - self.written_ms / 1000, 1)
        return {**self.__dict__, "age_s": age, "summary": self.describe()}

    def describe(self) -> str:
        if self.written_ms is None:
            when = "never written from here"
        else:
            age = round(time.time() - self.written_ms / 1000, 1)
            ago = "now" if self.wrote else f"{age:g} s ago"
            when = (f"written {ago} ({self.topics} topic(s), {self.groups} group(s)"
                    + (f", {self.unread_groups} not read yet" if self.unread_groups else "")
                    + (f", {len(self.unlisted)} kept that the source's group list left out "
                       f"({', '.join(self.unlisted[:5])})" if self.unlisted else "")
                    + ")")
        return f"Source inventory: {when}" + (f"; {self.error}"
                                              if self.error else "")


def inventory_on_record(config: Config, why: str) -> InventoryRefresh:
    """What the local state directory knows of the last inventory written (no cluster asked),
    for when the source does not answer; `why` says so."""
    rep = config.require_replication()
    cache = _load(_cache_path(config, rep.source, rep.target))
    return InventoryRefresh(written_ms=cache.get("written_ms"),
                            topics=len(cache.get("topics") or {}),
                            groups=len(cache.get("said_groups") or {}),
                            unread_groups=len(cache.get("unread") or []), error=why)


def source_topics_in_scope(config: Config, clients: ClusterClients) -> dict[str, int]:
    """The source's replicated topics (the config's filter) and their partition counts."""
    rep = config.require_replication()
    topics = cluster_metadata(clients).topics
    return {t: len(m.partitions) for t, m in topics.items()
            if not is_internal_topic(t, rep.separator) and rep.replicates(t)
            and m.error is None}


def groups_to_read(listed: list[str], read_ms: Mapping[str, int], now_ms: int,
                   limit: int = READS_PER_CALL) -> list[str]:
    """The groups whose commits to read now: never read first, then those read longest ago
    (older than INVENTORY_MAX_AGE_S), at most `limit`."""
    stale_before = now_ms - INVENTORY_MAX_AGE_S * 1000
    due = [g for g in listed if read_ms.get(g, 0) < stale_before]
    due.sort(key=lambda g: (g in read_ms, read_ms.get(g, 0), g))
    return due[:limit]


def keep_inventory(config: Config, src: ClusterClients, dst: ClusterClients, *,
                   known: Mapping[str, Mapping[TP, int]] | None = None,
                   listing: GroupListing | None = None,
                   now_ms: int | None = None) -> InventoryRefresh:
    """Bring the inventory on the target up to date (see the module's cost). `known`: commits
    the caller has just read (no need to read them again); `listing`: the source's group
    listing the caller has just taken (not listed again). Never raises: a cluster that does
    not answer is the result's `error`, and the next call tries again."""
    rep = config.require_replication()
    now_ms = now_ms or int(time.time() * 1000)
    path = _cache_path(config, rep.source, rep.target)
    cache = _load(path)
    result = InventoryRefresh(written_ms=cache.get("written_ms"))
    try:
        topics = source_topics_in_scope(config, src)
        listed = [g for g in (listing or group_listing(src)).groups
                  if wanted_group(config, ".*", g)]
        # A group the last call had that the list leaves out: gone, or left out by a list
        # that came back short. Its commits say which (those the caller read are known).
        had = set(cache.get("groups") or {}) | set(cache.get("unread") or [])
        missing = sorted(had - set(listed))
        back = {g: o for g, o in (known or {}).items() if g in missing and o}
        back.update({g: o for g, o in committed_offsets(
            src, [g for g in missing if g not in back]).items() if o})
        result.unlisted = sorted(back)
        known = {**back, **(known or {})}
        listed = sorted(set(listed) | set(back))
        alive = set(listed)
        # Groups gone from the source drop out (memory and file follow the source).
        entries: dict[str, dict[str, Any]] = {
            g: e for g, e in cache.get("groups", {}).items() if g in alive}

        def note(group: str, offsets: Mapping[TP, int]) -> None:
            # The flow's topics, and the copies the flow the other way made here (a reverse
            # flow's, the other region's in an active-active pair): with the source gone, what
            # a group read there decides where it goes.
            read = sorted({t for t, _ in offsets
                           if rep.topics.matches(t) or rep.reverse_copy_origin(t) is not None})
            have = entries.get(group)
            # Unchanged and read within half the age limit: keep the entry, so a guard round
            # that saw nothing new rewrites neither the file nor the inventory.
            if have is None or have["topics"] != read \
                    or have["read_ms"] < now_ms - INVENTORY_MAX_AGE_S * 500:
                entries[group] = {"topics": read, "read_ms": now_ms}

        for group, offsets in (known or {}).items():
            if group in alive:
                note(group, offsets)
        due = groups_to_read(listed, {g: e["read_ms"] for g, e in entries.items()}, now_ms)
        for group, offsets in committed_offsets(src, due).items():
            note(group, offsets)
        result.read_groups = len(due)
        inventory = SourceInventory(
            topics, {g: entries[g]["topics"] for g in listed if g in entries}, now_ms,
            [g for g in listed if g not in entries])
        result.topics, result.groups = len(topics), len(inventory.groups)
        result.unread_groups = len(inventory.unread)
        said = (inventory.topics, inventory.groups, inventory.unread)
        last = (cache.get("topics"), cache.get("said_groups"), cache.get("unread"))
        if said != last or (result.written_ms or 0) < now_ms - INVENTORY_MAX_AGE_S * 1000:
            ensure_snapshot_topic(dst, config.state.snapshots_topic)
            write_snapshots(dst, config.state.snapshots_topic, [], inventory)
            result.written_ms, result.wrote = now_ms, True
        if result.wrote or entries != cache.get("groups"):
            _save(path, {"written_ms": result.written_ms, "topics": inventory.topics,
                         "said_groups": inventory.groups, "unread": inventory.unread,
                         "groups": entries})
    except DrctlError as exc:
        result.error = f"not refreshed: {exc.message}"
    except Exception as exc:  # noqa: BLE001 - keeping the inventory never fails a command
        result.error = f"not refreshed: {type(exc).__name__}: {exc}"
    return result


def groups_reading(config: Config, topics: Collection[str]) -> list[str]:
    """The groups this state directory's inventory saw committing on any of `topics` (no
    cluster asked: what the last `keep_inventory` read)."""
    rep = config.require_replication()
    entries = _load(_cache_path(config, rep.source, rep.target)).get("groups", {})
    wanted = set(topics)
    return sorted(g for g, e in entries.items() if wanted & set(e.get("topics") or ()))


def _cache_path(config: Config, source: str, target: str) -> Path:
    return config.state.dir / f"inventory-{source}-{target}.json"


def _load(path: Path) -> dict[str, Any]:
    try:
        raw = json.loads(path.read_text())
        return raw if isinstance(raw, dict) else {}
    except (OSError, ValueError):
        return {}  # none yet, or unreadable: read everything again


def _save(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")  # guard and status side by side
    tmp.write_text(json.dumps(data, sort_keys=True))
    tmp.replace(path)
