"""Incident scope's pure parts: the config's applications, the groups on a scope's edge, the
connector entries that leave an application out, and each application's protection in
`status`. How incidents of several scopes meet is test_side_by_side.py's."""

from __future__ import annotations

import re
from typing import Any

import pytest

from drctl.config import NameFilter, Scope, parse_config
from drctl.errors import ConfigError
from drctl.ops.steps.flow_status import applications_protection
from drctl.ops.steps.scope import flow_part, straddlers
from drctl.ops.steps.side_by_side import scope_among_open
from drctl.replication.base import FlowPart, FlowState
from drctl.replication.connect import scoped_connector_name
from drctl.replication.mirrormaker2 import MirrorMaker2, java_literal, reverse_connector_name
from drctl.replication.replicator import reverse_connector_name as replicator_name
from tests.unit.ops.support import open_incident as _open

BASE: dict[str, Any] = {
    "clusters": {"a": {"bootstrap.servers": "x"}, "b": {"bootstrap.servers": "y"}},
    "replication": {"kind": "mirrormaker2", "source": "a", "target": "b",
                    "connect": {"url": "http://c:8083", "source_connector": "src",
                                "checkpoint_connector": "cp"}},
    "applications": {"billing": {"topics": ["billing\\..*", "invoices"],
                                 "groups": ["billing-.*"]},
                     "orders": {"topics": ["orders"]}}}
BILLING = Scope("billing", NameFilter(("billing\\..*", "invoices")), NameFilter(("billing-.*",)))
ORDERS = Scope("orders", NameFilter(("orders",)))


def test_applications_are_parsed_and_named_on_the_command_line() -> None:
    config = parse_config(BASE)
    assert config.scope("billing") == BILLING and config.scope("orders") == ORDERS
    assert config.scope().whole and config.scope("orders").groups_given is False
    adhoc = config.scope(topics=["pay.*"], groups=["pay-app"])
    assert adhoc.covers_topic("payments") and not adhoc.covers_topic("orders")
    assert adhoc.adhoc and adhoc.describe() == "topics pay.*"
    with pytest.raises(ConfigError, match="unknown application 'order'.*orders"):
        config.scope("order")
    with pytest.raises(ConfigError, match="exclude each other"):
        config.scope("orders", topics=["x"])


def test_each_one_off_scope_is_an_identity_of_its_own() -> None:
    """`--topics 'A.*'` and `--topics 'B.*'` are two scopes (a second failover opens its own
    incident, never continues the first); the same regexes again are the same scope."""
    config = parse_config(BASE)
    a, b = config.scope(topics=["A-.*"]), config.scope(topics=["B-.*"])
    assert a.name != b.name and a.adhoc and b.adhoc
    assert config.scope(topics=["A-.*"]) == a
    assert config.scope(topics=["A-.*"], groups=["g"]).name != a.name
    assert a.name.startswith("adhoc-") and Scope.from_dict(a.as_dict()) == a
    # Older markers called every one-off scope "ad hoc": still one-off, never an application.
    assert Scope("ad hoc", NameFilter(("x",))).adhoc and not BILLING.adhoc
    a_open = _open(a, ["A-1"])
    scope, same = scope_among_open(b, [a_open])
    assert (scope, same) == (b, [])
    assert scope_among_open(a, [a_open]) == (a, [a_open])


def test_connector_names_are_url_safe_whatever_the_scope() -> None:
    rep = parse_config(BASE).require_replication()
    adhoc = parse_config(BASE).scope(topics=["A .*"])
    name = reverse_connector_name(rep, FlowPart(adhoc.name, ("A 1",)))
    assert name == f"mm2-b-a-source-{adhoc.name}"
    assert scoped_connector_name("mm2-b-a-source", FlowPart("ad hoc", ())) == \
        "mm2-b-a-source-ad~20hoc"
    # Letters beyond ASCII (an application's name may hold them) are written out too, and
    # two names never meet.
    names = {scoped_connector_name("r", FlowPart(n, ())) for n in ("é", "è", "e", "e~e9")}
    assert len(names) == 4 and all(re.fullmatch(r"[\w.~-]+", n) and n.isascii()
                                   for n in names)
    assert replicator_name(rep, FlowPart("billing", ())) == "replicator-b-to-a-billing"


def test_an_application_without_topics_or_with_a_bad_name_is_a_config_error() -> None:
    bad = {**BASE, "applications": {"nothing": {"groups": ["g"]}, "bad name": {"topics": ["t"]},
                                    "*": {"topics": ["t"]}, "adhoc-1": {"topics": ["t"]}}}
    with pytest.raises(ConfigError) as caught:
        parse_config(bad)
    text = str(caught.value)
    assert "applications.nothing.topics" in text and "applications.bad name" in text
    assert "applications.*" in text and "applications.adhoc-1" in text


def test_a_scope_survives_the_marker() -> None:
    assert Scope.from_dict(BILLING.as_dict()) == BILLING
    assert Scope.from_dict({}) == Scope() and Scope.from_dict(None).whole
    whole_without = Scope("*", NameFilter((), ("orders",)))
    assert Scope.from_dict(whole_without.as_dict()) == whole_without


def test_the_part_an_application_stops_is_its_topics_and_named_groups() -> None:
    m = _open(BILLING, ["invoices", "billing.eu"], ("billing-app",))
    assert flow_part(m) == FlowPart("billing", ("billing.eu", "invoices"), ("billing-app",))
    # An application that names no groups: topics only (checkpoints stop with them).
    assert flow_part(_open(ORDERS, ["orders"], ["orders-app"])) == FlowPart(
        "orders", ("orders",), ())
    assert flow_part(_open(Scope(), ["orders"])) is None


def test_groups_reading_both_sides_of_the_edge() -> None:
    commits = {"billing-app": [("invoices", 0), ("billing.eu", 1)],
               "billing-audit": [("invoices", 0), ("orders", 0)],  # one of its own, outside
               "orders-app": [("orders", 0)],
               "orders-billing": [("orders", 0), ("invoices", 0)],  # another group, inside
               "billing-idle": [("not-replicated", 0), ("invoices", 0)]}
    found = straddlers(BILLING, commits, {"not-replicated": False})
    assert {f.group: (f.inside, f.outside) for f in found} == {
        "billing-audit": (("invoices",), ("orders",)),
        "orders-billing": (("invoices",), ("orders",))}
    # Without named groups, a group reading the application's topics is one of its own.
    found = straddlers(ORDERS, commits)
    assert sorted(f.group for f in found) == ["billing-audit", "orders-billing"]
    assert straddlers(Scope(), commits) == []


def test_the_entries_that_leave_an_application_out_of_mirrormaker_2() -> None:
    rep = parse_config(BASE).require_replication()
    part = FlowPart("billing", ("billing.eu", "invoices"), ("billing-app",))
    entries = MirrorMaker2().exclusions(rep, part)
    assert entries == {"src": {"topics.exclude": ["billing\\.eu", "invoices"]},
                       "cp": {"topics.exclude": ["billing\\.eu", "invoices"],
                              "groups.exclude": ["billing\\-app"]}}
    assert java_literal("a.b-c_d") == "a\\.b\\-c_d"
    assert reverse_connector_name(rep, part) == "mm2-b-a-source-billing"
    assert reverse_connector_name(rep) == "mm2-b-a-source"


def test_status_tells_each_application_its_own_state_and_lag() -> None:
    forward = FlowState(True, {"src": "RUNNING"}, copying=("src",))
    lag = [{"topic": "invoices", "behind": 5, "oldest_unreplicated_ms": 1_000},
           {"topic": "orders", "behind": 0, "oldest_unreplicated_ms": None}]
    billing_open = _open(BILLING, ["invoices"], ("billing-app",))
    apps = applications_protection({"billing": BILLING, "orders": ORDERS}, [billing_open],
                                   forward, lag, ["src"], now_ms=11_000)
    assert apps["billing"]["state"] == "incident"
    assert apps["billing"]["incident"] == billing_open.incident
    assert (apps["orders"]["state"], apps["orders"]["lag_records"]) == ("protected", 0)
    assert apps["orders"]["topics"] == ["orders"]
    # Failed back: exposed until its return, the others untouched.
    billing_open.record("failback", {})
    apps = applications_protection({"billing": BILLING, "orders": ORDERS}, [billing_open],
                                   forward, lag, ["src"], now_ms=11_000)
    assert apps["billing"]["state"] == "exposed" and "its topics" in apps["billing"]["why"]
    assert apps["orders"]["state"] == "protected"


def test_status_counts_a_one_off_incident_on_an_applications_topics_as_its_own() -> None:
    """`failover --topics 'invoices'` leaves billing's topic out: billing is in that incident,
    never "protected"; a return waiting for the whole flow's names that one to run."""
    from drctl.config import adhoc_scope
    from drctl.ops.steps.flow_status import next_command

    forward = FlowState(True, {"src": "RUNNING"}, copying=("src",))
    lag = [{"topic": "invoices", "behind": 0, "oldest_unreplicated_ms": None}]
    oneoff = _open(adhoc_scope(["invoices"], []), ["invoices"])
    apps = applications_protection({"billing": BILLING, "orders": ORDERS}, [oneoff], forward,
                                   lag, ["src"], now_ms=11_000)
    assert (apps["billing"]["state"], apps["billing"]["incident"]) == ("incident",
                                                                       oneoff.incident)
    assert apps["orders"]["state"] == "protected"
    assert next_command(oneoff) == f"drctl failback --incident {oneoff.incident}"
    oneoff.record("reprotect:forward-resumed", {"held_by": "fo-whole"}, status="waiting")
    assert next_command(oneoff) == "drctl reprotect --incident fo-whole"
