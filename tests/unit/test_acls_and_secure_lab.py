"""The pure parts of the replication fence and the lab's secure mode: how ACL errors become
outcomes, what the brokers, Connect and MirrorMaker 2 are configured with, and where the
passwords live."""

from __future__ import annotations

import json
import stat
from pathlib import Path

from confluent_kafka import KafkaError
from confluent_kafka.admin import AclOperation, AclPermissionType, ResourceType

from drctl.kafka.acls import AclOutcome, outcome_of
from drctl.kafka.mm2_connectors import MirrorFlow
from drctl.lab.lab import Lab, LabPorts, LabState
from drctl.lab.security import (
    MM2_PRINCIPAL,
    USERS,
    LabCredentials,
    broker_listener_properties,
    connect_worker_properties,
    drctl_client_properties,
    mm2_java_properties,
    mm2_source_acls,
    mm2_target_acls,
)


def test_acl_errors_become_outcomes() -> None:
    assert outcome_of(KafkaError(KafkaError.SECURITY_DISABLED)) == AclOutcome.UNSUPPORTED
    assert outcome_of(KafkaError(KafkaError.CLUSTER_AUTHORIZATION_FAILED)) == AclOutcome.DENIED
    assert outcome_of(KafkaError(KafkaError._TRANSPORT)) is None
    assert outcome_of(KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART)) is None


def test_credentials_are_random_owner_only_and_kept(tmp_path: Path) -> None:
    creds = LabCredentials.ensure(tmp_path / "credentials")
    passwords = {u: creds.password(u) for u in USERS}
    assert len(set(passwords.values())) == len(USERS)
    assert all(len(p) >= 24 for p in passwords.values())
    assert stat.S_IMODE(creds.directory.stat().st_mode) == 0o700
    for path in creds.directory.iterdir():
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    # A second `lab up` must not change them: the brokers' config already holds them.
    again = LabCredentials.ensure(tmp_path / "credentials")
    assert {u: again.password(u) for u in USERS} == passwords


def test_broker_is_sasl_everywhere_with_an_authorizer(tmp_path: Path) -> None:
    creds = LabCredentials.ensure(tmp_path / "c")
    props = dict(line.split("=", 1) for line in broker_listener_properties(creds, 100, 101))
    assert "PLAINTEXT://" not in props["listeners"].replace("SASL_PLAINTEXT://", "")
    assert props["listener.security.protocol.map"] == \
        "CONTROLLER:SASL_PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT"
    assert props["allow.everyone.if.no.acl.found"] == "false"
    assert props["super.users"] == "User:admin;User:drctl"
    assert MM2_PRINCIPAL not in props["super.users"]
    accepted = props["listener.name.sasl_plaintext.plain.sasl.jaas.config"]
    assert all(f'user_{u}="{creds.password(u)}"' in accepted for u in USERS)


def test_no_password_reaches_connect_or_drctl_yaml(tmp_path: Path) -> None:
    creds = LabCredentials.ensure(tmp_path / "c")
    secret = creds.password("mirrormaker")
    worker = "\n".join(connect_worker_properties(creds))
    flow = MirrorFlow("primary", "secondary", "p:1", "s:1",
                      source_client=mm2_java_properties(creds),
                      target_client=mm2_java_properties(creds))
    connectors = json.dumps(flow.connectors())
    assert secret not in worker and secret not in connectors
    assert "config.providers.file.class=" in worker
    for prefix in ("", "producer.", "consumer.", "admin."):
        assert f"\n{prefix}sasl.jaas.config=${{file:" in "\n" + worker
    source = flow.source_connector()
    for prefix in ("source.cluster.", "target.cluster.", "producer.override."):
        assert source[f"{prefix}security.protocol"] == "SASL_PLAINTEXT"
        assert source[f"{prefix}sasl.jaas.config"].startswith("${file:")
    assert drctl_client_properties(creds, by_reference=True)["sasl.password"] == \
        f"${{file:{creds.password_file('drctl')}}}"
    assert drctl_client_properties(creds, by_reference=False)["sasl.password"] == \
        creds.password("drctl")


def test_plain_flow_has_no_security_properties() -> None:
    cfg = MirrorFlow("a", "b", "a:1", "b:1").source_connector()
    assert not any("sasl" in k or "security" in k for k in cfg)


def test_mm2_grants_are_allow_only_for_its_principal_and_never_cluster_wide() -> None:
    bindings = mm2_source_acls() + mm2_target_acls("primary", "drctl-lab-connect")
    assert all(b.principal == MM2_PRINCIPAL for b in bindings)
    assert all(b.permission_type == AclPermissionType.ALLOW for b in bindings)
    assert not any(b.operation == AclOperation.ALL for b in bindings)
    assert not any(b.restype == ResourceType.BROKER for b in bindings)
    # On the source MirrorMaker 2 writes only its offset-syncs topic.
    writes = [b for b in mm2_source_acls() if b.operation == AclOperation.WRITE]
    assert [b.name for b in writes] == ["mm2-offset-syncs."]


def test_old_lab_json_loads_as_not_secure(tmp_path: Path) -> None:
    lab = Lab(tmp_path)
    lab.save_state(LabState(LabPorts(1, 3, 5), "4.3.1", "/lib", "maven", True, {"primary": "x"}))
    raw = json.loads(lab.state_file.read_text())
    del raw["secure"]  # written before --secure existed
    lab.state_file.write_text(json.dumps(raw))
    state = lab.load_state()
    assert state.secure is False
    assert lab.client_properties(state, "primary") == {"bootstrap.servers": "127.0.0.1:1"}
