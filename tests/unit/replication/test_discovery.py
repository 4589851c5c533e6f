"""`drctl config init`'s core (drctl/replication/discovery.py and each kind's
`discover_flows`): connector configs as Kafka Connect returns them -> the flow -> the
configuration drctl writes, for several MirrorMaker 2 and Replicator shapes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from drctl.config import parse_config
from drctl.errors import ExitStatus
from drctl.kafka.clients import check_client_properties
from drctl.kafka.mm2_connectors import MirrorFlow
from drctl.replication.discovery import (
    FlowChoiceNeeded,
    InitRequest,
    RenameNeeded,
    choose_flow,
    discover_flows,
    draft_config,
    flow_without_connectors,
)

A, B = "kafka-a:9092", "kafka-b:9092"
REQUEST = InitRequest(A, B, "http://connect:8083")


def mm2_connectors(**flow: Any) -> dict[str, dict[str, str]]:
    """The three connectors of a flow, as the lab creates them (drctl's own MM2 configs)."""
    mirror = MirrorFlow(**{"source_alias": "primary", "target_alias": "secondary",
                           "source_bootstrap": A, "target_bootstrap": B, **flow})
    return {name: {**cfg, "name": name} for name, cfg in mirror.connectors().items()}


def rendered(request: InitRequest, connectors: dict[str, dict[str, str]]) -> tuple[Any, str]:
    """The draft for the one flow among `connectors`, and its text; the text parses to the
    draft's data, which drctl takes (the secrets it refers to exported) — librdkafka too."""
    draft = draft_config(request, choose_flow(discover_flows(connectors), request))
    text = draft.render()
    assert yaml.safe_load(text) == draft.data
    with pytest.MonkeyPatch.context() as env:
        for name in draft.env_vars:
            env.setenv(name, f"value-of-{name}")
        check_client_properties(parse_config(draft.data))
    return draft, text


@pytest.mark.parametrize(("names_kept", "rename"), [(True, "{topic}"),
                                                    (False, "primary.{topic}")])
def test_a_mirrormaker_flow_as_the_lab_runs_it(names_kept: bool, rename: str) -> None:
    draft, text = rendered(REQUEST, mm2_connectors(names_kept=names_kept, fast=True))
    rep = draft.data["replication"]
    assert draft.data["clusters"] == {"primary": {"bootstrap.servers": A},
                                      "secondary": {"bootstrap.servers": B}}
    assert (rep["kind"], rep["source"], rep["target"]) == ("mirrormaker2", "primary",
                                                           "secondary")
    assert (rep["source_alias"], rep["target_alias"], rep["rename"]) == ("primary",
                                                                         "secondary", rename)
    assert rep["connect"] == {"url": "http://connect:8083",
                              "source_connector": "mm2-primary-secondary-source",
                              "checkpoint_connector": "mm2-primary-secondary-checkpoint",
                              "heartbeat_connector": "mm2-primary-secondary-heartbeat"}
    # `.*` is every topic and every group; the exclude list is the connector's, regex by regex.
    assert rep["topics"]["include"] == [] and draft.data["groups"]["include"] == []
    excluded = parse_config(draft.data).require_replication().topics
    for topic in ("orders", "payments.eu", "a.replica", "__consumer_offsets", "_drctl_state",
                  "connect-offsets", "mm2-offset-syncs.secondary.internal"):
        assert excluded.matches(topic) == MirrorFlow("p", "s", A, B).replicates(topic), topic
    assert "principal" not in rep  # no login to take it from: a commented placeholder
    assert "# principal: User:NAME   # MirrorMaker 2's principal on the target" in text
    # The intervals, as comments: what they cost a failover with the source gone.
    assert "# - Checkpoints every 1 s" in text and "New groups are found every 2 s" in text
    assert draft.warnings == () and draft.env_vars == ()


def test_mirrormaker_defaults_old_names_and_a_separator() -> None:
    """No replication.policy.class (MM2's DefaultReplicationPolicy) with its separator; the
    pre-3.0 `*.blacklist` names; comma lists with spaces; intervals left at their defaults."""
    common = {"source.cluster.alias": "dc1", "target.cluster.alias": "dc2",
              "source.cluster.bootstrap.servers": A, "target.cluster.bootstrap.servers": B,
              "replication.policy.separator": "_"}
    connectors = {
        "dc1-to-dc2": {**common, "topics": "orders.*, payments",
                       "topics.blacklist": "orders-tmp",
                       "connector.class": "org.apache.kafka.connect.mirror.MirrorSourceConnector"},
        "dc1-to-dc2-cp": {**common, "groups": "app-.*,billing",
                          "groups.exclude": "app-test-.*",
                          "connector.class": "MirrorCheckpointConnector"},
    }
    draft, text = rendered(REQUEST, connectors)
    rep = draft.data["replication"]
    assert (rep["source_alias"], rep["target_alias"], rep["rename"]) == ("dc1", "dc2",
                                                                         "dc1_{topic}")
    assert rep["topics"] == {"include": ["orders.*", "payments"], "exclude": ["orders-tmp"]}
    assert draft.data["groups"] == {"include": ["app-.*", "billing"],
                                    "exclude": ["app-test-.*"]}
    assert rep["connect"]["source_connector"] == "dc1-to-dc2"
    assert rep["connect"]["checkpoint_connector"] == "dc1-to-dc2-cp"
    assert "heartbeat_connector" not in rep["connect"]
    assert "separator '_'" in text
    assert "Checkpoints every 60 s" in text and "New groups are found every 600 s" in text
    mirror = parse_config(draft.data).require_replication()
    assert mirror.mirror_topic("orders") == "dc1_orders"
    assert mirror.source_topic_of("dc1_orders") == "orders"


def test_a_java_regex_python_cannot_read_is_left_out_and_said() -> None:
    connectors = mm2_connectors(topics=r"orders.*,\p{Alpha}+")
    draft, text = rendered(REQUEST, connectors)
    assert draft.data["replication"]["topics"]["include"] == ["orders.*"]
    assert any(r"'\p{Alpha}+' is not a Python regex" in w for w in draft.warnings)
    assert r"# NOTE: topics: '\p{Alpha}+' is not a Python regex" in text


def test_a_custom_replication_policy_needs_rename() -> None:
    connectors = mm2_connectors()
    for cfg in connectors.values():
        cfg["replication.policy.class"] = "com.example.PrefixlessPolicy"
    chosen = choose_flow(discover_flows(connectors), REQUEST)
    with pytest.raises(RenameNeeded) as raised:
        draft_config(REQUEST, chosen)
    assert raised.value.exit_status == ExitStatus.USAGE
    assert "com.example.PrefixlessPolicy" in raised.value.message
    assert "--rename" in (raised.value.hint or "")
    draft, _ = rendered(InitRequest(A, B, REQUEST.connect_url, rename="dr.{topic}"),
                        connectors)
    assert draft.data["replication"]["rename"] == "dr.{topic}"


def test_a_replicator_with_a_secured_source_never_writes_its_secrets() -> None:
    jaas = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
            'username="replicator" password="s3cr3t-in-clear";')
    connectors = {"replicator-dc1-dc2": {
        "connector.class": "io.confluent.connect.replicator.ReplicatorSourceConnector",
        "src.kafka.bootstrap.servers": A, "dest.kafka.bootstrap.servers": B,
        "topic.whitelist": "orders,pay.ments", "topic.regex": "audit-.*",
        "topic.blacklist": "orders", "topic.rename.format": "${topic}.replica",
        "src.consumer.group.id": "replicator-group", "topic.poll.interval.ms": "30000",
        "src.kafka.security.protocol": "SASL_SSL", "src.kafka.sasl.mechanism": "SCRAM-SHA-512",
        "src.kafka.sasl.jaas.config": jaas,
        "src.kafka.ssl.truststore.location": "/etc/kafka/truststore.jks",
        "src.kafka.ssl.truststore.password": "trust-pass",
        "dest.kafka.security.protocol": "SASL_PLAINTEXT", "dest.kafka.sasl.mechanism": "PLAIN",
        "dest.kafka.sasl.jaas.config": jaas.replace("scram.ScramLoginModule",
                                                    "plain.PlainLoginModule"),
    }}
    draft, text = rendered(REQUEST, connectors)
    assert "s3cr3t" not in text and "trust-pass" not in text
    rep = draft.data["replication"]
    assert (rep["kind"], rep["rename"], rep["replicator_group"]) == (
        "replicator", "{topic}.replica", "replicator-group")
    assert rep["topics"] == {"include": ["orders", r"pay\.ments", "audit-.*"],
                             "exclude": ["orders"]}
    assert rep["connect"] == {"url": "http://connect:8083",
                              "source_connector": "replicator-dc1-dc2"}
    assert "source_alias" not in rep and "groups" not in draft.data
    assert rep["principal"] == "User:replicator"  # its login on the target, to fence it
    primary, secondary = draft.data["clusters"]["primary"], draft.data["clusters"]["secondary"]
    assert primary == {"bootstrap.servers": A, "security.protocol": "SASL_SSL",
                       "sasl.mechanism": "SCRAM-SHA-512",
                       "sasl.username": "${env:PRIMARY_SASL_USERNAME}",
                       "sasl.password": "${env:PRIMARY_SASL_PASSWORD}"}
    assert secondary["security.protocol"] == "SASL_PLAINTEXT"
    assert secondary["sasl.password"] == "${env:SECONDARY_SASL_PASSWORD}"
    assert draft.env_vars == ("PRIMARY_SASL_USERNAME", "PRIMARY_SASL_PASSWORD",
                              "SECONDARY_SASL_USERNAME", "SECONDARY_SASL_PASSWORD")
    # What drctl cannot carry over is a commented line to fill in.
    assert "    # ssl.ca.location: /etc/drctl/ca.pem   # the CA as PEM (Replicator trusts " \
           "/etc/kafka/truststore.jks)" in text
    assert "New topics are found every 30 s" in text
    assert "provenance.header.enable is off" in text


def test_oauthbearer_and_mutual_tls_logins() -> None:
    connectors = mm2_connectors(
        source_client={"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER",
                       "sasl.oauthbearer.token.endpoint.url": "https://idp/token",
                       "sasl.jaas.config": "...OAuthBearerLoginModule required "
                                           'clientSecret="idp-secret";'},
        target_client={"security.protocol": "SSL",
                       "ssl.keystore.location": "/etc/mm2/keystore.p12",
                       "ssl.keystore.password": "ks-pass",
                       "ssl.endpoint.identification.algorithm": ""})
    draft, text = rendered(REQUEST, connectors)
    assert "idp-secret" not in text and "ks-pass" not in text
    primary, secondary = draft.data["clusters"]["primary"], draft.data["clusters"]["secondary"]
    assert primary["sasl.oauthbearer.token.endpoint.url"] == "https://idp/token"
    assert primary["sasl.oauthbearer.client.secret"] == "${env:PRIMARY_OAUTH_CLIENT_SECRET}"
    assert secondary == {"bootstrap.servers": B, "security.protocol": "SSL",
                         "ssl.endpoint.identification.algorithm": "none"}
    assert "# ssl.certificate.location:" in text and "${env:SECONDARY_SSL_KEY_PASSWORD}" in text


def test_which_flow_among_several() -> None:
    forward = mm2_connectors()
    reverse = mm2_connectors(source_alias="secondary", target_alias="primary",
                             source_bootstrap=B, target_bootstrap=A)
    # The forward flow, the other named.
    chosen = choose_flow(discover_flows({**forward, **reverse}), REQUEST)
    assert (chosen.flow.name, chosen.source) == ("mm2-primary-secondary-source", "primary")
    assert any("mm2-secondary-primary-source" in w for w in chosen.warnings)
    # The only flow runs secondary -> primary: the secondary is the flow's source.
    chosen = choose_flow(discover_flows(reverse), REQUEST)
    assert (chosen.source, chosen.target) == ("secondary", "primary")
    # Two flows primary -> secondary: the operator names one.
    other = mm2_connectors(source_alias="primary", target_alias="dr")
    with pytest.raises(FlowChoiceNeeded) as raised:
        choose_flow(discover_flows({**forward, **other}), REQUEST)
    assert [f.name for f in raised.value.flows] == ["mm2-primary-dr-source",
                                                    "mm2-primary-secondary-source"]
    assert "--source-connector" in (raised.value.hint or "")
    named = InitRequest(A, B, REQUEST.connect_url, source_connector="mm2-primary-dr-source")
    assert choose_flow(discover_flows({**forward, **other}), named).flow.target_alias == "dr"
    with pytest.raises(FlowChoiceNeeded):
        choose_flow(discover_flows(forward), InitRequest(A, B, source_connector="nope"))
    # Addresses that are none of the given ones: one flow is taken, and that is said.
    elsewhere = InitRequest("10.0.0.1:9092", "10.0.0.2:9092", REQUEST.connect_url)
    chosen = choose_flow(discover_flows(forward), elsewhere)
    assert chosen.source == "primary" and "not the addresses given" in chosen.warnings[0]


def test_other_connectors_are_not_flows() -> None:
    assert discover_flows({"jdbc": {"connector.class": "io.confluent.connect.jdbc.Jdbc"},
                           "x": {}}) == []


def test_an_offset_preserving_mirror_reads_no_connectors() -> None:
    request = InitRequest(A, B, kind="identity")
    draft = draft_config(request, choose_flow([flow_without_connectors("identity")], request))
    text = draft.render()
    assert yaml.safe_load(text) == draft.data
    rep = parse_config(draft.data).require_replication()
    assert (rep.kind, rep.rename, rep.connect.url) == ("identity", "{topic}", None)
    assert draft.warnings == ()
    assert "# connect: " in text  # a placeholder, to let drctl stop the mirror


def test_dot_star_is_every_name_only_as_an_include() -> None:
    from drctl.replication.discovered import regex_list

    assert regex_list(" .* ", [], "topics", include=True) == ()
    assert regex_list(".*", [], "topics.exclude") == (".*",)  # excludes everything
    assert regex_list("a.*, ,b", [], "topics", include=True) == ("a.*", "b")


def test_a_pem_truststore_this_host_has_is_written(tmp_path: Path) -> None:
    """MirrorMaker 2 trusting a PEM file: librdkafka reads it too, so when the same path
    exists here it is written; a Java truststore never is."""
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    tls = {"security.protocol": "SSL", "ssl.truststore.type": "PEM",
           "ssl.truststore.location": str(ca)}
    draft, _ = rendered(REQUEST, mm2_connectors(
        source_client=tls,
        target_client={**tls, "ssl.truststore.location": str(tmp_path / "elsewhere.pem")}))
    assert draft.data["clusters"]["primary"]["ssl.ca.location"] == str(ca)
    assert "ssl.ca.location" not in draft.data["clusters"]["secondary"]


def test_each_clusters_schema_registry_is_written_its_password_by_reference() -> None:
    request = InitRequest(A, B, REQUEST.connect_url,
                          primary_registry="https://sr-a:8081",
                          secondary_registry="https://drctl:pw@sr-b:8081/apis/ccompat/v7")
    draft, text = rendered(request, mm2_connectors(names_kept=True))
    assert draft.data["clusters"]["primary"]["schema_registry"] == {"url": "https://sr-a:8081"}
    assert draft.data["clusters"]["secondary"]["schema_registry"] == {
        "url": "https://sr-b:8081/apis/ccompat/v7", "username": "drctl",
        "password": "${env:SECONDARY_REGISTRY_PASSWORD}"}
    assert "pw@" not in text and "SECONDARY_REGISTRY_PASSWORD" in draft.env_vars
    config = parse_config({**draft.data, "clusters": {
        name: {k: v for k, v in props.items() if k != "schema_registry"}
        for name, props in draft.data["clusters"].items()}})
    assert config.schema_registries == {}  # without them, the placeholder says where they go
    _, plain = rendered(REQUEST, mm2_connectors(names_kept=True))
    assert plain.count('# schema_registry: {url: "https://registry:8081"}') == 2


def test_connectors_on_the_old_names_are_read_as_the_lab_runs_them() -> None:
    """`config init` from connectors set up years ago (`lab up --legacy-keys`): their
    topics.blacklist is the flow's exclude list, as a new flow's topics.exclude is."""
    flows = {legacy: discover_flows(MirrorFlow("primary", "secondary", A, B, fast=True,
                                               legacy_keys=legacy).connectors())[0]
             for legacy in (False, True)}
    assert flows[True].topics == flows[False].topics
    assert flows[True].groups is not None and flows[True].groups.exclude == (
        "console-consumer-.*", "connect-.*", "__.*")


def _blacklisted(**extra: str) -> dict[str, dict[str, str]]:
    """A flow set up years ago: the operator's own entries under the old names."""
    connectors = MirrorFlow("primary", "secondary", A, B, fast=True,
                            legacy_keys=True).connectors()
    for cfg in connectors.values():
        if "topics.blacklist" in cfg:
            cfg["topics.blacklist"] += r",secret\..*"
        cfg.update(extra)
    return connectors


def test_old_names_a_kafka_4_worker_ignores_are_no_exclusion_and_are_said() -> None:
    """On Kafka 4 (the worker's plugin no longer defines topics.blacklist) a leftover
    `topics.blacklist` excludes nothing: the flow's lists are MirrorMaker 2's defaults, and
    the flow says which connector sets which old key, that what it names is replicated, and
    where to move it. A worker that still reads them (Kafka 3.x) keeps them as the lists."""
    read = discover_flows(_blacklisted(), lambda kind: True)[0]
    assert read.topics is not None and r"secret\..*" in read.topics.exclude
    assert not any("no longer reads" in p for p in read.problems)
    ignored = discover_flows(_blacklisted(), lambda kind: False)[0]
    assert ignored.topics is not None and ignored.topics.exclude == ()
    assert "topics.exclude not set (its default leaves out" in ignored.topics.source
    said = [p for p in ignored.problems if "no longer reads" in p]
    assert said and all("topics.blacklist" in p or "groups.blacklist" in p for p in said)
    assert any(r"secret\..*" in p and "move it to topics.exclude" in p for p in said), said
    # A connector that also sets the new key: the worker reads that one, nothing to say.
    both = discover_flows(_blacklisted(**{"topics.exclude": "x", "groups.exclude": "y"}),
                          lambda kind: False)[0]
    assert both.topics is not None and both.topics.exclude == ("x",)
    assert not any("no longer reads" in p for p in both.problems)


class _Worker:
    """What `config init` asks Kafka Connect: the connectors, and (only when an old key name
    is set) whether the source connector's plugin still defines topics.blacklist."""

    def __init__(self, connectors: dict[str, dict[str, str]], defines_old: bool) -> None:
        self.connectors, self.defines_old = connectors, defines_old
        self.asked: list[str] = []

    def connector_configs(self) -> dict[str, dict[str, str]]:
        return self.connectors

    def plugin_config_keys(self, plugin: str, connector_class: str) -> set[str]:
        self.asked.append(plugin)
        return {"topics", "topics.exclude"} | ({"topics.blacklist"} if self.defines_old
                                               else set())

    def info(self) -> dict[str, str]:
        return {"version": "4.3.1"}


@pytest.mark.parametrize("defines_old", [True, False])
def test_config_init_asks_the_worker_whether_it_reads_the_old_names(
        monkeypatch: pytest.MonkeyPatch, defines_old: bool) -> None:
    from drctl.replication import discovery

    worker = _Worker(_blacklisted(), defines_old)
    monkeypatch.setattr(discovery, "_connect_client", lambda request, deadline_s: worker)
    [flow] = discovery.find_flows(REQUEST)
    assert worker.asked == ["MirrorSourceConnector"]
    assert flow.topics is not None
    assert (r"secret\..*" in flow.topics.exclude) is defines_old
    # Connectors on the new names only: the worker is not asked.
    plain = _Worker(MirrorFlow("primary", "secondary", A, B, fast=True).connectors(), False)
    monkeypatch.setattr(discovery, "_connect_client", lambda request, deadline_s: plain)
    discovery.find_flows(REQUEST)
    assert plain.asked == []
