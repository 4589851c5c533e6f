"""MirrorMaker 2's connectors as drctl configures them (drctl/kafka/mm2_connectors.py):
which topics a flow copies; a plain flow has no security properties."""

from __future__ import annotations

from drctl.kafka.mm2_connectors import MirrorFlow


def test_mm2_flow_knows_which_topics_it_copies() -> None:
    from drctl.kafka.mm2_connectors import MirrorFlow

    flow = MirrorFlow("primary", "secondary", "a:1", "b:1")
    assert flow.replicates("orders") and flow.replicates("t1-acct")
    for never in ("t1-scope.replica", "__consumer_offsets", "_drctl_state", "connect-offsets",
                  "orders.drctl-quarantine", "mm2-offsets.primary.internal"):
        assert not flow.replicates(never), never
    assert not MirrorFlow("primary", "secondary", "a:1", "b:1", topics="orders").replicates("x")


def test_a_prefixed_flow_never_counts_the_reverse_copies_as_its_topics() -> None:
    """MirrorMaker 2's cycle check: with prefixed names a topic whose name says it came from
    the target (`secondary.orders`, the retired reverse flow's copies on the primary) is never
    copied back. `lab status` counted those as forever behind after one prefixed cycle (the
    second round of a drill campaign, seed 15, step `replicated`)."""
    prefixed = MirrorFlow("primary", "secondary", "a:1", "b:1", names_kept=False)
    assert prefixed.replicates("orders") and prefixed.replicates("payments.eu")
    assert not prefixed.replicates("secondary.orders")
    assert not prefixed.replicates("other.secondary.orders")  # upstream after upstream
    assert prefixed.replicates("primary.orders")  # from the source itself: copied on
    kept = MirrorFlow("primary", "secondary", "a:1", "b:1")
    assert kept.replicates("secondary.orders")  # names say nothing with names kept


def test_plain_flow_has_no_security_properties() -> None:
    cfg = MirrorFlow("a", "b", "a:1", "b:1").source_connector()
    assert not any("sasl" in k or "security" in k for k in cfg)


def test_a_legacy_flow_keeps_its_lists_under_the_old_names() -> None:
    """`lab up --legacy-keys`: the same lists as a new flow's, under the names Kafka 3.x
    still reads (topics.blacklist, groups.blacklist) and without the new ones."""
    new, old = (MirrorFlow("p", "s", "a:1", "b:1", legacy_keys=legacy)
                for legacy in (False, True))
    for connector in ("source_connector", "checkpoint_connector"):
        cfg = getattr(old, connector)()
        assert "topics.exclude" not in cfg and "groups.exclude" not in cfg
        assert cfg["topics.blacklist"] == getattr(new, connector)()["topics.exclude"]
    assert old.checkpoint_connector()["groups.blacklist"] == "console-consumer-.*,connect-.*,__.*"
    assert "groups.blacklist" not in old.source_connector()
    assert old.heartbeat_connector() == new.heartbeat_connector()
