"""ACL parity: which source grants the flow's clients need, and which the target covers."""

from __future__ import annotations

from typing import cast

from confluent_kafka.admin import AdminClient

from drctl.readiness.acls import (
    AclScope,
    Grant,
    Need,
    denied_on_target,
    missing_on_target,
    needs_on_target,
    relevant,
)


def grant(principal: str = "User:app", op: str = "WRITE", resource: str = "TOPIC",
          name: str = "orders", pattern: str = "LITERAL", host: str = "*",
          permission: str = "ALLOW") -> Grant:
    return Grant(principal, host, op, resource, pattern, name, permission)


def deny(**kwargs: str) -> Grant:
    return grant(permission="DENY", **kwargs)


def kept(needed: list[Grant], topics: list[str]) -> list[Need]:
    """The needs with topic names kept."""
    return needs_on_target(needed, topics, lambda t: t, lambda t: t, True)


def prefixed(needed: list[Grant], topics: list[str]) -> list[Need]:
    """The needs with MirrorMaker 2's prefixed names (the mirror of orders: primary.orders)."""
    return needs_on_target(needed, topics, lambda t: t, lambda t: f"primary.{t}", False)


def test_a_write_grant_missing_on_the_target_is_found() -> None:
    needs = kept([grant(), grant(op="READ")], ["orders"])
    assert [n.wanted for n in missing_on_target(needs, [grant(op="READ")])] == [grant()]


def test_a_prefixed_source_grant_is_met_by_target_grants_covering_each_of_its_topics() -> None:
    source = grant(name="orders", pattern="PREFIXED")
    # The one topic in scope it covers is granted literally on the target: no false alarm.
    assert missing_on_target(kept([source], ["orders"]), [grant()]) == []
    # A second topic under the prefix is not: that topic is named, with a literal fix.
    [lacking] = missing_on_target(kept([source], ["orders", "orders-eu"]), [grant()])
    assert lacking.wanted == grant(name="orders-eu") and lacking.source == source


def test_with_prefixed_names_consumers_need_read_on_the_mirror_their_groups_commit_on() -> None:
    needs = prefixed([grant(op="READ"), grant(op="WRITE")], ["orders"])
    assert sorted((n.wanted.operation, n.wanted.name) for n in needs) == [
        ("READ", "orders"), ("READ", "primary.orders"), ("WRITE", "orders")]
    target = [grant(op="READ"), grant(op="WRITE")]  # the plain names only
    assert [n.wanted for n in missing_on_target(needs, target)] == [
        grant(op="READ", name="primary.orders")]
    # ALL on the source: READ on the mirror is what the target must give.
    assert [n.wanted for n in prefixed([grant(op="ALL")], ["orders"])] == [
        grant(op="ALL"), grant(op="READ", name="primary.orders")]
    assert missing_on_target(prefixed([grant(op="READ")], ["orders"]),
                             [grant(op="READ", name="primary.", pattern="PREFIXED"),
                              grant(op="READ")]) == []


def test_a_deny_on_the_target_that_refuses_what_the_source_allows_is_found() -> None:
    needs = kept([grant()], ["orders"])
    target = [grant(), deny(op="WRITE")]
    [(need, by)] = denied_on_target(needs, [], target, "User:mm2")
    assert need.wanted == grant() and by == deny(op="WRITE")
    # Kafka's matching: a wildcard principal, ALL, DESCRIBE (the topic is invisible), a
    # prefix or another host all refuse it too.
    for refusing in (deny(principal="User:*"), deny(op="ALL"), deny(op="DESCRIBE"),
                     deny(name="ord", pattern="PREFIXED"), deny(name="*"),
                     deny(host="10.0.0.7")):
        assert denied_on_target(needs, [], [refusing], None), refusing
    for harmless in (deny(op="READ"), deny(name="other"), deny(principal="User:other"),
                     deny(resource="GROUP")):
        assert denied_on_target(needs, [], [harmless], None) == [], harmless
    # The same DENY on the source: the source refuses it too, parity holds.
    assert denied_on_target(needs, [deny(op="WRITE")], target, None) == []
    # drctl's replication fence (a DENY WRITE on the replicator) is no finding.
    assert denied_on_target(kept([grant(principal="User:*")], ["orders"]), [],
                            [deny(principal="User:mm2")], "User:mm2") == []


def test_transactional_ids_of_the_flows_producers_are_compared() -> None:
    txn = grant(resource="TRANSACTIONAL_ID", name="orders-app-", pattern="PREFIXED")
    other = grant(principal="User:batch", resource="TRANSACTIONAL_ID", name="batch")
    kept_ = relevant([grant(), txn, other], lambda t: t == "orders", lambda g: False,
                     ["orders"], None)
    assert txn in kept_ and other not in kept_  # User:batch writes none of the flow's topics
    needs = kept(kept_, ["orders"])
    assert [n.wanted for n in missing_on_target(needs, [grant()])] == [txn]
    assert txn.add_command("b:9092") == (
        "kafka-acls.sh --bootstrap-server b:9092 --add --allow-principal User:app "
        "--operation Write --transactional-id 'orders-app-' --resource-pattern-type prefixed")


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
    assert deny(op="WRITE").remove_command("b:9092") == (
        "kafka-acls.sh --bootstrap-server b:9092 --remove --deny-principal User:app "
        "--operation Write --topic 'orders'")


class _Restarting:
    """An admin client whose broker drops the ACL requests: `drops` of them, then answers
    that the cluster has no authorizer."""

    def __init__(self, drops: int) -> None:
        self.drops = drops

    def delete_acls(self, filters: list[object], **_: object) -> dict[object, object]:
        from concurrent.futures import Future

        from confluent_kafka import KafkaError, KafkaException

        answer: Future[object] = Future()
        if self.drops:
            self.drops -= 1
            answer.set_exception(KafkaException(KafkaError(KafkaError._TRANSPORT,
                                                           "Broker transport failure")))
        else:
            answer.set_exception(KafkaException(KafkaError(KafkaError.SECURITY_DISABLED)))
        return {filters[0]: answer}


def _admin(drops: int) -> AdminClient:
    return cast(AdminClient, _Restarting(drops))


def _scope() -> AclScope:
    return AclScope("primary", "secondary", "127.0.0.1:9", ["orders"], lambda t: True,
                    lambda g: True, lambda t: t, lambda t: t, True, None)


def test_a_cluster_that_drops_an_acl_request_is_named() -> None:
    import pytest

    from drctl.errors import Unreachable
    from drctl.readiness.acls import acl_parity

    with pytest.raises(Unreachable) as raised:
        acl_parity(_scope(), _admin(0), _admin(1))
    assert raised.value.message.startswith("cluster 'secondary': ")
    assert raised.value.transient  # waiting may cure it: check asks again within --deadline
    findings, compared = acl_parity(_scope(), _admin(0), _admin(0))
    assert compared == 0 and findings[0].difference == "no authorizer on either cluster"
