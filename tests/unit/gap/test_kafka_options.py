"""librdkafka settings → the Java client properties of Spark's Kafka source (the gap
job): the exact properties produced for each security setup, and the errors for what has
no mapping (drctl/gap/kafka_options.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from drctl.config import parse_config
from drctl.errors import ConfigError
from drctl.gap.kafka_options import (
    OAUTH_LOGIN_HANDLER,
    gap_job_settings,
    java_client_settings,
)

CERT = "-----BEGIN CERTIFICATE-----\nMIIBclient\n-----END CERTIFICATE-----\n"


CA = "-----BEGIN CERTIFICATE-----\nMIIBca\n-----END CERTIFICATE-----\n"


KEY = "-----BEGIN PRIVATE KEY-----\nMIIEkey\n-----END PRIVATE KEY-----\n"


RSA_KEY = "-----BEGIN RSA PRIVATE KEY-----\nMIIEkey\n-----END RSA PRIVATE KEY-----\n"


B = {"bootstrap.servers": "b:9093"}


def java(props: dict[str, str], overrides: dict[str, str | None] | None = None
         ) -> dict[str, str]:
    return java_client_settings({**B, **props}, "primary", overrides).properties


def problems(props: dict[str, str], overrides: dict[str, str | None] | None = None
             ) -> list[ConfigError]:
    with pytest.raises(ConfigError) as err:
        java_client_settings({**B, **props}, "primary", overrides)
    return list(err.value.problems or (err.value,))


def test_sasl_ssl_scram_with_a_ca_file() -> None:
    got = java({"security.protocol": "sasl_ssl", "sasl.mechanisms": "SCRAM-SHA-512",
                "sasl.username": "u", "sasl.password": 'p"w', "ssl.ca.location": "/ca.pem",
                "debug": "all", "client.rack": "eu-1a"})
    assert got == {
        "bootstrap.servers": "b:9093", "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required '
                            'username="u" password="p\\"w";',
        "ssl.truststore.type": "PEM", "ssl.truststore.location": "/ca.pem",
        "client.rack": "eu-1a"}


def test_sasl_plain() -> None:
    got = java({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                "sasl.username": "u", "sasl.password": "p"})
    assert got["sasl.jaas.config"] == ('org.apache.kafka.common.security.plain.PlainLoginModule'
                                       ' required username="u" password="p";')


def test_spark_options_are_prefixed() -> None:
    settings = java_client_settings(B, "x")
    assert settings.spark_options() == {"kafka.bootstrap.servers": "b:9093"}
    assert settings.warnings == ()


def test_mtls_with_pem_files_goes_inline(tmp_path: Path) -> None:
    (tmp_path / "client.pem").write_text(CERT)
    (tmp_path / "client.key").write_text(KEY)
    got = java({"security.protocol": "SSL", "ssl.ca.location": str(tmp_path / "ca.pem"),
                "ssl.certificate.location": str(tmp_path / "client.pem"),
                "ssl.key.location": str(tmp_path / "client.key"), "ssl.key.password": "kp"})
    assert got == {"bootstrap.servers": "b:9093", "security.protocol": "SSL",
                   "ssl.truststore.type": "PEM", "ssl.truststore.location": str(tmp_path /
                                                                                "ca.pem"),
                   "ssl.keystore.type": "PEM", "ssl.keystore.certificate.chain": CERT,
                   "ssl.keystore.key": KEY, "ssl.key.password": "kp"}


def test_mtls_with_inline_pem() -> None:
    got = java({"security.protocol": "SSL", "ssl.ca.pem": CA, "ssl.certificate.pem": CERT,
                "ssl.key.pem": KEY})
    assert got == {"bootstrap.servers": "b:9093", "security.protocol": "SSL",
                   "ssl.truststore.type": "PEM", "ssl.truststore.certificates": CA,
                   "ssl.keystore.type": "PEM", "ssl.keystore.certificate.chain": CERT,
                   "ssl.keystore.key": KEY}


def test_ca_file_and_inline_ca_are_both_trusted(tmp_path: Path) -> None:
    other = CA.replace("MIIBca", "MIIBother")
    (tmp_path / "ca.pem").write_text(other)
    got = java({"ssl.ca.location": str(tmp_path / "ca.pem"), "ssl.ca.pem": CA})
    assert got["ssl.truststore.certificates"] == other.strip() + "\n" + CA.strip()
    assert "ssl.truststore.location" not in got


def test_ca_probe_means_the_jvm_default_truststore() -> None:
    assert java({"ssl.ca.location": "probe"}) == B


def test_pkcs12_keystore() -> None:
    got = java({"ssl.keystore.location": "/c.p12", "ssl.keystore.password": "s"})
    assert got == {**B, "ssl.keystore.type": "PKCS12", "ssl.keystore.location": "/c.p12",
                   "ssl.keystore.password": "s"}


def test_pem_problems_name_the_property(tmp_path: Path) -> None:
    (tmp_path / "rsa.key").write_text(RSA_KEY)
    (tmp_path / "client.pem").write_text(CERT)
    [pkcs1] = problems({"ssl.certificate.location": str(tmp_path / "client.pem"),
                        "ssl.key.location": str(tmp_path / "rsa.key")})
    assert pkcs1.key == "clusters.primary.ssl.key.location"
    assert "PKCS#8" in pkcs1.reason and "openssl pkcs8 -topk8" in str(pkcs1.hint)
    [unreadable] = problems({"ssl.certificate.location": str(tmp_path / "nope.pem"),
                             "ssl.key.pem": KEY})
    assert unreadable.key == "clusters.primary.ssl.certificate.location"
    assert "cannot read" in unreadable.reason and "nope.pem" in unreadable.reason
    [lone_key] = problems({"ssl.key.pem": KEY})
    assert lone_key.key == "clusters.primary.ssl.key.pem"
    assert "ssl.certificate.location" in str(lone_key.hint)
    [directory] = problems({"ssl.ca.location": str(tmp_path)})
    assert directory.key == "clusters.primary.ssl.ca.location"
    assert "one PEM file" in directory.reason


def test_disabled_verification_skips_the_host_name_check_and_warns() -> None:
    settings = java_client_settings({**B, "enable.ssl.certificate.verification": "false"},
                                    "primary")
    assert settings.properties == {**B, "ssl.endpoint.identification.algorithm": ""}
    [warning] = settings.warnings
    assert warning.startswith("primary: enable.ssl.certificate.verification is false")
    assert "still verifies the broker's certificate chain" in warning
    assert java({"enable.ssl.certificate.verification": "true"}) == B
    assert java({"ssl.endpoint.identification.algorithm": "none"}) == {
        **B, "ssl.endpoint.identification.algorithm": ""}


def test_oauthbearer_oidc() -> None:
    got = java({"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER",
                "sasl.oauthbearer.method": "oidc", "sasl.oauthbearer.client.id": "drctl",
                "sasl.oauthbearer.client.secret": "s3cret",
                "sasl.oauthbearer.token.endpoint.url": "https://idp/token",
                "sasl.oauthbearer.scope": "kafka",
                "sasl.oauthbearer.extensions": "logicalCluster=lkc-1, identityPoolId=pool-2"})
    assert got == {
        **B, "security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER",
        "sasl.login.callback.handler.class":
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
        "sasl.oauthbearer.token.endpoint.url": "https://idp/token",
        "sasl.jaas.config": 'org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule'
                            ' required clientId="drctl" clientSecret="s3cret" scope="kafka" '
                            'extension_logicalCluster="lkc-1" extension_identityPoolId="pool-2";'}
    assert got["sasl.login.callback.handler.class"] == OAUTH_LOGIN_HANDLER
    [missing] = problems({"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER",
                          "sasl.oauthbearer.method": "oidc",
                          "sasl.oauthbearer.client.id": "drctl"})
    assert missing.key == "clusters.primary.sasl.oauthbearer.client.secret"
    assert "sasl.oauthbearer.token.endpoint.url" in missing.reason


def test_oauthbearer_unsecured_jwt() -> None:
    got = java({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
                "enable.sasl.oauthbearer.unsecure.jwt": "true",
                "sasl.oauthbearer.config": "principal=drctl"})
    assert got == {**B, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
                   "sasl.jaas.config": "org.apache.kafka.common.security.oauthbearer."
                                       'OAuthBearerLoginModule required '
                                       'unsecuredLoginStringClaim_sub="drctl";'}
    full = java({"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER",
                 "sasl.oauthbearer.config": "principalClaimName=azp principal=admin "
                                            "scope=read,write lifeSeconds=600 extension_t=1"})
    assert full["sasl.jaas.config"] == (
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
        'unsecuredLoginStringClaim_azp="admin" unsecuredLoginPrincipalClaimName="azp" '
        'unsecuredLoginLifetimeSeconds="600" unsecuredLoginListClaim_scope=",read,write" '
        'extension_t="1";')
    [no_principal] = problems({"security.protocol": "SASL_SSL",
                               "sasl.mechanism": "OAUTHBEARER"})
    assert no_principal.key == "clusters.primary.sasl.oauthbearer.config"


def test_gssapi_with_a_keytab() -> None:
    got = java({"security.protocol": "SASL_SSL", "sasl.mechanisms": "GSSAPI",
                "sasl.kerberos.service.name": "kafka-prod",
                "sasl.kerberos.principal": "drctl@EXAMPLE.COM",
                "sasl.kerberos.keytab": "/etc/drctl.keytab",
                "sasl.kerberos.kinit.cmd": "kinit -k", "ssl.ca.location": "/ca.pem"})
    assert got == {**B, "security.protocol": "SASL_SSL", "sasl.mechanism": "GSSAPI",
                   "sasl.kerberos.service.name": "kafka-prod",
                   "sasl.jaas.config": 'com.sun.security.auth.module.Krb5LoginModule required '
                                       'useKeyTab=true storeKey=true '
                                       'keyTab="/etc/drctl.keytab" '
                                       'principal="drctl@EXAMPLE.COM";',
                   "ssl.truststore.type": "PEM", "ssl.truststore.location": "/ca.pem"}


def test_gssapi_defaults_follow_librdkafka() -> None:
    # No mechanism under SASL is GSSAPI in both clients; librdkafka's service name is kafka.
    got = java({"security.protocol": "SASL_PLAINTEXT"})
    assert got["sasl.mechanism"] == "GSSAPI"
    assert got["sasl.kerberos.service.name"] == "kafka"
    assert got["sasl.jaas.config"] == ("com.sun.security.auth.module.Krb5LoginModule required "
                                       "useTicketCache=true;")


def test_unmapped_mechanism_says_what_to_add() -> None:
    [iam] = problems({"security.protocol": "SASL_SSL", "sasl.mechanism": "AWS_MSK_IAM"})
    assert iam.key == "clusters.primary.sasl.mechanism"
    assert "AWS_MSK_IAM" in iam.reason
    assert "clusters.primary.java" in str(iam.hint) and "IAMLoginModule" in str(iam.hint)
    jaas = "software.amazon.msk.auth.iam.IAMLoginModule required;"
    got = java({"security.protocol": "SASL_SSL", "sasl.mechanism": "AWS_MSK_IAM"},
               {"sasl.jaas.config": jaas})
    assert got == {**B, "security.protocol": "SASL_SSL", "sasl.mechanism": "AWS_MSK_IAM",
                   "sasl.jaas.config": jaas}


def test_every_unmapped_property_is_reported_at_once() -> None:
    found = problems({"ssl.engine.location": "/e.so", "ssl.cipher.suites": "ECDHE-RSA",
                      "sasl.jaas.config": "x"})
    assert sorted(p.key or "" for p in found) == [
        "clusters.primary.sasl.jaas.config", "clusters.primary.ssl.cipher.suites",
        "clusters.primary.ssl.engine.location"]
    assert all("clusters.primary.java" in str(p.hint) for p in found)


def test_java_map_overrides_and_null_leaves_out() -> None:
    got = java({"client.rack": "a", "ssl.engine.location": "/e.so"},
               {"client.rack": "b", "ssl.engine.location": None,
                "ssl.truststore.location": "/t.jks", "client.dns.lookup": None})
    assert got == {**B, "client.rack": "b", "ssl.truststore.location": "/t.jks"}
    assert java({"auto.offset.reset": "earliest"}) == B  # Spark sets it itself
    [owned] = problems({}, {"auto.offset.reset": "earliest"})
    assert owned.key == "clusters.primary.java.auto.offset.reset"


def test_gap_job_settings_checks_the_replicated_clusters() -> None:
    config = parse_config({
        "clusters": {"primary": {"bootstrap.servers": "p:1", "security.protocol": "SASL_SSL",
                                 "sasl.mechanism": "AWS_MSK_IAM"},
                     "secondary": {"bootstrap.servers": "s:1",
                                   "enable.ssl.certificate.verification": "false"},
                     "other": {"bootstrap.servers": "o:1", "sasl.mechanism": "AWS_MSK_IAM",
                               "security.protocol": "SASL_SSL"}},
        "replication": {"kind": "mirrormaker2", "source": "primary", "target": "secondary"}})
    settings, found = gap_job_settings(config)
    assert [p.key for p in found] == ["clusters.primary.sasl.mechanism"]
    assert list(settings) == ["secondary"]
    assert settings["secondary"].warnings[0].startswith("secondary: enable.ssl")
