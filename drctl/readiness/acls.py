"""ACL parity: every principal allowed to write, read or consume the flow's topics and groups
on the source is allowed the same on the target.

MirrorMaker 2 never copies ALLOW WRITE bindings (MirrorSourceConnector.shouldReplicateAcl)
and copies READ ones only while it syncs ACLs: after a failover, producers and consumers that
worked a minute ago are refused. The replicator's own principal is left out (its grants differ
by design: it reads the source and writes the target).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from drctl.findings import Area, Finding, Severity
from drctl.kafka.acls import AclOutcome, AclsUnavailable, authorizer_available, read_acls

# What a client needs after a failover: produce (WRITE), consume (READ on topic and group).
_NEEDED = {AclOperation.WRITE, AclOperation.READ, AclOperation.ALL}


@dataclass(frozen=True)
class Grant:
    """One ALLOW binding, in plain values (comparable, printable)."""

    principal: str
    host: str
    operation: str  # WRITE, READ, ALL
    resource: str  # TOPIC, GROUP
    pattern: str  # LITERAL, PREFIXED
    name: str

    @classmethod
    def of(cls, b: AclBinding) -> Grant:
        return cls(b.principal, b.host, _name(b.operation), _name(b.restype),
                   _name(b.resource_pattern_type), b.name)

    def covers(self, wanted: Grant) -> bool:
        """Whether this grant allows what `wanted` allows (Kafka's matching: a wildcard
        principal or host, ALL for any operation, `*` or a shorter prefix for the name)."""
        if self.resource != wanted.resource:
            return False
        if self.principal not in (wanted.principal, "User:*"):
            return False
        if self.host not in (wanted.host, "*"):
            return False
        if self.operation not in (wanted.operation, "ALL"):
            return False
        if self.pattern == "LITERAL" and self.name == "*":
            return True
        if self.pattern == "PREFIXED":
            return wanted.name.startswith(self.name)
        return wanted.pattern == "LITERAL" and self.name == wanted.name

    def describe(self) -> str:
        pattern = " (prefixed)" if self.pattern == "PREFIXED" else ""
        host = "" if self.host == "*" else f" from {self.host}"
        return (f"{self.principal} {self.operation} on {self.resource.lower()} "
                f"{self.name}{pattern}{host}")

    def add_command(self, bootstrap: str) -> str:
        pattern = " --resource-pattern-type prefixed" if self.pattern == "PREFIXED" else ""
        host = "" if self.host == "*" else f" --allow-host {self.host}"
        return (f"kafka-acls.sh --bootstrap-server {bootstrap} --add --allow-principal "
                f"{self.principal}{host} --operation {self.operation.capitalize()} "
                f"--{self.resource.lower()} '{self.name}'{pattern}")


def _name(value: object) -> str:
    """An enum's name (confluent-kafka also types these fields as str or int)."""
    return str(getattr(value, "name", value)).upper()


def relevant(grants: Iterable[Grant], topic_in_scope: Callable[[str], bool],
             group_in_scope: Callable[[str], bool], topics: Sequence[str],
             skip_principal: str | None) -> list[Grant]:
    """The source's grants that clients of the flow's topics and groups depend on."""
    out = []
    for g in grants:
        if g.principal == skip_principal or g.operation not in {o.name for o in _NEEDED}:
            continue
        if g.resource == "TOPIC":
            if g.pattern == "PREFIXED":
                hit = any(t.startswith(g.name) for t in topics)
            else:
                hit = g.name == "*" or topic_in_scope(g.name)
        elif g.resource == "GROUP":
            hit = g.pattern == "PREFIXED" or g.name == "*" or group_in_scope(g.name)
        else:
            hit = False
        if hit:
            out.append(g)
    return sorted(set(out), key=lambda g: (g.resource, g.name, g.principal, g.operation))


def missing_on_target(needed: Iterable[Grant], target: Sequence[Grant]) -> list[Grant]:
    """Those of `needed` no target grant covers."""
    return [g for g in needed if not any(t.covers(g) for t in target)]


def allow_grants(admin: AdminClient, timeout_s: float = 30.0) -> list[Grant]:
    """Every ALLOW binding of the cluster (AclsUnavailable when drctl may not read them)."""
    return [Grant.of(b) for b in read_acls(admin, AclBindingFilter(
        ResourceType.ANY, None, ResourcePatternType.ANY, None, None,  # type: ignore[arg-type]
        AclOperation.ANY, AclPermissionType.ALLOW), timeout_s=timeout_s)]


def acl_parity(source_name: str, target_name: str, source: AdminClient, target: AdminClient,
               target_bootstrap: str, topic_in_scope: Callable[[str], bool],
               group_in_scope: Callable[[str], bool], topics: Sequence[str],
               skip_principal: str | None) -> tuple[list[Finding], int]:
    """Findings, and how many source grants were compared."""
    secured = {source_name: authorizer_available(source),
               target_name: authorizer_available(target)}
    if not any(secured.values()):
        return [Finding(Area.ACLS, "ACLs", "no authorizer on either cluster",
                        "none: every client may do everything on both", "nothing to do",
                        Severity.NOTE)], 0
    if not secured[target_name]:
        return [Finding(Area.ACLS, f"cluster {target_name}",
                        f"no authorizer on {target_name}; {source_name} has one",
                        "after a failover every client may write every topic",
                        f"enable an authorizer on {target_name} with {source_name}'s ACLs")], 0
    if not secured[source_name]:
        return [Finding(Area.ACLS, f"cluster {source_name}",
                        f"no authorizer on {source_name}; {target_name} has one",
                        "clients that never needed ACLs are refused after a failover",
                        f"grant the flow's clients their ACLs on {target_name}")], 0
    grants: dict[str, list[Grant]] = {}
    findings: list[Finding] = []
    for name, admin in ((source_name, source), (target_name, target)):
        try:
            grants[name] = allow_grants(admin)
        except AclsUnavailable as exc:
            if exc.outcome != AclOutcome.DENIED:
                raise
            findings.append(Finding(
                Area.ACLS, f"cluster {name}", f"drctl cannot see its ACLs ({exc.message})",
                "ACL parity is unknown: clients may be refused after a failover",
                "grant drctl's principal DESCRIBE on the cluster resource"))
    if findings:
        return findings, 0
    needed = relevant(grants[source_name], topic_in_scope, group_in_scope, topics,
                      skip_principal)
    for g in missing_on_target(needed, grants[target_name]):
        findings.append(Finding(
            Area.ACLS, g.describe(), f"allowed on {source_name}, not on {target_name}",
            f"after a failover {g.principal} is refused "
            f"({'producing' if g.operation == 'WRITE' else 'consuming'} fails)",
            g.add_command(target_bootstrap)))
    return findings, len(needed)
