"""ACL parity: every principal allowed to write, read or consume the flow's topics and groups,
or to use a transactional id, on the source is allowed the same on the target — and no DENY
on the target refuses it.

MirrorMaker 2 never copies ALLOW WRITE bindings (MirrorSourceConnector.shouldReplicateAcl),
copies READ ones only while it syncs ACLs, and never copies DENY bindings or transactional-id
grants: after a failover, producers and consumers that worked a minute ago are refused. The
replicator's own principal is left out (its grants differ by design: it reads the source and
writes the target; DENY bindings on it are drctl's replication fence).

Topic grants are compared per topic in scope, under its names on the target: the failover
topic (where producers write and consumers read after a failover) and, with prefixed names,
the mirror topic, which translated groups commit on and consumers read to its end (READ). So
a prefixed source grant is satisfied by target grants that cover each of its topics, literal
or not. Group and transactional-id names are the same on both sides and compare as patterns.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from drctl.errors import Unreachable
from drctl.findings import Area, Finding, Severity
from drctl.kafka.acls import AclOutcome, AclsUnavailable, authorizer_available, read_acls

T = TypeVar("T")

# What a client needs after a failover: produce (WRITE), consume (READ on topic and group),
# and for a transactional producer WRITE on its transactional id.
_NEEDED = {AclOperation.WRITE.name, AclOperation.READ.name, AclOperation.ALL.name}
# A DENY of any of these refuses a grant of the operation (DESCRIBE: the topic is invisible).
_BLOCKING = {"ALL", "DESCRIBE"}


@dataclass(frozen=True)
class Grant:
    """One binding, in plain values (comparable, printable)."""

    principal: str
    host: str
    operation: str  # WRITE, READ, ALL, DESCRIBE, ...
    resource: str  # TOPIC, GROUP, TRANSACTIONAL_ID
    pattern: str  # LITERAL, PREFIXED
    name: str
    permission: str = "ALLOW"  # or DENY

    @classmethod
    def of(cls, b: AclBinding) -> Grant:
        return cls(b.principal, b.host, _name(b.operation), _name(b.restype),
                   _name(b.resource_pattern_type), b.name, _name(b.permission_type))

    def matches_name(self, name: str) -> bool:
        """Whether this binding's resource pattern covers the resource `name`."""
        if self.pattern == "LITERAL":
            return self.name in (name, "*")
        return self.pattern == "PREFIXED" and name.startswith(self.name)

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

    def blocks(self, wanted: Grant) -> bool:
        """Whether this DENY refuses any of what `wanted` allows: a DENY wins over every
        ALLOW, for any principal, host or resource the two have in common."""
        if self.resource != wanted.resource:
            return False
        if "User:*" not in (self.principal, wanted.principal) \
                and self.principal != wanted.principal:
            return False
        if "*" not in (self.host, wanted.host) and self.host != wanted.host:
            return False
        if wanted.operation != "ALL" and self.operation not in {wanted.operation, *_BLOCKING}:
            return False
        return _overlap(self, wanted)

    def describe(self) -> str:
        pattern = " (prefixed)" if self.pattern == "PREFIXED" else ""
        host = "" if self.host == "*" else f" from {self.host}"
        deny = "DENY " if self.permission == "DENY" else ""
        return (f"{self.principal} {deny}{self.operation} on {self.resource.lower()} "
                f"{self.name}{pattern}{host}")

    def add_command(self, bootstrap: str) -> str:
        return f"kafka-acls.sh --bootstrap-server {bootstrap} --add {self._arguments()}"

    def remove_command(self, bootstrap: str) -> str:
        return f"kafka-acls.sh --bootstrap-server {bootstrap} --remove {self._arguments()}"

    def _arguments(self) -> str:
        side = "deny" if self.permission == "DENY" else "allow"
        pattern = " --resource-pattern-type prefixed" if self.pattern == "PREFIXED" else ""
        host = "" if self.host == "*" else f" --{side}-host {self.host}"
        resource = {"TRANSACTIONAL_ID": "transactional-id"}.get(self.resource,
                                                                 self.resource.lower())
        return (f"--{side}-principal {self.principal}{host} --operation "
                f"{self.operation.capitalize()} --{resource} '{self.name}'{pattern}")


def _name(value: object) -> str:
    """An enum's name (confluent-kafka also types these fields as str or int)."""
    return str(getattr(value, "name", value)).upper()


def _overlap(a: Grant, b: Grant) -> bool:
    """Whether two resource patterns have a name in common."""
    if any(g.pattern == "LITERAL" and g.name == "*" for g in (a, b)):
        return True
    if a.pattern == "LITERAL" and b.pattern == "LITERAL":
        return a.name == b.name
    if a.pattern == "PREFIXED" and b.pattern == "PREFIXED":
        return a.name.startswith(b.name) or b.name.startswith(a.name)
    prefix, literal = (a, b) if a.pattern == "PREFIXED" else (b, a)
    return literal.name.startswith(prefix.name)


def relevant(grants: Iterable[Grant], topic_in_scope: Callable[[str], bool],
             group_in_scope: Callable[[str], bool], topics: Sequence[str],
             skip_principal: str | None) -> list[Grant]:
    """The source's ALLOW grants that clients of the flow's topics and groups depend on: on
    the topics and groups, and on the transactional ids of the principals that write the
    topics."""
    allows = [g for g in grants if g.permission == "ALLOW" and g.principal != skip_principal
              and g.operation in _NEEDED]
    out = []
    for g in allows:
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
    writers = {g.principal for g in out if g.resource == "TOPIC" and g.operation != "READ"}
    out += [g for g in allows if g.resource == "TRANSACTIONAL_ID" and g.operation != "READ"
            and (g.principal in writers or g.principal == "User:*")]
    return sorted(set(out), key=lambda g: (g.resource, g.name, g.principal, g.operation))


@dataclass(frozen=True)
class Need:
    """What one source grant asks of the target: `wanted` (literal, under its target name),
    or the grant itself for groups and transactional ids."""

    source: Grant
    wanted: Grant
    on_source: Grant  # the same, under its source name (a DENY there makes it moot)


def needs_on_target(needed: Iterable[Grant], topics: Sequence[str],
                    failover_topic: Callable[[str], str], mirror_topic: Callable[[str], str],
                    names_kept: bool) -> list[Need]:
    """Per source grant, what the target must allow: per topic in scope the grant covers, the
    same operation on its failover topic and, with prefixed names, READ on its mirror."""
    out = []
    for g in needed:
        if g.resource != "TOPIC":
            out.append(Need(g, g, g))
            continue
        for topic in (t for t in topics if g.matches_name(t)):
            literal = replace(g, pattern="LITERAL", name=topic)
            out.append(Need(g, replace(literal, name=failover_topic(topic)), literal))
            if not names_kept and g.operation in {"READ", "ALL"}:
                out.append(Need(g, replace(literal, operation="READ",
                                           name=mirror_topic(topic)), literal))
    return out


def missing_on_target(needs: Iterable[Need], target: Sequence[Grant]) -> list[Need]:
    """Those of `needs` no target ALLOW covers."""
    allows = [t for t in target if t.permission == "ALLOW"]
    return [n for n in needs if not any(t.covers(n.wanted) for t in allows)]


def denied_on_target(needs: Iterable[Need], source: Sequence[Grant], target: Sequence[Grant],
                     skip_principal: str | None) -> list[tuple[Need, Grant]]:
    """Those of `needs` a target DENY refuses, with the DENY, unless the source denies the
    same (then the source's grant is moot too). DENY bindings on the replicator's principal
    (drctl's fence) are left out."""
    denies = [t for t in target if t.permission == "DENY" and t.principal != skip_principal]
    source_denies = [s for s in source if s.permission == "DENY"]
    out = []
    for n in needs:
        if any(s.blocks(n.on_source) for s in source_denies):
            continue
        deny = next((d for d in denies if d.blocks(n.wanted)), None)
        if deny is not None:
            out.append((n, deny))
    return out


def all_grants(admin: AdminClient, timeout_s: float = 30.0) -> list[Grant]:
    """Every binding of the cluster, ALLOW and DENY (AclsUnavailable when drctl may not read
    them)."""
    return [Grant.of(b) for b in read_acls(admin, AclBindingFilter(
        ResourceType.ANY, None, ResourcePatternType.ANY, None, None,  # type: ignore[arg-type]
        AclOperation.ANY, AclPermissionType.ANY), timeout_s=timeout_s)]


@dataclass(frozen=True)
class AclScope:
    """What ACL parity needs to know of the flow: its clusters, its topics in scope and how
    they are named on the target."""

    source: str
    target: str
    target_bootstrap: str
    topics: Sequence[str]
    topic_in_scope: Callable[[str], bool]
    group_in_scope: Callable[[str], bool]
    failover_topic: Callable[[str], str]
    mirror_topic: Callable[[str], str]
    names_kept: bool
    skip_principal: str | None


def _asking(cluster: str, call: Callable[[], T]) -> T:
    """An ACL answer of `cluster`; one that does not come names the cluster (both are asked)."""
    try:
        return call()
    except Unreachable as exc:
        raise Unreachable(f"cluster '{cluster}': {exc.message}",
                          exc.hint).measured_as(exc) from exc


def acl_parity(scope: AclScope, source: AdminClient, target: AdminClient
               ) -> tuple[list[Finding], int]:
    """Findings, and how many source grants were compared."""
    src_name, dst_name = scope.source, scope.target
    secured = {src_name: _asking(src_name, lambda: authorizer_available(source)),
               dst_name: _asking(dst_name, lambda: authorizer_available(target))}
    if not any(secured.values()):
        return [Finding(Area.ACLS, "ACLs", "no authorizer on either cluster",
                        "none: every client may do everything on both", "nothing to do",
                        Severity.NOTE)], 0
    if not secured[dst_name]:
        return [Finding(Area.ACLS, f"cluster {dst_name}",
                        f"no authorizer on {dst_name}; {src_name} has one",
                        "after a failover every client may write every topic",
                        f"enable an authorizer on {dst_name} with {src_name}'s ACLs")], 0
    if not secured[src_name]:
        return [Finding(Area.ACLS, f"cluster {src_name}",
                        f"no authorizer on {src_name}; {dst_name} has one",
                        "clients that never needed ACLs are refused after a failover",
                        f"grant the flow's clients their ACLs on {dst_name}")], 0
    grants: dict[str, list[Grant]] = {}
    findings: list[Finding] = []
    for name, admin in ((src_name, source), (dst_name, target)):
        try:
            grants[name] = _asking(name, functools.partial(all_grants, admin))
        except AclsUnavailable as exc:
            if exc.outcome != AclOutcome.DENIED:
                raise
            findings.append(Finding(
                Area.ACLS, f"cluster {name}", f"drctl cannot see its ACLs ({exc.message})",
                "ACL parity is unknown: clients may be refused after a failover",
                "grant drctl's principal DESCRIBE on the cluster resource"))
    if findings:
        return findings, 0
    needed = relevant(grants[src_name], scope.topic_in_scope, scope.group_in_scope, scope.topics,
                      scope.skip_principal)
    needs = needs_on_target(needed, scope.topics, scope.failover_topic, scope.mirror_topic,
                            scope.names_kept)
    for n in missing_on_target(needs, grants[dst_name]):
        findings.append(Finding(
            Area.ACLS, n.wanted.describe(), f"allowed on {src_name}"
            + (f" ({n.source.describe()})" if n.source != n.on_source else "")
            + f", not on {dst_name}", _refused(n.wanted),
            n.wanted.add_command(scope.target_bootstrap)))
    for n, deny in denied_on_target(needs, grants[src_name], grants[dst_name],
                                    scope.skip_principal):
        findings.append(Finding(
            Area.ACLS, n.wanted.describe(),
            f"allowed on {src_name}, denied on {dst_name} by {deny.describe()} (a DENY wins "
            "over every ALLOW)", _refused(n.wanted),
            deny.remove_command(scope.target_bootstrap)))
    return findings, len(needed)


def _refused(g: Grant) -> str:
    what = {"WRITE": "producing fails", "READ": "consuming fails"}.get(g.operation,
                                                                       "producing and "
                                                                       "consuming fail")
    if g.resource == "TRANSACTIONAL_ID":
        what = "transactional producers fail"
    return f"after a failover {g.principal} is refused ({what})"
