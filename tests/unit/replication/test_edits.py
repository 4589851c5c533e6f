"""The exact entries an incident writes into a shared connector's lists, and their undo
(drctl/replication/edits.py), with MirrorMaker 2's keys, defaults and old aliases."""

from __future__ import annotations

from drctl.replication.edits import (
    ListEdit,
    apply_edits,
    edits_hold,
    entries_of,
    leaves_out,
    merge_edits,
    plan_edit,
    undo_edits,
)
from drctl.replication.mirrormaker2 import MirrorMaker2

DEFAULT = MirrorMaker2.exclusion_defaults["topics.exclude"]


def test_entries_the_list_held_before_stay_at_the_return() -> None:
    config = {"topics": ".*", "topics.exclude": "pii\\..*, invoices"}
    edit = plan_edit(config, "src", "topics.exclude", ["invoices", "billing\\.eu"],
                     effective=entries_of(DEFAULT))
    assert (edit.wanted, edit.added, edit.seed) == (("invoices", "billing\\.eu"),
                                                    ("billing\\.eu",), None)
    during = apply_edits(config, [edit])
    assert during["topics.exclude"] == "pii\\..*,invoices,billing\\.eu"
    assert apply_edits(during, [edit]) == during  # a re-run writes the same config
    assert edits_hold(during, [edit]) and not edits_hold(config, [edit])
    back = undo_edits(during, [edit])
    assert entries_of(back["topics.exclude"]) == ["pii\\..*", "invoices"]


def test_an_absent_key_is_written_with_the_effective_list_and_deleted_at_the_return() -> None:
    """Without `topics.exclude` MirrorMaker 2 leaves out its default (or, on Kafka 3.x, what
    `topics.blacklist` says): written with those, nothing the operator left out starts
    copying; the return puts the config back as it was, the alias untouched."""
    config = {"topics": ".*", "topics.blacklist": "pii\\..*"}
    for effective in (entries_of(DEFAULT), ["pii\\..*"]):
        edit = plan_edit(config, "src", "topics.exclude", ["orders"], effective)
        assert edit.seed == tuple(effective) and edit.added == ("orders",)
        during = apply_edits(config, [edit])
        assert entries_of(during["topics.exclude"]) == [*effective, "orders"]
        assert during["topics.blacklist"] == "pii\\..*"
        assert undo_edits(during, [edit]) == config


def test_two_incidents_in_one_list_each_take_out_only_their_own() -> None:
    config = {"groups": ".*"}  # no groups.exclude: MirrorMaker 2's default applies
    a = plan_edit(config, "cp", "groups.exclude", ["a-app", "shared"], ["d"])
    both = apply_edits(config, [a])
    b = plan_edit(both, "cp", "groups.exclude", ["b-app"], ["d"], others=[a])
    assert b.seed == ("d",) and b.added == ("b-app",)  # the key A created, B inherits
    both = apply_edits(both, [b])
    assert both["groups.exclude"] == "d,a-app,shared,b-app"
    # A returns first: B's entries stay, the key too.
    after_a = undo_edits(both, [a], others=[b])
    assert after_a["groups.exclude"] == "d,b-app"
    # An entry both need stays until the last one needing it returns.
    c = ListEdit("cp", "groups.exclude", ("shared",), ("shared",))
    assert "shared" in entries_of(undo_edits(both, [a], others=[b, c])["groups.exclude"])
    # B returns last: the config is the original one.
    assert undo_edits(after_a, [b]) == config


def test_an_edit_survives_the_marker() -> None:
    edit = ListEdit("cp", "groups.exclude", ("g",), ("g",), seed=("d",))
    assert ListEdit.from_dict(edit.as_dict()) == edit
    plain = ListEdit("src", "topic.blacklist", ("t",), ())
    assert ListEdit.from_dict(plain.as_dict()) == plain
    assert edit.describe() == "cp groups.exclude += g"


def test_a_superseding_incident_keeps_the_entries_it_inherited_and_adds_its_new_topics() -> None:
    """`failover --new-incident` inherits what the superseded incident wrote; a topic the
    application gained since is planned against the list now and added to the same edit,
    so the return takes out exactly both."""
    config = {"topics": ".*"}
    inherited = plan_edit(config, "src", "topics.exclude", ["billing\\.eu"], ["d"])
    during = apply_edits(config, [inherited])
    now = plan_edit(during, "src", "topics.exclude", ["billing\\.eu", "billing\\.refunds"],
                    ["d"])
    assert now.added == ("billing\\.refunds",)  # billing.eu is there: not "added" now
    merged = merge_edits([inherited], [now])
    assert merged == [ListEdit("src", "topics.exclude", ("billing\\.eu", "billing\\.refunds"),
                               ("billing\\.eu", "billing\\.refunds"), seed=("d",))]
    assert merge_edits(merged, [now]) == merged  # left out already: nothing changes
    # A list it had not edited is planned as it stands.
    groups = ListEdit("cp", "groups.exclude", ("billing-app",), ("billing-app",))
    assert merge_edits([inherited], [groups]) == [inherited, groups]
    after = apply_edits(during, merged)
    assert entries_of(after["topics.exclude"]) == ["d", "billing\\.eu", "billing\\.refunds"]
    assert undo_edits(after, merged) == config
    # An entry the operator had there already stays at the return.
    operator = {"topics": ".*", "topics.exclude": "billing\\.refunds"}
    mine = merge_edits([ListEdit("src", "topics.exclude", ("billing\\.eu",), ("billing\\.eu",))],
                       [plan_edit(operator, "src", "topics.exclude",
                                  ["billing\\.eu", "billing\\.refunds"], ["d"])])
    assert mine[0].added == ("billing\\.eu",)


def test_entries_that_leave_out_fewer_topics_than_the_part_has_do_not_hold() -> None:
    edit = ListEdit("src", "topics.exclude", ("billing\\.eu",), ("billing\\.eu",))
    assert leaves_out({"src": {"topics.exclude": ["billing\\.eu"]}}, [edit])
    assert not leaves_out({"src": {"topics.exclude": ["billing\\.eu", "billing\\.refunds"]}},
                          [edit])
    assert not leaves_out({"cp": {"topics.exclude": ["billing\\.eu"]}}, [edit])
