"""A first configuration from what the replicator itself says (`drctl config init`).

Kafka Connect holds the replicator's connector configs (`GET /connectors?expand=info`).
Each replication kind reads its own connectors into `DiscoveredFlow`s
(`drctl.replication.discovered`). This module picks the flow between the operator's two
clusters and drafts the configuration: its data (what `parse_config` reads) and the comments
that explain each value, rendered by `templates/drctl-config.yaml.j2`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from drctl.errors import UsageError
from drctl.kafka.connect_rest import CONNECT_RETRY, ConnectClient
from drctl.kafka.http import split_userinfo
from drctl.kube.api import KUBE_RETRY, KubeClient, KubeNotFound
from drctl.kube.kubeconfig import load_login
from drctl.replication.base import kind_named
from drctl.replication.connect import ConnectControlled
from drctl.replication.discovered import ClusterLogin, DiscoveredFlow
from drctl.replication.strimzi import (
    GROUP,
    PLURAL,
    VERSIONS,
    MirrorMakerObject,
    connector_configs,
)
from drctl.replication_registry import KIND_NAMES, kind_entry, kind_title

# The cluster names `config init` writes; `--primary-bootstrap`/`--secondary-bootstrap`.
PRIMARY, SECONDARY = "primary", "secondary"

@dataclass(frozen=True)
class InitRequest:
    """What the operator gave `drctl config init`."""

    primary_bootstrap: str
    secondary_bootstrap: str
    connect_url: str | None = None
    connect_ca_file: str | None = None
    source_connector: str | None = None  # the flow to write, when Connect runs several
    rename: str | None = None  # for a replication policy drctl cannot read
    kind: str | None = None  # only flows of this kind; `identity` reads no connectors
    # Each cluster's schema registry URL (a user:password@ in it: the user is written, the
    # password as a reference).
    primary_registry: str | None = None
    secondary_registry: str | None = None
    # `NAMESPACE/NAME` of a KafkaMirrorMaker2 to read instead of Kafka Connect (Strimzi), and
    # the kubeconfig and context to reach it (None: kubectl's defaults).
    strimzi: str | None = None
    kubeconfig: str | None = None
    context: str | None = None

    @property
    def strimzi_resource(self) -> tuple[str, str] | None:
        if self.strimzi is None:
            return None
        namespace, _, name = self.strimzi.partition("/")
        if not namespace or not name or "/" in name:
            raise UsageError(f"--strimzi must be NAMESPACE/NAME, got '{self.strimzi}'.")
        return namespace, name


class FlowChoiceNeeded(UsageError):
    """Connect runs several flows between the two clusters, or none drctl can place."""

    def __init__(self, message: str, flows: Sequence[DiscoveredFlow]) -> None:
        listed = "\n".join(f"  - {flow.describe()}" for flow in flows)
        super().__init__(f"{message}\n{listed}",
                         "Pass --source-connector NAME with the source connector of the flow "
                         "drctl should manage.")
        self.flows = tuple(flows)


class RenameNeeded(UsageError):
    """The flow's replication policy is a class drctl cannot read names from."""


@dataclass(frozen=True)
class ChosenFlow:
    flow: DiscoveredFlow
    source: str  # PRIMARY or SECONDARY
    target: str
    warnings: tuple[str, ...] = ()


def _connect_client(request: InitRequest, deadline_s: float | None) -> ConnectClient:
    """The worker at `request.connect_url` (credentials in the URL's user-info are used,
    never written)."""
    assert request.connect_url, "only kinds described by connectors are read"
    return ConnectClient(request.connect_url, ca_file=request.connect_ca_file,
                         timeout_s=min(10.0, deadline_s or 10.0),
                         policy=CONNECT_RETRY.with_deadline(deadline_s))


def read_connector_configs(request: InitRequest,
                           deadline_s: float | None = None) -> dict[str, dict[str, str]]:
    """Every connector's config on the worker at `request.connect_url`."""
    return _connect_client(request, deadline_s).connector_configs()


def read_resource_configs(request: InitRequest,
                          deadline_s: float | None = None) -> dict[str, dict[str, str]]:
    """Every connector of the KafkaMirrorMaker2 `--strimzi` names, as Strimzi configures it
    (either layout)."""
    where = request.strimzi_resource
    assert where is not None
    client = KubeClient(load_login(request.kubeconfig, request.context),
                        timeout_s=min(10.0, deadline_s or 10.0),
                        policy=KUBE_RETRY.with_deadline(deadline_s))
    served, _ = client.served_versions(GROUP)
    version = next((v for v in VERSIONS if v in served), None)
    if version is None:
        raise UsageError(f"{client.name} serves no {GROUP} version drctl speaks.",
                         "Is Strimzi installed there (its CRDs)?")
    try:
        raw = client.get(f"/apis/{GROUP}/{version}/namespaces/{where[0]}/{PLURAL}/{where[1]}")
    except KubeNotFound as exc:
        raise UsageError(f"There is no KafkaMirrorMaker2 {request.strimzi} "
                         f"({client.name}).", "Check --strimzi NAMESPACE/NAME.") from exc
    return connector_configs(MirrorMakerObject(raw))


def discover_flows(configs: Mapping[str, Mapping[str, str]],
                   old_names_read: Callable[[str], bool] = lambda _: True
                   ) -> list[DiscoveredFlow]:
    """Every flow each replication kind finds among the connectors (name -> config);
    `old_names_read(kind)`: whether the worker still reads that kind's old key names."""
    return [flow for name in KIND_NAMES
            for flow in kind_named(name).discover_flows(configs, old_names_read(name))]


def _old_names_read(request: InitRequest, configs: Mapping[str, Mapping[str, str]],
                    deadline_s: float | None) -> Callable[[str], bool]:
    """Per kind, whether the worker reads its old key names (`topics.blacklist`): asked of
    the worker only for a kind whose old names a connector sets."""
    used = {key for cfg in configs.values() for key in cfg}
    answers: dict[str, bool] = {}

    def read(name: str) -> bool:
        kind = kind_named(name)
        if not isinstance(kind, ConnectControlled) or \
                not used & set(kind.exclusion_aliases.values()):
            return True
        if name not in answers:
            answers[name] = kind.aliases_honoured(_connect_client(request, deadline_s))
        return answers[name]
    return read


def _addresses(bootstrap: str) -> set[str]:
    """`host:port` entries of a bootstrap list, lower-cased, without a `PROTOCOL://`."""
    return {a.strip().lower().rpartition("://")[2] for a in bootstrap.split(",") if a.strip()}


def _direction(flow: DiscoveredFlow, request: InitRequest) -> str | None:
    """'forward' (primary -> secondary), 'reverse', or None when the connector's addresses
    are not the ones given."""
    primary, secondary = (_addresses(request.primary_bootstrap),
                          _addresses(request.secondary_bootstrap))
    source, target = _addresses(flow.source_bootstrap), _addresses(flow.target_bootstrap)
    if source & primary and not source & secondary and not target & primary:
        return "forward"
    if source & secondary and not source & primary and not target & secondary:
        return "reverse"
    return None


def _placed(flow: DiscoveredFlow, request: InitRequest,
            warnings: Sequence[str] = ()) -> ChosenFlow:
    direction = _direction(flow, request)
    notes = list(warnings)
    if direction is None and (flow.source_bootstrap or flow.target_bootstrap):
        notes.append(f"{flow.name} reaches {flow.source_bootstrap or '?'} -> "
                     f"{flow.target_bootstrap or '?'}, not the addresses given: taken as "
                     f"{PRIMARY} -> {SECONDARY}; swap the two bootstraps if it is the other "
                     "way round")
    elif direction == "reverse":
        notes.append(f"{flow.name} copies from {SECONDARY} to {PRIMARY}: {SECONDARY} is the "
                     "flow's source")
    if direction == "reverse":
        return ChosenFlow(flow, SECONDARY, PRIMARY, tuple(notes))
    return ChosenFlow(flow, PRIMARY, SECONDARY, tuple(notes))


def choose_flow(flows: Sequence[DiscoveredFlow], request: InitRequest) -> ChosenFlow:
    """The flow between the two clusters: the one named by `--source-connector`, else the
    one flow primary -> secondary, else the only flow there is; FlowChoiceNeeded otherwise."""
    candidates = [f for f in flows if request.kind in (None, f.kind)]
    if request.source_connector:
        named = [f for f in candidates if request.source_connector in f.connectors.values()]
        if not named:
            raise FlowChoiceNeeded(f"No flow has a connector named "
                                   f"'{request.source_connector}'. Flows found:", candidates)
        return _placed(named[0], request)
    forward = [f for f in candidates if _direction(f, request) == "forward"]
    if len(forward) == 1:
        others = [f.name for f in candidates if f is not forward[0]]
        return _placed(forward[0], request, [f"Also on the worker, not written: "
                                             f"{', '.join(others)}"] if others else [])
    if len(forward) > 1:
        raise FlowChoiceNeeded(f"Several flows copy from {PRIMARY} to {SECONDARY}:", forward)
    if len(candidates) == 1:
        return _placed(candidates[0], request)
    raise FlowChoiceNeeded(f"None of these flows copies from {PRIMARY} "
                           f"({request.primary_bootstrap}) to {SECONDARY} "
                           f"({request.secondary_bootstrap}):", candidates)


def choose_pair(flows: Sequence[DiscoveredFlow], request: InitRequest
                ) -> tuple[ChosenFlow, ChosenFlow] | None:
    """Both flows of an active-active pair: one MirrorMaker 2 flow each way between the two
    clusters (none of them drctl's reverse flow of an incident), when no --source-connector
    names one flow. None otherwise: one flow is written."""
    if request.source_connector:
        return None
    candidates = [f for f in flows if request.kind in (None, f.kind) and f.incident is None
                  and kind_entry(f.kind).runs_both_ways]
    forward = [f for f in candidates if _direction(f, request) == "forward"]
    reverse = [f for f in candidates if _direction(f, request) == "reverse"]
    if len(forward) != 1 or len(reverse) != 1:
        return None
    return _placed(forward[0], request), _placed(reverse[0], request)


class NoFlowFound(UsageError):
    """Kafka Connect runs no connector of a replication kind drctl knows."""

    def __init__(self, request: InitRequest, names: Sequence[str]) -> None:
        what = kind_title(request.kind) if request.kind else "replication"
        there = ", ".join(sorted(names)) or "none"
        super().__init__(f"Kafka Connect at {_without_userinfo(request.connect_url or '')} "
                         f"runs no {what} connector (connectors there: {there}).",
                         "Check --connect-url (the worker that runs the replicator), or pass "
                         "--kind identity for an offset-preserving mirror.")


def find_flows(request: InitRequest, deadline_s: float | None = None) -> list[DiscoveredFlow]:
    """The flows `config init` chooses from: read from Kafka Connect (NoFlowFound when it
    runs none of the kind asked), or the offset-preserving mirror the operator named."""
    if not reads_connectors(request.kind):
        assert request.kind is not None
        return [flow_without_connectors(request.kind)]
    configs = (read_resource_configs(request, deadline_s) if request.strimzi
               else read_connector_configs(request, deadline_s))
    # Strimzi 0.46+ runs Kafka 4, which reads no old key names.
    old_names = ((lambda _: False) if request.strimzi
                 else _old_names_read(request, configs, deadline_s))
    flows = [f for f in discover_flows(configs, old_names)
             if request.kind in (None, f.kind)]
    if not flows:
        raise NoFlowFound(request, list(configs))
    return flows


def reads_connectors(kind: str | None) -> bool:
    """Whether `config init` reads Kafka Connect for a flow of `kind` (any kind: None)."""
    return kind is None or kind_named(kind).described_by_connectors


def flow_without_connectors(kind: str) -> DiscoveredFlow:
    """A flow no connector describes (an offset-preserving mirror such as Cluster Linking):
    topic names kept, nothing read."""
    return DiscoveredFlow(kind, {}, "", "", rename_source=f"{kind_title(kind)} keeps topic "
                          "names")


@dataclass(frozen=True)
class Entry:
    """One `key: value` of a drafted section, with its comment."""

    key: str
    value: Any
    comment: str = ""


@dataclass(frozen=True)
class ClusterDraft:
    name: str
    entries: tuple[Entry, ...]
    placeholders: tuple[str, ...] = ()  # commented-out lines to fill in


@dataclass(frozen=True)
class ConfigDraft:
    """A configuration as `config init` writes it: `data` is what the file parses to;
    `context` is what the template renders it from (the same values, with comments)."""

    data: dict[str, Any]
    context: dict[str, Any]
    flow: ChosenFlow
    env_vars: tuple[str, ...] = ()  # what the operator must export before drctl runs
    warnings: tuple[str, ...] = ()

    def render(self) -> str:
        from drctl.reports import render

        return render("drctl-config.yaml.j2", None, **self.context)

    def summary(self) -> dict[str, Any]:
        """What `config init -o json` reports (active-active: the first flow, and both)."""
        topology = self.data.get("topology")
        rep = topology["flows"][0] if topology else self.data["replication"]
        out = {"kind": rep["kind"], "source": rep["source"], "target": rep["target"],
               "rename": rep["rename"], "connectors": dict(self.flow.flow.connectors),
               "env_vars": list(self.env_vars), "warnings": list(self.warnings)}
        if topology:
            out["topology"] = topology["kind"]
            out["flows"] = [{"source": f["source"], "target": f["target"],
                             "rename": f["rename"],
                             "connectors": {k.removesuffix("_connector"): v
                                            for k, v in f.get("connect", {}).items()
                                            if k.endswith("_connector")}}
                            for f in topology["flows"]]
        return out


def _env_name(cluster: str, what: str) -> str:
    return re.sub(r"[^A-Z0-9]+", "_", f"{cluster}_{what}".upper())


def _cluster_draft(name: str, bootstrap: str, login: ClusterLogin, who: str,
                   env_vars: list[str]) -> ClusterDraft:
    """drctl's own login to a cluster where the replicator logs in with `login`: the same
    protocol and mechanism, credentials by reference (drctl's principal, never the
    replicator's secrets), and what cannot be carried over as commented lines to fill in."""
    entries = [Entry("bootstrap.servers", bootstrap)]
    placeholders: list[str] = []
    if login.protocol and login.protocol != "PLAINTEXT":
        entries.append(Entry("security.protocol", login.protocol, f"as {who} logs in"))
    mechanism = (login.mechanism or "").upper()
    if login.sasl:
        entries.append(Entry("sasl.mechanism", login.mechanism))
    if login.sasl and (mechanism == "PLAIN" or mechanism.startswith("SCRAM")):
        user, password = _env_name(name, "SASL_USERNAME"), _env_name(name, "SASL_PASSWORD")
        env_vars.extend((user, password))
        as_whom = f" ({who} logs in as '{login.username}')" if login.username else ""
        entries.append(Entry("sasl.username", f"${{env:{user}}}",
                             f"drctl's own principal{as_whom}"))
        entries.append(Entry("sasl.password", f"${{env:{password}}}",
                             "or ${file:/path} / ${file:/path.properties:key}"))
    elif login.sasl and mechanism == "OAUTHBEARER":
        if login.token_endpoint:
            client_id = _env_name(name, "OAUTH_CLIENT_ID")
            secret = _env_name(name, "OAUTH_CLIENT_SECRET")
            env_vars.extend((client_id, secret))
            entries.extend([
                Entry("sasl.oauthbearer.method", "oidc"),
                Entry("sasl.oauthbearer.token.endpoint.url", login.token_endpoint),
                Entry("sasl.oauthbearer.client.id", f"${{env:{client_id}}}",
                      "drctl's own client"),
                Entry("sasl.oauthbearer.client.secret", f"${{env:{secret}}}")])
        else:
            placeholders.append("sasl.oauthbearer.config: principal=drctl   # unsecured JWT; "
                                "OIDC and more: docs/security.md")
    elif login.sasl and mechanism == "GSSAPI":
        if login.kerberos_service:
            entries.append(Entry("sasl.kerberos.service.name", login.kerberos_service))
        placeholders.extend(["sasl.kerberos.principal: drctl@EXAMPLE.COM",
                             "sasl.kerberos.keytab: /etc/drctl/drctl.keytab"])
    if login.tls:
        if login.truststore and login.truststore_pem and Path(login.truststore).is_file():
            entries.append(Entry("ssl.ca.location", login.truststore,
                                 f"the CA {who} trusts (PEM, found on this host)"))
        else:
            trusted = f" ({who} trusts {login.truststore})" if login.truststore else ""
            placeholders.append(f"ssl.ca.location: /etc/drctl/ca.pem   # the CA as PEM"
                                f"{trusted}")
        if login.client_certificate or login.protocol == "SSL":
            key_password = _env_name(name, "SSL_KEY_PASSWORD")
            placeholders.extend([
                "ssl.certificate.location: /etc/drctl/drctl.crt   # mutual TLS: drctl's "
                "certificate",
                f"ssl.key.location: /etc/drctl/drctl.key   # and its key; "
                f"ssl.key.password: ${{env:{key_password}}}"])
        if login.no_hostname_check:
            entries.append(Entry("ssl.endpoint.identification.algorithm", "none",
                                 f"{who} does not check the broker's host name either"))
    return ClusterDraft(name, tuple(entries), tuple(placeholders))


def draft_config(request: InitRequest, chosen: ChosenFlow, *,
                 written_at: datetime | None = None) -> ConfigDraft:
    """The configuration for `chosen`, as data and as the template's context."""
    flow = chosen.flow
    if flow.rename is None and request.rename is None:
        raise RenameNeeded(f"{flow.name}'s replication policy ({flow.rename_source}) is not one "
                           "drctl can read topic names from.",
                           "Pass --rename with the target name of a source topic, e.g. "
                           "--rename '{topic}' (names kept) or --rename 'primary.{topic}'.")
    rename = request.rename or flow.rename or "{topic}"
    if rename.count("{topic}") != 1:
        raise UsageError(f"--rename must contain '{{topic}}' exactly once, got '{rename}'.",
                         "E.g. '{topic}' (names kept) or 'primary.{topic}'.")
    who = kind_title(flow.kind)
    bootstraps = {PRIMARY: request.primary_bootstrap, SECONDARY: request.secondary_bootstrap}
    logins = {chosen.source: flow.source_login, chosen.target: flow.target_login}
    env_vars: list[str] = []
    clusters = [_cluster_draft(name, bootstraps[name], logins[name], who, env_vars)
                for name in (PRIMARY, SECONDARY)]

    rep: dict[str, Any] = {"kind": flow.kind, "source": chosen.source,
                           "target": chosen.target}
    comments: dict[str, str] = {}
    if flow.source_alias:
        rep["source_alias"] = flow.source_alias
        rep["target_alias"] = flow.target_alias
        comments["source_alias"] = f"{who}'s cluster aliases"
    rep["rename"] = rename
    comments["rename"] = (f"from --rename ({flow.rename_source})" if request.rename
                          else flow.rename_source)
    if flow.internal_separator is not None:
        rep["internal_separator"] = flow.internal_separator
        comments["internal_separator"] = (f"{who}'s internal topics (checkpoints, offset "
                                          f"syncs) are named with '{flow.internal_separator}'")
    rep["topics"] = {"include": list(flow.topics.include), "exclude": list(flow.topics.exclude)}
    comments["topics"] = flow.topics.source
    if flow.connectors and request.strimzi_resource is not None:
        namespace, name = request.strimzi_resource
        rep["connect"] = {f"{role}_connector": flow.connectors[role]
                          for role in ("source", "checkpoint", "heartbeat")
                          if role in flow.connectors}
        rep["strimzi"] = {"namespace": namespace, "name": name,
                          **({"kubeconfig": request.kubeconfig} if request.kubeconfig else {}),
                          **({"context": request.context} if request.context else {})}
    elif flow.connectors:
        connect: dict[str, Any] = {"url": _without_userinfo(request.connect_url or "")}
        user = _userinfo_user(request.connect_url or "")
        if user is not None:
            env_vars.append("DRCTL_CONNECT_PASSWORD")
            connect.update({"username": user, "password": "${env:DRCTL_CONNECT_PASSWORD}"})
        if request.connect_ca_file:
            connect["ca_file"] = request.connect_ca_file
        for role in ("source", "checkpoint", "heartbeat"):
            if role in flow.connectors:
                connect[f"{role}_connector"] = flow.connectors[role]
        rep["connect"] = connect
    if flow.replicator_group:
        rep["replicator_group"] = flow.replicator_group
        comments["replicator_group"] = ("its consumer group on the source: src.consumer.group.id, "
                                        "or the connector's name")
    target_login = flow.target_login
    principal_placeholder = ""
    if target_login.username:
        rep["principal"] = f"User:{target_login.username}"
        comments["principal"] = (f"{who}'s principal on {chosen.target}: whom a failover "
                                 "fences out while the stop is not confirmed")
    else:
        principal_placeholder = (f"principal: User:NAME   # {who}'s principal on the target: a "
                                 "failover fences it out while its stop is not confirmed "
                                 "(needs an authorizer)")
    data: dict[str, Any] = {
        "clusters": {c.name: {e.key: e.value for e in c.entries} for c in clusters},
        "replication": rep,
    }
    for name, url in ((PRIMARY, request.primary_registry),
                      (SECONDARY, request.secondary_registry)):
        if url:
            data["clusters"][name]["schema_registry"] = _registry_draft(name, url, env_vars)
    if flow.groups is not None:
        data["groups"] = {"include": list(flow.groups.include),
                          "exclude": list(flow.groups.exclude)}
    data["state"] = {"dir": ".drctl", "topic": "_drctl_state"}
    when = (written_at or datetime.now(UTC)).strftime("%Y-%m-%d %H:%M UTC")
    read_from = (f"the connectors {', '.join(flow.connectors.values())} on Kafka Connect at "
                 f"{_without_userinfo(request.connect_url or '')}" if flow.connectors
                 else "the flags given (an offset-preserving mirror: nothing to read)")
    notes = list(flow.notes)
    if request.strimzi:
        read_from = f"the KafkaMirrorMaker2 {request.strimzi} (Strimzi)"
        notes.append("Strimzi owns the connectors: drctl changes them through the resource "
                     "only. Set replication.strimzi.reverse_namespace (and reverse_name) to "
                     "where failback creates the reverse flow's KafkaMirrorMaker2.")
    context = {
        "when": when, "read_from": read_from, "who": who, "data": data, "clusters": clusters,
        "comments": comments, "principal_placeholder": principal_placeholder,
        "flows": [{"rep": rep, "comments": comments,
                   "principal_placeholder": principal_placeholder}],
        "groups_source": flow.groups.source if flow.groups is not None else "",
        "notes": notes, "problems": list(flow.problems),
        "env_vars": env_vars,
    }
    return ConfigDraft(data, context, chosen, tuple(env_vars),
                       tuple([*chosen.warnings, *flow.problems]))


def draft_pair_config(request: InitRequest, forward: ChosenFlow, reverse: ChosenFlow, *,
                      written_at: datetime | None = None) -> ConfigDraft:
    """The configuration of an active-active pair: `topology:` with both flows, each drafted
    as `draft_config` drafts one (the clusters' logins from the forward flow's connectors)."""
    first = draft_config(request, forward, written_at=written_at)
    second = draft_config(request, reverse, written_at=written_at)
    data = {k: v for k, v in first.data.items() if k != "replication"}
    data["topology"] = {"kind": "active-active",
                        "flows": [first.data["replication"], second.data["replication"]]}
    # `topology` right after `clusters`, where `replication` stood.
    data = {"clusters": data.pop("clusters"), "topology": data.pop("topology"), **data}
    env_vars = tuple(dict.fromkeys((*first.env_vars, *second.env_vars)))
    context = {**first.context, "data": data, "env_vars": list(env_vars),
               "read_from": f"{first.context['read_from']} and "
                            f"{', '.join(reverse.flow.connectors.values())}",
               "flows": [_flow_context(first), _flow_context(second)],
               "notes": list(dict.fromkeys((*first.context["notes"],
                                            *second.context["notes"]))),
               "problems": list(dict.fromkeys((*first.context["problems"],
                                               *second.context["problems"])))}
    return ConfigDraft(data, context, forward, env_vars,
                       tuple(dict.fromkeys((*first.warnings, *second.warnings))))


def _flow_context(draft: ConfigDraft) -> dict[str, Any]:
    return {"rep": draft.data["replication"], "comments": draft.context["comments"],
            "principal_placeholder": draft.context["principal_placeholder"]}


def _registry_draft(cluster: str, url: str, env_vars: list[str]) -> dict[str, str]:
    """A cluster's `schema_registry:` for `url`; its password by reference."""
    registry = {"url": _without_userinfo(url)}
    user = _userinfo_user(url)
    if user is not None:
        password = _env_name(cluster, "REGISTRY_PASSWORD")
        env_vars.append(password)
        registry.update({"username": user, "password": f"${{env:{password}}}"})
    return registry


def _without_userinfo(url: str) -> str:
    return split_userinfo(url)[0]


def _userinfo_user(url: str) -> str | None:
    return split_userinfo(url)[1]
