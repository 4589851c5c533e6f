"""The exact entries an incident writes into a shared connector's list-valued config keys
(docs/design.md §6, "Incidents side by side"), and how they are undone.

An application's incident leaves its topics and groups out of the forward connectors by
appending entries to lists such as MirrorMaker 2's `topics.exclude`. Several incidents share
those connectors, and the operator's own entries sit there too: each incident records the
entries it wrote (`ListEdit`, kept in its marker before it writes them) and its return takes
out exactly those — never an entry the list held before, never one another open incident
needs. When the key was absent, the replicator used its effective list (an old alias such as
`topics.blacklist`, or its default): the key is written as that list plus the entries, so
nothing the operator left out starts copying, and deleted again once no incident needs it.

Pure functions over a connector's config (as Kafka Connect returns it); the kind knows its
keys (`ConnectControlled.exclusions`), `drctl/replication/connect.py` writes them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


def entries_of(value: str | None) -> list[str]:
    """A comma-separated list value, as its entries."""
    return [e.strip() for e in (value or "").split(",") if e.strip()]


@dataclass(frozen=True)
class ListEdit:
    """What one incident wrote into one list key of one connector."""

    connector: str
    key: str
    wanted: tuple[str, ...]  # the entries that must be in the list while the edit holds
    added: tuple[str, ...]  # of those, the ones the list lacked: what the undo takes out
    # The key was absent and written as this list (the replicator's effective one then)
    # plus the entries; the undo deletes the key once only these are left. None: it was set.
    seed: tuple[str, ...] | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"connector": self.connector, "key": self.key, "wanted": list(self.wanted),
                "added": list(self.added),
                "seed": None if self.seed is None else list(self.seed)}

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> ListEdit:
        seed = raw.get("seed")
        return cls(str(raw["connector"]), str(raw["key"]), tuple(raw.get("wanted") or ()),
                   tuple(raw.get("added") or ()), None if seed is None else tuple(seed))

    def describe(self) -> str:
        """e.g. 'mm2-source topics.exclude += orders, invoices'."""
        return f"{self.connector} {self.key} += {', '.join(self.added) or 'nothing new'}"


def _same_list(edit: ListEdit, others: Sequence[ListEdit]) -> list[ListEdit]:
    return [o for o in others if (o.connector, o.key) == (edit.connector, edit.key)]


def plan_edit(config: Mapping[str, Any], connector: str, key: str, wanted: Sequence[str],
              effective: Sequence[str], others: Sequence[ListEdit] = ()) -> ListEdit:
    """The edit that puts `wanted` into `config[key]`. `effective`: the list the replicator
    uses while the key is absent. `others`: the edits of the other open incidents; a key one
    of them created is created for this one too (whoever returns last deletes it)."""
    inherited = next((o.seed for o in others
                      if (o.connector, o.key) == (connector, key) and o.seed is not None), None)
    if key in config:
        have = entries_of(str(config[key]))
        seed = inherited
    else:
        have = list(effective)
        seed = tuple(effective)
    added = tuple(dict.fromkeys(w for w in wanted if w not in have))
    return ListEdit(connector, key, tuple(dict.fromkeys(wanted)), added, seed)


def apply_edits(config: Mapping[str, Any], edits: Sequence[ListEdit]) -> dict[str, Any]:
    """`config` with every edit's entries in place (idempotent: a re-run after a crash
    writes the same config)."""
    out = dict(config)
    for edit in edits:
        if edit.key in out:
            have = entries_of(str(out[edit.key]))
        else:
            have = list(edit.seed or ())
        out[edit.key] = ",".join(have + [e for e in edit.added if e not in have])
    return out


def undo_edits(config: Mapping[str, Any], edits: Sequence[ListEdit],
               others: Sequence[ListEdit] = ()) -> dict[str, Any]:
    """`config` without the entries `edits` added, but for those another open incident's
    edit (`others`) needs; a key an edit created is deleted once only its seed is left and
    no other open incident edits it."""
    out = dict(config)
    for edit in edits:
        if edit.key not in out:
            continue
        sharing = _same_list(edit, others)
        needed = {e for o in sharing for e in o.wanted}
        left = [e for e in entries_of(str(out[edit.key]))
                if e not in edit.added or e in needed]
        if edit.seed is not None and not sharing and left == list(edit.seed):
            del out[edit.key]
        else:
            out[edit.key] = ",".join(left)
    return out


def merge_edits(recorded: Sequence[ListEdit], planned: Sequence[ListEdit]) -> list[ListEdit]:
    """What an incident wrote (`recorded`: its own, or those of the incident it superseded)
    with what leaving its part out takes now (`planned`, read against the connectors now):
    each recorded edit kept as it was, the entries it lacks added to it (as the list lacks
    them now: an entry already there is not the incident's to take out), and every edit of
    a list it had not edited. Equal to `recorded` when the part is left out already."""
    out = list(recorded)
    for plan in planned:
        i = next((i for i, r in enumerate(out) if (r.connector, r.key)
                  == (plan.connector, plan.key)), None)
        if i is None:
            out.append(plan)
            continue
        mine = out[i]
        new = tuple(e for e in plan.wanted if e not in mine.wanted)
        if new:
            out[i] = ListEdit(mine.connector, mine.key, mine.wanted + new,
                              mine.added + tuple(e for e in new if e in plan.added), mine.seed)
    return out


def leaves_out(wanted: Mapping[str, Mapping[str, Sequence[str]]],
               edits: Sequence[ListEdit]) -> bool:
    """Whether `edits` want every entry of `wanted` (per connector, per key: what leaving a
    part out takes, `ConnectControlled.exclusions`)."""
    have = {(e.connector, e.key): set(e.wanted) for e in edits}
    return all(set(entries) <= have.get((name, key), set())
               for name, keys in wanted.items() for key, entries in keys.items())


def edits_hold(config: Mapping[str, Any], edits: Sequence[ListEdit]) -> bool:
    """Whether every entry the edits want is in the connector's lists."""
    return all(e in entries_of(str(config.get(edit.key, ""))) for edit in edits
               for e in edit.wanted)


def by_connector(edits: Sequence[ListEdit]) -> dict[str, list[ListEdit]]:
    out: dict[str, list[ListEdit]] = {}
    for edit in edits:
        out.setdefault(edit.connector, []).append(edit)
    return out
