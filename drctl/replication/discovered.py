"""What a replication kind reads from its own connectors' configs: the flow they describe
(`DiscoveredFlow`, plain data, never a secret) and the facts of the replicator's logins that
drctl's own logins must match. Each kind fills them (`ReplicationKind.discover_flows`);
`drctl.replication.discovery` picks a flow and drafts the configuration from it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from drctl.config import JAAS_OPTION
from drctl.replication_registry import kind_title


@dataclass(frozen=True)
class ClusterLogin:
    """How a replicator logs in to one cluster, without its secrets: the listener's facts
    drctl's own login to that cluster has to match."""

    protocol: str | None = None  # security.protocol
    mechanism: str | None = None  # sasl.mechanism
    username: str | None = None  # the replicator's own (PLAIN, SCRAM), from its JAAS line
    truststore: str | None = None  # ssl.truststore.location (on the Connect worker's host)
    truststore_pem: bool = False  # ssl.truststore.type PEM: a file librdkafka reads too
    client_certificate: bool = False  # ssl.keystore.location: mutual TLS
    token_endpoint: str | None = None  # sasl.oauthbearer.token.endpoint.url
    kerberos_service: str | None = None  # sasl.kerberos.service.name
    no_hostname_check: bool = False  # ssl.endpoint.identification.algorithm empty

    @classmethod
    def from_java(cls, props: Mapping[str, str]) -> ClusterLogin:
        """From a Java client's settings (security.protocol, sasl.*, ssl.*)."""
        mechanism = props.get("sasl.mechanism")
        protocol = props.get("security.protocol")
        if protocol is not None and "SASL" in protocol.upper() and not mechanism:
            mechanism = "GSSAPI"  # the Java client's default
        username = None
        if mechanism and (mechanism.upper() == "PLAIN" or mechanism.upper().startswith("SCRAM")):
            options = dict(JAAS_OPTION.findall(props.get("sasl.jaas.config", "")))
            username = options.get("username")
        return cls(protocol=protocol.upper() if protocol else None, mechanism=mechanism,
                   username=username, truststore=props.get("ssl.truststore.location"),
                   truststore_pem=props.get("ssl.truststore.type", "").upper() == "PEM",
                   client_certificate=bool(props.get("ssl.keystore.location")),
                   token_endpoint=props.get("sasl.oauthbearer.token.endpoint.url"),
                   kerberos_service=props.get("sasl.kerberos.service.name"),
                   no_hostname_check=props.get("ssl.endpoint.identification.algorithm",
                                               None) == "")

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")


def java_login_settings(config: Mapping[str, str], prefix: str) -> dict[str, str]:
    """A connector's client settings for one side: `security.protocol`, `sasl.*`, `ssl.*`
    under `prefix` (`source.cluster.`, `src.kafka.`), without it."""
    return {key[len(prefix):]: value for key, value in config.items()
            if key.startswith(prefix) and (key[len(prefix):] == "security.protocol"
                                           or key[len(prefix):].startswith(("sasl.", "ssl.")))}


@dataclass(frozen=True)
class RegexList:
    """A name filter as the replicator reads it: whole-name regexes; an empty include
    means every name."""

    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    source: str = ""  # where it was read, e.g. "topics '.*', topics.exclude '...'"


def regex_list(value: str | None, problems: list[str], setting: str, *,
               include: bool = False) -> tuple[str, ...]:
    """A comma-separated list of Java regexes (MirrorMaker 2's `topics`, `groups`, ...) as
    drctl's list; one that is not a Python regex is left out and named in `problems`. An
    `include` of `.*` alone is every name: drctl's empty include."""
    out = []
    for pattern in (p.strip() for p in (value or "").split(",")):
        if not pattern:
            continue
        try:
            re.compile(pattern)
        except re.error as exc:
            problems.append(f"{setting}: '{pattern}' is not a Python regex ({exc}); left out, "
                            "write it by hand")
            continue
        out.append(pattern)
    return () if include and out == [".*"] else tuple(out)


@dataclass(frozen=True)
class DiscoveredFlow:
    """One replication flow as its connectors describe it."""

    kind: str
    connectors: Mapping[str, str]  # role (source, checkpoint, heartbeat) -> connector name
    source_bootstrap: str  # how the replicator reaches each cluster ("" when not set)
    target_bootstrap: str
    source_alias: str | None = None  # MirrorMaker 2's cluster aliases
    target_alias: str | None = None
    rename: str | None = "{topic}"  # None: a replication policy drctl cannot read
    rename_source: str = ""  # where `rename` comes from, in words
    # MirrorMaker 2's separator in its internal topics' names, where the rename does not
    # show it (names kept with a custom separator, or the internal separator turned off).
    internal_separator: str | None = None
    topics: RegexList = RegexList()
    groups: RegexList | None = None  # None: the replicator filters no groups
    replicator_group: str | None = None
    source_login: ClusterLogin = ClusterLogin()
    target_login: ClusterLogin = ClusterLogin()
    notes: tuple[str, ...] = ()  # settings worth a comment: intervals and what they cost
    problems: tuple[str, ...] = ()  # what could not be translated
    # drctl's reverse flow of an incident (its `drctl.incident`), not the replicator's own.
    incident: str | None = None

    @property
    def name(self) -> str:
        """The flow's name for people: its source connector, else its first one."""
        return self.connectors.get("source") or next(iter(self.connectors.values()), "?")

    def describe(self) -> str:
        aliases = (f"{self.source_alias} -> {self.target_alias}, " if self.source_alias
                   else "")
        return (f"{self.name} ({kind_title(self.kind)}: {aliases}"
                f"{self.source_bootstrap or '?'} -> {self.target_bootstrap or '?'})")
