"""ACL parity: which source grants the flow's clients need, and which the target covers."""

from __future__ import annotations

from drctl.readiness.acls import Grant, missing_on_target, relevant


def grant(principal: str = "User:app", op: str = "WRITE", resource: str = "TOPIC",
          name: str = "orders", pattern: str = "LITERAL", host: str = "*") -> Grant:
    return Grant(principal, host, op, resource, pattern, name)


def test_a_write_grant_missing_on_the_target_is_found() -> None:
    needed = [grant(), grant(op="READ")]
    assert missing_on_target(needed, [grant(op="READ")]) == [grant()]


def test_kafka_matching_rules_cover_by_all_wildcards_and_prefixes() -> None:
    wanted = grant(name="orders.eu")
    assert grant(op="ALL", name="orders.eu").covers(wanted)
    assert grant(principal="User:*", name="orders.eu").covers(wanted)
    assert grant(name="orders.", pattern="PREFIXED").covers(wanted)
    assert grant(name="*").covers(wanted)
    assert not grant(name="orders.us", pattern="PREFIXED").covers(wanted)
    assert not grant(name="orders").covers(wanted)  # a literal name is that name only
    assert not grant(principal="User:other", name="orders.eu").covers(wanted)
    assert not grant(host="10.0.0.1", name="orders.eu").covers(wanted)
    assert not grant(op="READ", name="orders.eu").covers(wanted)
    # A prefixed source grant is covered only by a prefix as wide or wider.
    assert grant(name="ord", pattern="PREFIXED").covers(grant(name="orders", pattern="PREFIXED"))
    assert not grant(name="orders").covers(grant(name="orders", pattern="PREFIXED"))


def test_only_the_flows_topics_and_groups_and_never_the_replicators_own_grants() -> None:
    grants = [grant(), grant(name="other"), grant(op="DESCRIBE"),
              grant(resource="GROUP", name="billing", op="READ"),
              grant(resource="GROUP", name="skipped", op="READ"),
              grant(principal="User:mm2", op="READ"),
              grant(name="ord", pattern="PREFIXED")]
    kept = relevant(grants, lambda t: t == "orders", lambda g: g == "billing", ["orders"],
                    "User:mm2")
    assert kept == sorted([grant(resource="GROUP", name="billing", op="READ"), grant(),
                           grant(name="ord", pattern="PREFIXED")],
                          key=lambda g: (g.resource, g.name, g.principal, g.operation))


def test_the_fix_is_a_command_that_grants_exactly_that() -> None:
    cmd = grant(name="orders.", pattern="PREFIXED", host="10.1.2.3").add_command("b:9092")
    assert cmd == ("kafka-acls.sh --bootstrap-server b:9092 --add --allow-principal User:app "
                   "--allow-host 10.1.2.3 --operation Write --topic 'orders.' "
                   "--resource-pattern-type prefixed")
