"""The lab's secure mode (`drctl lab up --secure`): SASL/PLAIN on every listener, KRaft's
StandardAuthorizer with no access unless an ACL grants it, and three principals:

- `admin`: the brokers themselves (inter-broker and broker-to-controller), a super user;
- `drctl`: drctl's own principal, a super user (it creates topics, commits any group, and
  fences replication with ACLs);
- `mirrormaker`: MirrorMaker 2 and its Connect worker, NOT a super user: it gets exactly the
  ACLs in `mm2_source_acls`/`mm2_target_acls`, so a DENY binding (the replication fence) can
  stop it.

Passwords are random, one owner-only file per user under the lab's `credentials/`; drctl.yaml
refers to drctl's by `${file:...}` and Connect reads MirrorMaker 2's JAAS line through Kafka's
FileConfigProvider, so no password is written into a connector config or printed.
"""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    ResourcePatternType,
    ResourceType,
)

BROKER_USER = "admin"
DRCTL_USER = "drctl"
MM2_USER = "mirrormaker"
USERS = (BROKER_USER, DRCTL_USER, MM2_USER)
MM2_PRINCIPAL = f"User:{MM2_USER}"
SUPER_USERS = (f"User:{BROKER_USER}", f"User:{DRCTL_USER}")

SECURITY_PROTOCOL = "SASL_PLAINTEXT"
MECHANISM = "PLAIN"
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
_PLAIN_LOGIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
# The key Connect's FileConfigProvider looks up in MirrorMaker 2's properties file.
_JAAS_KEY = "sasl.jaas.config"
CLUSTER_RESOURCE = "kafka-cluster"


def write_private(path: Path, text: str) -> None:
    """Write `text` to a file only its owner can read (created so from the start)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(text)
    path.chmod(0o600)


@dataclass(frozen=True)
class LabCredentials:
    """The lab's users and their passwords, kept in `directory` (owner-only)."""

    directory: Path

    @classmethod
    def ensure(cls, directory: Path) -> LabCredentials:
        """The credentials in `directory`, generating a password for every user lacking one."""
        directory.mkdir(parents=True, exist_ok=True)
        directory.chmod(0o700)
        creds = cls(directory)
        for user in USERS:
            if not creds.password_file(user).exists():
                write_private(creds.password_file(user), secrets.token_urlsafe(24) + "\n")
        write_private(creds.mm2_properties_file, f"{_JAAS_KEY}={creds.jaas(MM2_USER)}\n")
        return creds

    def password_file(self, user: str) -> Path:
        return self.directory / f"{user}.password"

    def password(self, user: str) -> str:
        return self.password_file(user).read_text(encoding="utf-8").strip()

    @property
    def mm2_properties_file(self) -> Path:
        return self.directory / "mirrormaker.properties"

    def jaas(self, user: str) -> str:
        return f'{_PLAIN_LOGIN} required username="{user}" password="{self.password(user)}";'

    def broker_jaas(self, users: tuple[str, ...]) -> str:
        """The broker's side: its own login (admin) plus the users it accepts."""
        accepted = " ".join(f'user_{u}="{self.password(u)}"' for u in users)
        return (f'{_PLAIN_LOGIN} required username="{BROKER_USER}" '
                f'password="{self.password(BROKER_USER)}" {accepted};')


def broker_listener_properties(creds: LabCredentials, port: int, controller_port: int) -> list[str]:
    """server.properties lines for SASL/PLAIN listeners and the authorizer.

    The controller listener is SASL too, so the broker registers as `admin` (a super user)
    rather than as the ANONYMOUS principal a PLAINTEXT listener would give it.
    """
    return [
        f"listeners={SECURITY_PROTOCOL}://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
        f"advertised.listeners={SECURITY_PROTOCOL}://127.0.0.1:{port}",
        "controller.listener.names=CONTROLLER",
        f"inter.broker.listener.name={SECURITY_PROTOCOL}",
        f"listener.security.protocol.map=CONTROLLER:{SECURITY_PROTOCOL},"
        f"{SECURITY_PROTOCOL}:{SECURITY_PROTOCOL}",
        f"sasl.enabled.mechanisms={MECHANISM}",
        f"sasl.mechanism.inter.broker.protocol={MECHANISM}",
        f"sasl.mechanism.controller.protocol={MECHANISM}",
        f"listener.name.{SECURITY_PROTOCOL.lower()}.{MECHANISM.lower()}.sasl.jaas.config="
        f"{creds.broker_jaas(USERS)}",
        f"listener.name.controller.{MECHANISM.lower()}.sasl.jaas.config="
        f"{creds.broker_jaas((BROKER_USER,))}",
        f"authorizer.class.name={AUTHORIZER}",
        "allow.everyone.if.no.acl.found=false",
        f"super.users={';'.join(SUPER_USERS)}",
    ]


def drctl_client_properties(creds: LabCredentials, *, by_reference: bool) -> dict[str, str]:
    """librdkafka properties for drctl's principal; `by_reference` writes the password as a
    `${file:...}` reference (for drctl.yaml) instead of its value (for the lab's own clients)."""
    password = (f"${{file:{creds.password_file(DRCTL_USER)}}}" if by_reference
                else creds.password(DRCTL_USER))
    return {"security.protocol": SECURITY_PROTOCOL, "sasl.mechanism": MECHANISM,
            "sasl.username": DRCTL_USER, "sasl.password": password}


def mm2_java_properties(creds: LabCredentials) -> dict[str, str]:
    """Java client properties for MirrorMaker 2's principal; the JAAS line is resolved by the
    Connect worker's FileConfigProvider (`config.providers=file`), never stored in Connect."""
    return {"security.protocol": SECURITY_PROTOCOL, "sasl.mechanism": MECHANISM,
            _JAAS_KEY: f"${{file:{creds.mm2_properties_file}:{_JAAS_KEY}}}"}


def connect_worker_properties(creds: LabCredentials) -> list[str]:
    """worker.properties lines: the worker and its producers, consumers and admin clients
    connect as MirrorMaker 2's principal."""
    lines = ["config.providers=file",
             "config.providers.file.class="
             "org.apache.kafka.common.config.provider.FileConfigProvider"]
    for prefix in ("", "producer.", "consumer.", "admin."):
        lines += [f"{prefix}{k}={v}" for k, v in mm2_java_properties(creds).items()]
    return lines


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
