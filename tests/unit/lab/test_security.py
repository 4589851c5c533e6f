"""The lab's secure mode (drctl/lab/security.py): what the brokers, Connect and
MirrorMaker 2 are configured with, and where the passwords live."""

from __future__ import annotations

import json
import stat
from pathlib import Path

from confluent_kafka.admin import AclOperation, AclPermissionType, ResourceType

from drctl.kafka.mm2_connectors import MirrorFlow
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


def test_credentials_are_random_owner_only_and_kept(tmp_path: Path) -> None:
    creds = LabCredentials.ensure(tmp_path / "credentials")
    passwords = {u: creds.password(u) for u in USERS}
    assert len(set(passwords.values())) == len(USERS)
    assert all(len(p) >= 24 for p in passwords.values())
    assert stat.S_IMODE(creds.directory.stat().st_mode) == 0o700
    assert stat.S_IMODE(creds.tls_dir.stat().st_mode) == 0o700
    for path in creds.directory.iterdir():
        if path != creds.tls_dir:
            assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    # Keys and keystores owner-only; certificates readable.
    for path in creds.tls_dir.iterdir():
        public = path.suffix == ".pem" and path != creds.server_keystore
        assert stat.S_IMODE(path.stat().st_mode) == (0o644 if public else 0o600), path
    certificate = creds.ca_file.read_text()
    # A second `lab up` must not change them: the brokers' config already holds them.
    again = LabCredentials.ensure(tmp_path / "credentials")
    assert {u: again.password(u) for u in USERS} == passwords
    assert again.ca_file.read_text() == certificate


def test_lab_certificates_chain_to_its_ca_and_name_the_right_subjects(tmp_path: Path) -> None:
    import ssl
    import subprocess

    creds = LabCredentials.ensure(tmp_path / "c")

    def openssl(*args: str) -> str:
        return subprocess.run(["openssl", *args], capture_output=True, text=True,
                              check=True).stdout

    server = creds.tls_dir / "server.pem"
    for cert in (server, creds.client_cert_file):
        assert "OK" in openssl("verify", "-CAfile", str(creds.ca_file), str(cert))
    assert "IP Address:127.0.0.1" in openssl("x509", "-in", str(server), "-noout", "-text")
    assert "CN=drctl" in openssl("x509", "-in", str(creds.client_cert_file), "-noout",
                                 "-subject").replace(" ", "")
    # PKCS#8, which Java's PEM keystore needs (the gap job maps drctl's key to it).
    assert creds.client_key_file.read_text().startswith("-----BEGIN PRIVATE KEY-----")
    # Python's TLS (drctl's Connect client) takes the CA and the client pair as they are.
    context = ssl.create_default_context(cafile=str(creds.ca_file))
    context.load_cert_chain(str(creds.client_cert_file), str(creds.client_key_file))


def test_broker_is_tls_and_sasl_with_an_authorizer(tmp_path: Path) -> None:
    creds = LabCredentials.ensure(tmp_path / "c")
    props = dict(line.split("=", 1)
                 for line in broker_listener_properties(creds, 100, 101, 102))
    assert props["listeners"] == \
        "SASL_SSL://127.0.0.1:100,SSL://127.0.0.1:102,CONTROLLER://127.0.0.1:101"
    assert props["listener.security.protocol.map"] == \
        "CONTROLLER:SASL_PLAINTEXT,SASL_SSL:SASL_SSL,SSL:SSL"
    assert props["sasl.enabled.mechanisms"] == "SCRAM-SHA-512,PLAIN,OAUTHBEARER"
    assert props["listener.name.ssl.ssl.client.auth"] == "required"
    assert props["ssl.truststore.location"] == str(creds.ca_file)
    assert props["allow.everyone.if.no.acl.found"] == "false"
    assert props["super.users"] == "User:admin;User:drctl"
    assert MM2_PRINCIPAL not in props["super.users"]
    accepted = props["listener.name.sasl_ssl.plain.sasl.jaas.config"]
    assert all(f'user_{u}="{creds.password(u)}"' in accepted for u in USERS)


def test_client_certificate_cn_maps_to_the_drctl_principal(tmp_path: Path) -> None:
    """Kafka's rule syntax, read the way its SslPrincipalMapper reads it."""
    import re

    from drctl.lab.security import PRINCIPAL_MAPPING

    rule, default = PRINCIPAL_MAPPING.split(",")
    pattern, replacement = re.fullmatch(r"RULE:(.*)/(.*)/", rule).groups()  # type: ignore[union-attr]
    assert default == "DEFAULT"
    assert re.sub(pattern, replacement.replace("$1", r"\1"), "CN=drctl") == "drctl"
    assert re.fullmatch(pattern, "CN=drctl,O=other") is None  # anything else: the full DN


def test_no_password_reaches_connect_or_drctl_yaml(tmp_path: Path) -> None:
    creds = LabCredentials.ensure(tmp_path / "c")
    secret = creds.password("mirrormaker")
    worker = "\n".join(connect_worker_properties(creds, 8083))
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
        assert source[f"{prefix}security.protocol"] == "SASL_SSL"
        assert source[f"{prefix}sasl.mechanism"] == "SCRAM-SHA-512"
        assert source[f"{prefix}sasl.jaas.config"].startswith("${file:")
    assert drctl_client_properties(creds, by_reference=True)["sasl.password"] == \
        f"${{file:{creds.password_file('drctl')}}}"
    assert drctl_client_properties(creds, by_reference=False)["sasl.password"] == \
        creds.password("drctl")
    assert "listeners=https://127.0.0.1:8083" in worker
    assert creds.connect_password() not in worker  # the REST users file has it, owner-only


def test_mm2_grants_are_allow_only_for_its_principal_and_never_cluster_wide() -> None:
    bindings = mm2_source_acls() + mm2_target_acls("primary", "drctl-lab-connect")
    assert all(b.principal == MM2_PRINCIPAL for b in bindings)
    assert all(b.permission_type == AclPermissionType.ALLOW for b in bindings)
    assert not any(b.operation == AclOperation.ALL for b in bindings)
    assert not any(b.restype == ResourceType.BROKER for b in bindings)
    # On the source MirrorMaker 2 writes only its offset-syncs topic.
    writes = [b for b in mm2_source_acls() if b.operation == AclOperation.WRITE]
    assert [b.name for b in writes] == ["mm2-offset-syncs."]
