"""The lab's secure mode (`drctl lab up --secure`): TLS from a CA the lab generates, SASL and
client certificates, KRaft's StandardAuthorizer with no access unless an ACL grants it, and
three principals:

- `admin`: the brokers themselves (inter-broker and broker-to-controller), a super user;
- `drctl`: drctl's own principal, a super user (it creates topics, commits any group, and
  fences replication with ACLs) — by SCRAM-SHA-512, PLAIN, an unsecured OAUTHBEARER token or
  its client certificate (CN=drctl);
- `mirrormaker`: MirrorMaker 2 and its Connect worker (SCRAM-SHA-512), NOT a super user: it
  gets exactly the ACLs in `mm2_source_acls`/`mm2_target_acls`, so a DENY binding (the
  replication fence) can stop it.

Each broker has a SASL_SSL listener (SCRAM-SHA-512, PLAIN, OAUTHBEARER), an SSL listener that
requires a client certificate (mTLS, on the broker's port + 2), and a SASL/PLAIN controller
listener on loopback (PLAIN: the controller authenticates before the metadata log holding SCRAM
credentials is read). The Connect worker's REST API is HTTPS with basic auth.

Passwords are random, one owner-only file per user under the lab's `credentials/`; keys and
certificates are PEM files under `credentials/tls/` (keys owner-only). drctl.yaml refers to
drctl's password by `${file:...}` and Connect reads MirrorMaker 2's JAAS line through Kafka's
FileConfigProvider, so no password is written into a connector config or printed.
"""

from __future__ import annotations

import os
import secrets
import subprocess
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from drctl.errors import LabError

BROKER_USER = "admin"
DRCTL_USER = "drctl"
MM2_USER = "mirrormaker"
USERS = (BROKER_USER, DRCTL_USER, MM2_USER)
SCRAM_USERS = (DRCTL_USER, MM2_USER)
MM2_PRINCIPAL = f"User:{MM2_USER}"
SUPER_USERS = (f"User:{BROKER_USER}", f"User:{DRCTL_USER}")
# The Connect REST API's basic-auth user (a password of its own, not drctl's Kafka one).
CONNECT_REST_USER = DRCTL_USER

SECURITY_PROTOCOL = "SASL_SSL"
MTLS_PROTOCOL = "SSL"
CONTROLLER_PROTOCOL = "SASL_PLAINTEXT"
SCRAM = "SCRAM-SHA-512"
PLAIN = "PLAIN"
OAUTHBEARER = "OAUTHBEARER"
MECHANISMS = (SCRAM, PLAIN, OAUTHBEARER)
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
_PLAIN_LOGIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
_SCRAM_LOGIN = "org.apache.kafka.common.security.scram.ScramLoginModule"
_OAUTH_LOGIN = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
# Kafka's unsecured-JWT validator: accepts any unsigned token (test clusters only).
_OAUTH_UNSECURED_VALIDATOR = ("org.apache.kafka.common.security.oauthbearer.internals."
                              "unsecured.OAuthBearerUnsecuredValidatorCallbackHandler")
_BASIC_AUTH_EXTENSION = ("org.apache.kafka.connect.rest.basic.auth.extension."
                         "BasicAuthSecurityRestExtension")
_BASIC_AUTH_LOGIN = ("org.apache.kafka.connect.rest.basic.auth.extension."
                     "PropertyFileLoginModule")
# A client certificate's subject CN=<name> is the principal User:<name>.
PRINCIPAL_MAPPING = "RULE:^CN=([a-zA-Z0-9._-]+)$/$1/,DEFAULT"
# The key Connect's FileConfigProvider looks up in MirrorMaker 2's properties file.
_JAAS_KEY = "sasl.jaas.config"
CLUSTER_RESOURCE = "kafka-cluster"
_CERT_DAYS = "825"


def write_private(path: Path, text: str) -> None:
    """Write `text` to a file only its owner can read (created so from the start)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(text)
    path.chmod(0o600)


@dataclass(frozen=True)
class LabCredentials:
    """The lab's users, passwords, CA, keys and certificates, kept in `directory`
    (owner-only)."""

    directory: Path

    @classmethod
    def ensure(cls, directory: Path) -> LabCredentials:
        """The credentials in `directory`, generating what is missing (a password for every
        user lacking one, the CA and the certificates it signs)."""
        directory.mkdir(parents=True, exist_ok=True)
        directory.chmod(0o700)
        creds = cls(directory)
        for file in (*(creds.password_file(u) for u in USERS), creds.connect_password_file,
                     creds.keystore_password_file):
            if not file.exists():
                write_private(file, secrets.token_urlsafe(24) + "\n")
        write_private(creds.mm2_properties_file, f"{_JAAS_KEY}={creds.jaas(MM2_USER)}\n")
        write_private(creds.connect_users_file,
                      f"{CONNECT_REST_USER}={creds.connect_password()}\n")
        write_private(creds.connect_jaas_file,
                      f'KafkaConnect {{\n  {_BASIC_AUTH_LOGIN} required\n'
                      f'  file="{creds.connect_users_file}";\n}};\n')
        creds._ensure_tls()
        return creds

    def password_file(self, user: str) -> Path:
        return self.directory / f"{user}.password"

    def password(self, user: str) -> str:
        return _read(self.password_file(user))

    @property
    def mm2_properties_file(self) -> Path:
        return self.directory / "mirrormaker.properties"

    @property
    def connect_password_file(self) -> Path:
        return self.directory / "connect-rest.password"

    def connect_password(self) -> str:
        return _read(self.connect_password_file)

    @property
    def connect_users_file(self) -> Path:
        return self.directory / "connect-rest-users.properties"

    @property
    def connect_jaas_file(self) -> Path:
        return self.directory / "connect-rest.jaas"

    @property
    def keystore_password_file(self) -> Path:
        return self.directory / "connect-keystore.password"

    # TLS: one CA, one server certificate (brokers and Connect, localhost and 127.0.0.1), and
    # drctl's client certificate.

    @property
    def tls_dir(self) -> Path:
        return self.directory / "tls"

    @property
    def ca_file(self) -> Path:
        return self.tls_dir / "ca.pem"

    @property
    def server_keystore(self) -> Path:
        """The brokers' PEM keystore: key and certificate in one file (owner-only)."""
        return self.tls_dir / "server-keystore.pem"

    @property
    def connect_keystore(self) -> Path:
        """The Connect worker's PKCS#12 keystore (Jetty reads no PEM)."""
        return self.tls_dir / "connect.p12"

    @property
    def client_cert_file(self) -> Path:
        return self.tls_dir / f"{DRCTL_USER}.pem"

    @property
    def client_key_file(self) -> Path:
        return self.tls_dir / f"{DRCTL_USER}.key"

    def _ensure_tls(self) -> None:
        tls = self.tls_dir
        tls.mkdir(exist_ok=True)
        tls.chmod(0o700)
        ca_key = tls / "ca.key"
        if not self.ca_file.exists():
            _openssl(tls, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", ca_key,
                     "-out", self.ca_file, "-days", _CERT_DAYS, "-subj", "/CN=drctl lab CA",
                     "-addext", "basicConstraints=critical,CA:TRUE",
                     "-addext", "keyUsage=critical,keyCertSign,cRLSign")
        server_key, server_cert = tls / "server.key", tls / "server.pem"
        if not server_cert.exists():
            self._sign(ca_key, server_key, server_cert, "localhost",
                       "subjectAltName=DNS:localhost,IP:127.0.0.1\n"
                       "extendedKeyUsage=serverAuth,clientAuth\n")
        if not self.client_cert_file.exists():
            self._sign(ca_key, self.client_key_file, self.client_cert_file, DRCTL_USER,
                       "extendedKeyUsage=clientAuth\n")
        if not self.server_keystore.exists():
            write_private(self.server_keystore,
                          server_key.read_text() + server_cert.read_text())
        if not self.connect_keystore.exists():
            _openssl(tls, "pkcs12", "-export", "-in", server_cert, "-inkey", server_key,
                     "-name", "connect", "-out", self.connect_keystore,
                     "-passout", f"file:{self.keystore_password_file}")
        for path in tls.iterdir():
            # Keys (and keystores holding them) owner-only; certificates may be read.
            path.chmod(0o644 if path.suffix == ".pem" and path != self.server_keystore
                       else 0o600)

    def _sign(self, ca_key: Path, key: Path, cert: Path, name: str, extensions: str) -> None:
        """A new PKCS#8 key (both Java and librdkafka read it) and its certificate for
        subject CN=`name`, signed by the lab's CA."""
        tls = self.tls_dir
        csr, ext = tls / f"{name}.csr", tls / f"{name}.ext"
        ext.write_text("basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,"
                       "keyEncipherment\nsubjectKeyIdentifier=hash\n"
                       "authorityKeyIdentifier=keyid,issuer\n" + extensions)
        _openssl(tls, "req", "-new", "-newkey", "rsa:2048", "-nodes", "-keyout", key,
                 "-out", csr, "-subj", f"/CN={name}")
        _openssl(tls, "x509", "-req", "-in", csr, "-CA", self.ca_file, "-CAkey", ca_key,
                 "-set_serial", f"0x{secrets.token_hex(8)}", "-days", _CERT_DAYS,
                 "-out", cert, "-extfile", ext)
        csr.unlink()
        ext.unlink()

    def jaas(self, user: str) -> str:
        """`user`'s SCRAM login (MirrorMaker 2's, for the Java clients of Connect)."""
        return f'{_SCRAM_LOGIN} required username="{user}" password="{self.password(user)}";'

    def broker_jaas(self, users: tuple[str, ...]) -> str:
        """The broker's PLAIN side: its own login (admin) plus the users it accepts."""
        accepted = " ".join(f'user_{u}="{self.password(u)}"' for u in users)
        return (f'{_PLAIN_LOGIN} required username="{BROKER_USER}" '
                f'password="{self.password(BROKER_USER)}" {accepted};')


def _openssl(cwd: Path, *args: str | Path) -> None:
    try:
        done = subprocess.run(["openssl", *map(str, args)], cwd=cwd, capture_output=True,
                              text=True, timeout=60, check=False)
    except FileNotFoundError:
        raise LabError("openssl was not found; the secure lab makes its certificates with it.",
                       "Install OpenSSL (e.g. `apt-get install openssl`).") from None
    if done.returncode != 0:
        raise LabError(f"openssl {args[0]} failed making the lab's certificates: "
                       f"{done.stderr.strip()[-500:]}", f"Look into {cwd}.")


def broker_listener_properties(creds: LabCredentials, port: int, controller_port: int,
                               mtls_port: int) -> list[str]:
    """server.properties lines for the TLS and SASL listeners and the authorizer.

    The controller listener is SASL too, so the broker registers as `admin` (a super user)
    rather than as the ANONYMOUS principal a PLAINTEXT listener would give it.
    """
    sasl = f"listener.name.{SECURITY_PROTOCOL.lower()}"
    return [
        f"listeners={SECURITY_PROTOCOL}://127.0.0.1:{port},"
        f"{MTLS_PROTOCOL}://127.0.0.1:{mtls_port},CONTROLLER://127.0.0.1:{controller_port}",
        f"advertised.listeners={SECURITY_PROTOCOL}://127.0.0.1:{port},"
        f"{MTLS_PROTOCOL}://127.0.0.1:{mtls_port}",
        "controller.listener.names=CONTROLLER",
        f"inter.broker.listener.name={SECURITY_PROTOCOL}",
        f"listener.security.protocol.map=CONTROLLER:{CONTROLLER_PROTOCOL},"
        f"{SECURITY_PROTOCOL}:{SECURITY_PROTOCOL},{MTLS_PROTOCOL}:{MTLS_PROTOCOL}",
        f"sasl.enabled.mechanisms={','.join(MECHANISMS)}",
        f"listener.name.controller.sasl.enabled.mechanisms={PLAIN}",
        f"sasl.mechanism.inter.broker.protocol={PLAIN}",
        f"sasl.mechanism.controller.protocol={PLAIN}",
        f"{sasl}.plain.sasl.jaas.config={creds.broker_jaas(USERS)}",
        f"{sasl}.scram-sha-512.sasl.jaas.config={_SCRAM_LOGIN} required;",
        f'{sasl}.oauthbearer.sasl.jaas.config={_OAUTH_LOGIN} required '
        f'unsecuredLoginStringClaim_sub="{BROKER_USER}";',
        f"{sasl}.oauthbearer.sasl.server.callback.handler.class={_OAUTH_UNSECURED_VALIDATOR}",
        f"listener.name.controller.plain.sasl.jaas.config={creds.broker_jaas((BROKER_USER,))}",
        "ssl.keystore.type=PEM",
        f"ssl.keystore.location={creds.server_keystore}",
        "ssl.truststore.type=PEM",
        f"ssl.truststore.location={creds.ca_file}",
        f"listener.name.{MTLS_PROTOCOL.lower()}.ssl.client.auth=required",
        f"ssl.principal.mapping.rules={PRINCIPAL_MAPPING}",
        f"authorizer.class.name={AUTHORIZER}",
        "allow.everyone.if.no.acl.found=false",
        f"super.users={';'.join(SUPER_USERS)}",
    ]


def create_scram_users(admin: AdminClient, creds: LabCredentials) -> None:
    """SCRAM-SHA-512 credentials for drctl and MirrorMaker 2 (an upsert: idempotent)."""
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192)
    futures = admin.alter_user_scram_credentials([
        UserScramCredentialUpsertion(user, info, creds.password(user).encode())
        for user in SCRAM_USERS])
    for future in futures.values():
        future.result()


def drctl_client_properties(creds: LabCredentials, *, by_reference: bool,
                            mechanism: str = SCRAM) -> dict[str, str]:
    """librdkafka properties for drctl's principal over SASL_SSL; `by_reference` writes the
    password as a `${file:...}` reference (for drctl.yaml) instead of its value (for the lab's
    own clients, which log in with PLAIN: it works before the SCRAM users exist)."""
    password = (f"${{file:{creds.password_file(DRCTL_USER)}}}" if by_reference
                else creds.password(DRCTL_USER))
    return {"security.protocol": SECURITY_PROTOCOL, "sasl.mechanism": mechanism,
            "sasl.username": DRCTL_USER, "sasl.password": password,
            "ssl.ca.location": str(creds.ca_file)}


def drctl_mtls_properties(creds: LabCredentials) -> dict[str, str]:
    """librdkafka properties for drctl's client certificate (the listener on port + 2)."""
    return {"security.protocol": MTLS_PROTOCOL, "ssl.ca.location": str(creds.ca_file),
            "ssl.certificate.location": str(creds.client_cert_file),
            "ssl.key.location": str(creds.client_key_file)}


def drctl_oauthbearer_properties(creds: LabCredentials) -> dict[str, str]:
    """librdkafka properties for an unsecured OAUTHBEARER token naming drctl."""
    return {"security.protocol": SECURITY_PROTOCOL, "sasl.mechanism": OAUTHBEARER,
            "enable.sasl.oauthbearer.unsecure.jwt": "true",
            "sasl.oauthbearer.config": f"principal={DRCTL_USER}",
            "ssl.ca.location": str(creds.ca_file)}


def mm2_java_properties(creds: LabCredentials) -> dict[str, str]:
    """Java client properties for MirrorMaker 2's principal; the JAAS line is resolved by the
    Connect worker's FileConfigProvider (`config.providers=file`), never stored in Connect."""
    return {"security.protocol": SECURITY_PROTOCOL, "sasl.mechanism": SCRAM,
            _JAAS_KEY: f"${{file:{creds.mm2_properties_file}:{_JAAS_KEY}}}",
            "ssl.truststore.type": "PEM", "ssl.truststore.location": str(creds.ca_file)}


def connect_worker_properties(creds: LabCredentials, rest_port: int) -> list[str]:
    """worker.properties lines: the REST API over HTTPS with basic auth; the worker and its
    producers, consumers and admin clients connect as MirrorMaker 2's principal. Holds the
    keystore password: write it owner-only."""
    lines = ["config.providers=file",
             "config.providers.file.class="
             "org.apache.kafka.common.config.provider.FileConfigProvider",
             f"listeners=https://127.0.0.1:{rest_port}",
             "rest.advertised.listener=https",
             "listeners.https.ssl.keystore.type=PKCS12",
             f"listeners.https.ssl.keystore.location={creds.connect_keystore}",
             f"listeners.https.ssl.keystore.password={_read(creds.keystore_password_file)}",
             f"listeners.https.ssl.key.password={_read(creds.keystore_password_file)}",
             f"rest.extension.classes={_BASIC_AUTH_EXTENSION}"]
    for prefix in ("", "producer.", "consumer.", "admin."):
        lines += [f"{prefix}{k}={v}" for k, v in mm2_java_properties(creds).items()]
    return lines


def connect_jvm_options(creds: LabCredentials) -> list[str]:
    """The basic-auth extension reads its users through the JVM's JAAS configuration."""
    return [f"-Djava.security.auth.login.config={creds.connect_jaas_file}"]


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8").strip()


def _allow(restype: ResourceType, name: str, pattern: ResourcePatternType,
           operation: AclOperation) -> AclBinding:
    return AclBinding(restype, name, pattern, MM2_PRINCIPAL, "*", operation,
                      AclPermissionType.ALLOW)


def mm2_source_acls() -> list[AclBinding]:
    """What MirrorMaker 2 needs on the cluster it copies from: read and describe every topic
    and its configs, list and read groups' offsets (checkpoints), and keep its offset-syncs
    topic there."""
    literal, prefixed = ResourcePatternType.LITERAL, ResourcePatternType.PREFIXED
    return [
        *(_allow(ResourceType.TOPIC, "*", literal, op)
          for op in (AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DESCRIBE_CONFIGS)),
        *(_allow(ResourceType.TOPIC, "mm2-offset-syncs.", prefixed, op)
          for op in (AclOperation.CREATE, AclOperation.WRITE)),
        _allow(ResourceType.GROUP, "*", literal, AclOperation.DESCRIBE),
    ]


def mm2_target_acls(source_alias: str, connect_group: str) -> list[AclBinding]:
    """What MirrorMaker 2 and its Connect worker need on the cluster they write to: create,
    write and configure mirror topics (any name: with names kept they are the source's), the
    heartbeats and checkpoints topics, read Connect's internal topics and the checkpoints it
    wrote before, and join the worker's group."""
    literal, prefixed = ResourcePatternType.LITERAL, ResourcePatternType.PREFIXED
    return [
        *(_allow(ResourceType.TOPIC, "*", literal, op)
          for op in (AclOperation.CREATE, AclOperation.WRITE, AclOperation.DESCRIBE,
                     AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS,
                     AclOperation.ALTER)),
        _allow(ResourceType.TOPIC, "connect-", prefixed, AclOperation.READ),
        _allow(ResourceType.TOPIC, f"{source_alias}.checkpoints.internal", literal,
               AclOperation.READ),
        _allow(ResourceType.GROUP, connect_group, literal, AclOperation.READ),
    ]
