"""The secured lab (`drctl lab up --secure`) and the replication fence on real brokers:
TLS, SASL (SCRAM-SHA-512, PLAIN, OAUTHBEARER), mTLS, StandardAuthorizer, MirrorMaker 2 as a
principal that is not a super user, Connect's REST API over HTTPS with basic auth."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from drctl.kafka.acls import AclOutcome, authorizer_available, fence, fenced_topics, lift_fence
from drctl.kafka.clients import ClusterClients
from drctl.kafka.groups import committed_offsets
from drctl.kafka.records import read_all
from drctl.lab.security import DRCTL_USER, MM2_PRINCIPAL, MM2_USER
from drctl.lab.workload import commit_offsets, create_topics
from tests.conftest import RunningLab
from tests.lab.support import keyed, produce, run_drctl, run_json, source_tasks, wait_replicated

pytestmark = pytest.mark.lab


def mm2_login(running: RunningLab, cluster: str) -> dict[str, str]:
    """librdkafka properties for MirrorMaker 2's principal (tests only: drctl never uses it)."""
    return {"bootstrap.servers": running.lab.bootstrap(running.state, cluster),
            "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": MM2_USER,
            "sasl.password": running.lab.credentials.password(MM2_USER),
            "ssl.ca.location": str(running.lab.credentials.ca_file)}



def test_mirrormaker_replicates_as_its_own_principal(secure_lab: RunningLab, ns: str) -> None:
    topic = f"{ns}-orders"
    create_topics(secure_lab.primary, (topic,), 2)
    produce(secure_lab.primary, topic, keyed("k", 20))
    wait_replicated(secure_lab, topic, 20)
    connect = secure_lab.lab.connect_client(secure_lab.state)
    password = secure_lab.lab.credentials.password(MM2_USER)
    for name in secure_lab.lab.flow(secure_lab.state).connectors():
        # The checkpoint connector has no task until a group has committed.
        cstate, tasks = connect.connector_state(name)
        assert cstate == "RUNNING" and set(tasks) <= {"RUNNING"}, (name, tasks)
        config = connect.config(name)
        assert config["target.cluster.sasl.jaas.config"].startswith("${file:")
        assert password not in json.dumps(config)

    # MirrorMaker 2 is not a super user: no ACL lets it write to the source's topics.
    mm2 = ClusterClients("primary", {**mm2_login(secure_lab, "primary")})
    errors: list[KafkaError] = []
    producer = mm2.producer(**{"enable.idempotence": "false", "message.timeout.ms": "10000"})
    producer.produce(topic, value=b"x", on_delivery=lambda err, _msg: errors.append(err))
    producer.flush(15)
    assert [e.code() for e in errors] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
    assert len(read_all(secure_lab.primary, topic)) == 20


def test_clients_without_the_right_credentials_are_refused(secure_lab: RunningLab) -> None:
    bootstrap = secure_lab.lab.bootstrap(secure_lab.state, "primary")
    anonymous = ClusterClients("primary", {"bootstrap.servers": bootstrap})
    with pytest.raises(KafkaException):
        anonymous.admin().list_topics(timeout=5)
    wrong = ClusterClients("primary", {
        "bootstrap.servers": bootstrap, "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": DRCTL_USER,
        "sasl.password": "not-it", "ssl.ca.location": str(secure_lab.lab.credentials.ca_file)})
    with pytest.raises(KafkaException):
        wrong.admin().list_topics(timeout=5)
    # The mTLS listener takes no client without a certificate the lab's CA signed.
    mtls = secure_lab.state.ports.mtls(secure_lab.state.ports.primary)
    no_cert = ClusterClients("primary", {
        "bootstrap.servers": f"127.0.0.1:{mtls}", "security.protocol": "SSL",
        "ssl.ca.location": str(secure_lab.lab.credentials.ca_file)})
    with pytest.raises(KafkaException):
        no_cert.admin().list_topics(timeout=5)
    # The lab's drctl.yaml refers to drctl's password; it never holds it.
    password = secure_lab.lab.credentials.password(DRCTL_USER)
    assert password not in secure_lab.config_file.read_text()
    assert "${file:" in secure_lab.config_file.read_text()


def test_drctl_commands_work_on_the_secured_lab(secure_lab: RunningLab, ns: str,
                                                tmp_path: Path) -> None:
    config = str(secure_lab.config_file)
    status, report = run_json("--config", config, "status")
    assert status == 0, report
    assert all(c["reachable"] for c in report["clusters"].values()), report
    assert set(report["replication"]["connectors"].values()) == {"RUNNING"}

    topic = f"{ns}-payments"
    create_topics(secure_lab.primary, (topic,), 2)
    produce(secure_lab.primary, topic, keyed("p", 30))
    wait_replicated(secure_lab, topic, 30)
    group = f"{ns}-app"
    commit_offsets(secure_lab.primary, group, [TopicPartition(topic, 0, 5),
                                               TopicPartition(topic, 1, 15)])
    status, report = run_json("--config", config, "translate-offsets", "--groups", group,
                              "--method", "exact", "--yes")
    assert status == 0, report
    (moved,) = report["groups"]
    assert moved["group"] == group and moved["applied"]
    committed = committed_offsets(secure_lab.secondary, [group])[group]
    assert {p: o for (_, p), o in committed.items()} == {0: 5, 1: 15}


def test_fence_stops_mirrormaker_and_lifting_lets_it_copy_again(secure_lab: RunningLab,
                                                                ns: str) -> None:
    topic = f"{ns}-fenced"
    other = f"{ns}-open"
    create_topics(secure_lab.primary, (topic, other), 2)
    produce(secure_lab.primary, topic, keyed("before", 10))
    wait_replicated(secure_lab, topic, 10)
    target = secure_lab.secondary.admin()
    assert authorizer_available(target)

    first = fence(target, MM2_PRINCIPAL, [topic])
    assert first.outcome == AclOutcome.DONE and first.changed == (topic,)
    again = fence(target, MM2_PRINCIPAL, [topic])
    assert again.outcome == AclOutcome.DONE and again.changed == () \
        and again.unchanged == (topic,)
    assert topic in fenced_topics(target, MM2_PRINCIPAL)
    try:
        produce(secure_lab.primary, topic, keyed("during", 7))
        # The copy attempt fails on authorization and fails the task; nothing arrives.
        end = time.monotonic() + 30
        while "FAILED" not in source_tasks(secure_lab) and time.monotonic() < end:
            time.sleep(0.5)
        assert source_tasks(secure_lab) == ["FAILED"]
        time.sleep(3)
        assert len(read_all(secure_lab.secondary, topic)) == 10
    finally:
        lifted = lift_fence(target, MM2_PRINCIPAL, [topic])
    assert lifted.outcome == AclOutcome.DONE and lifted.changed == (topic,)
    assert topic not in fenced_topics(target, MM2_PRINCIPAL)
    assert lift_fence(target, MM2_PRINCIPAL, [topic]).unchanged == (topic,)

    # A failed task stays failed after its cause is gone: restart it.
    name = secure_lab.lab.flow(secure_lab.state).connector_names()["source"]
    secure_lab.lab.connect_client(secure_lab.state).restart_failed(name)
    wait_replicated(secure_lab, topic, 17)
    produce(secure_lab.primary, other, keyed("after", 4))
    wait_replicated(secure_lab, other, 4)
    keys = sorted(r.key for r in read_all(secure_lab.secondary, topic))
    assert keys == sorted([f"before-{i}".encode() for i in range(10)]
                          + [f"during-{i}".encode() for i in range(7)])


def test_fence_without_rights_is_denied(secure_lab: RunningLab) -> None:
    """MirrorMaker 2's own principal may not manage ACLs: a typed outcome, no exception."""
    mm2 = ClusterClients("secondary", mm2_login(secure_lab, "secondary"))
    result = fence(mm2.admin(), MM2_PRINCIPAL, ["anything"])
    assert result.outcome == AclOutcome.DENIED and not result.done
    assert "may not manage ACLs" in result.reason
    assert authorizer_available(mm2.admin())


def test_fence_on_a_cluster_without_authorizer_is_unsupported(lab: RunningLab) -> None:
    """The shared (plain) lab: no authorizer, so no fence — said as an outcome."""
    admin = lab.secondary.admin()
    assert not authorizer_available(admin)
    for result in (fence(admin, MM2_PRINCIPAL, ["anything"]),
                   lift_fence(admin, MM2_PRINCIPAL, ["anything"])):
        assert result.outcome == AclOutcome.UNSUPPORTED, result
        assert "no authorizer" in result.reason and not result.done
    # Kafka answers DescribeAcls without an authorizer with no bindings, not an error.
    assert fenced_topics(admin, MM2_PRINCIPAL) == set()


def test_check_finds_a_write_acl_the_target_lacks(secure_lab: RunningLab, ns: str,
                                                  tmp_path: Path) -> None:
    from confluent_kafka.admin import (
        AclBinding,
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    from drctl.kafka.acls import grant

    topic, principal = f"{ns}-acl", f"User:app-{ns}"
    create_topics(secure_lab.primary, (topic,), 1)
    produce(secure_lab.primary, topic, keyed("k", 4, partitions=1))
    wait_replicated(secure_lab, topic, 4)
    from tests.lab.test_check import own_config

    config = str(own_config(secure_lab, ns, tmp_path))
    # The producer's and consumer's grants exist on both clusters: ready.
    both = [AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, principal, "*",
                       op, AclPermissionType.ALLOW) for op in (AclOperation.READ,)]
    write = AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, principal, "*",
                       AclOperation.WRITE, AclPermissionType.ALLOW)
    for cluster in (secure_lab.primary, secure_lab.secondary):
        grant(cluster.admin(), both)
    try:
        status, out = run_json("--config", config, "check", "--topics", topic, "--groups", "^$")
        assert status == 0, out["findings"]
        assert out["checked"]["acls"] == 1
        # WRITE on the source only: MirrorMaker 2 never copies ALLOW WRITE bindings.
        grant(secure_lab.primary.admin(), [write])
        status, out = run_json("--config", config, "check", "--topics", topic, "--groups", "^$")
        assert status == 3
        [found] = [f for f in out["findings"] if f["area"] == "acls"]
        assert found["object"] == f"{principal} WRITE on topic {topic}"
        assert found["difference"] == "allowed on primary, not on secondary"
        assert found["fix"].startswith(f"kafka-acls.sh --bootstrap-server "
                                       f"{secure_lab.secondary.bootstrap} --add "
                                       f"--allow-principal {principal} --operation Write")
        # Granted on the target too, and a DENY WRITE there: the DENY wins over the ALLOW.
        grant(secure_lab.secondary.admin(), [write])
        assert run_json("--config", config, "check", "--topics", topic, "--groups",
                        "^$")[0] == 0
        grant(secure_lab.secondary.admin(), [AclBinding(
            ResourceType.TOPIC, topic[:-2], ResourcePatternType.PREFIXED, principal, "*",
            AclOperation.WRITE, AclPermissionType.DENY)])
        status, out = run_json("--config", config, "check", "--topics", topic, "--groups", "^$")
        assert status == 3
        [found] = [f for f in out["findings"] if f["area"] == "acls"]
        assert found["object"] == f"{principal} WRITE on topic {topic}"
        assert found["difference"] == (
            f"allowed on primary, denied on secondary by {principal} DENY WRITE on topic "
            f"{topic[:-2]} (prefixed) (a DENY wins over every ALLOW)")
        assert found["fix"] == (
            f"kafka-acls.sh --bootstrap-server {secure_lab.secondary.bootstrap} --remove "
            f"--deny-principal {principal} --operation Write --topic '{topic[:-2]}' "
            "--resource-pattern-type prefixed")
    finally:
        for cluster in (secure_lab.primary, secure_lab.secondary):
            admin = cluster.admin()
            for future in admin.delete_acls([AclBindingFilter(
                    ResourceType.TOPIC, None, ResourcePatternType.ANY,  # type: ignore[arg-type]
                    principal, "*", AclOperation.ANY, AclPermissionType.ANY)],
                    request_timeout=10).values():
                future.result()


@pytest.mark.parametrize("login", ["scram", "plain", "mtls", "oauthbearer"])
def test_group_requests_log_in_every_way_the_lab_has(secure_lab: RunningLab, ns: str,
                                                     login: str) -> None:
    """Issue 43: the group requests' child process (kafka/coordinator.py) logs in with the
    cluster's own configuration, whatever it is: commit, read back, list, describe."""
    import yaml

    from drctl.config import load_config
    from drctl.kafka.groups import alter_offsets, group_states, list_groups

    lab = secure_lab.lab
    path = lab.config_file if login in ("scram", "plain") else lab.secure_config_file(login)
    raw = yaml.safe_load(path.read_text())
    if login == "plain":
        raw["clusters"]["primary"]["sasl.mechanism"] = "PLAIN"
    config_file = path.parent / f"drctl-groups-{login}-{ns}.yaml"
    config_file.write_text(yaml.safe_dump(raw))
    try:
        clients = ClusterClients.for_cluster(load_config(config_file), "primary")
        topic, group = f"{ns}-logins", f"{ns}-{login}"
        create_topics(secure_lab.primary, (topic,), 2)
        alter_offsets(clients, group, {(topic, 0): 3, (topic, 1): 4})
        assert committed_offsets(clients, [group]) == {group: {(topic, 0): 3, (topic, 1): 4}}
        assert group in list_groups(clients)
        assert group_states(clients, [group])[group].state == "EMPTY"
        clients.close()
    finally:
        config_file.unlink()


def test_a_topic_drctl_may_not_describe_ends_gap_analysis_at_once_with_the_cause(
        secure_lab: RunningLab, ns: str, tmp_path: Path) -> None:
    """Issue 43: authorization is permanent — exit 4 at once, saying so; it used to be "no
    topic" (a wrong cause), and a ListOffsets refused a wait for partition leaders."""
    import yaml
    from confluent_kafka.admin import (
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    topic = f"{ns}-hidden"
    create_topics(secure_lab.primary, (topic,), 2)
    produce(secure_lab.primary, topic, keyed("h", 10))
    wait_replicated(secure_lab, topic, 10)
    # A principal with no ACL at all on the primary: it logs in, and may describe nothing.
    user, password = f"reader-{ns}", f"pw-{ns}"
    for future in secure_lab.primary.admin().alter_user_scram_credentials([
            UserScramCredentialUpsertion(user, ScramCredentialInfo(
                ScramMechanism.SCRAM_SHA_512, 8192), password.encode())]).values():
        future.result(30)
    raw = yaml.safe_load(secure_lab.config_file.read_text())
    raw["clusters"]["primary"].update({"sasl.username": user, "sasl.password": password})
    config = tmp_path / "drctl.yaml"
    config.write_text(yaml.safe_dump(raw))
    end = time.monotonic() + 60
    while True:  # until the brokers know the new user's credentials
        status, out, err = run_drctl("--output", "json", "--config", str(config),
                                     "gap-analysis", "--topics", topic, "--report-dir",
                                     str(tmp_path / "gap"), "--deadline", "30s")
        report = json.loads(out)
        if "authentication" not in report.get("error", {}).get("message", "") \
                or time.monotonic() > end:
            break
        time.sleep(1)
    assert status == 4, report
    assert report["error"]["message"] == (
        f"'primary' does not let drctl's principal describe {topic}: not authorized "
        "(TOPIC_AUTHORIZATION_FAILED).")
    assert "Grant drctl's principal DESCRIBE and READ" in report["error"]["hint"]
    # At once: no retry said, no wait ended (a refusal is permanent, never waited for).
    assert "retrying in" not in err, err[-3000:]
    assert "waited_s" not in report["error"], report
