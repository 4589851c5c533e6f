"""drctl's one configuration file: parsed, validated and resolved into plain dataclasses.

Every problem is a `ConfigError` naming the file, the key path and the reason, so an operator
can fix the file without reading code.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache, partial
from pathlib import Path
from typing import Any, TypeVar

import yaml

from drctl.errors import ConfigError
from drctl.properties import read_properties
from drctl.replication_registry import KIND_NAMES, kind_entry
from drctl.retry import RetryPolicy
from drctl.secrets import (
    Redactor,
    UnresolvedReference,
    is_reference,
    is_secret_key,
    mask_url_userinfo,
    resolve_references,
    url_token,
)
from drctl.suggest import did_you_mean
from drctl.timeparse import parse_duration

T = TypeVar("T")

DEFAULT_CONFIG_PATH = Path("drctl.yaml")
CONFIG_ENV_VAR = "DRCTL_CONFIG"
# In a cluster section: a Kafka client `.properties` file whose settings the section's own keys
# override (drctl's key, not a client property: it never reaches a client).
CLIENT_PROPERTIES_KEY = "client_properties"
# In a cluster section: Java client properties for the Spark gap job only (librdkafka never sees
# them); they override what drctl maps from the section's librdkafka properties.
JAVA_PROPERTIES_KEY = "java"
# In a cluster section: the schema registry its producers and consumers use (drctl's key).
SCHEMA_REGISTRY_KEY = "schema_registry"


@dataclass(frozen=True)
class NameFilter:
    """Include/exclude regexes matched against whole names; an empty include means all."""

    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()

    def matches(self, name: str) -> bool:
        return _name_matches(self, name)


@lru_cache(maxsize=65536)
def _name_matches(names: NameFilter, name: str) -> bool:
    # Cached: a check or a translation asks it of the same 10,000 groups and topics again
    # and again.
    if names.include and not any(re.fullmatch(p, name) for p in names.include):
        return False
    return not any(re.fullmatch(p, name) for p in names.exclude)


# The scope of an incident that covers the whole flow.
WHOLE_FLOW = "*"


@dataclass(frozen=True)
class Scope:
    """What an incident covers (docs/design.md §6, "Incident scope"): the whole flow, or one
    application — its topics and the groups that read them, regexes on whole names inside the
    flow's own filters. Without `groups` an application's groups are those that commit on its
    topics. Chosen once per command (`--app`, `--topics`/`--groups`), recorded in the
    incident's marker, and passed down with the command's context."""

    # An application's name; for --topics/--groups `adhoc-` and a digest of the regexes
    # (`adhoc_scope`): each one-off scope is an identity of its own.
    name: str = WHOLE_FLOW
    topics: NameFilter = NameFilter()
    groups: NameFilter = NameFilter()

    @property
    def whole(self) -> bool:
        return self.name == WHOLE_FLOW

    @property
    def adhoc(self) -> bool:
        """A one-off scope (--topics/--groups), not a configured application."""
        return self.name == LEGACY_ADHOC_SCOPE or self.name.startswith(ADHOC_PREFIX)

    @property
    def groups_given(self) -> bool:
        """Whether the scope names its groups (else: the groups that read its topics)."""
        return bool(self.groups.include or self.groups.exclude)

    def covers_topic(self, source_topic: str) -> bool:
        # A whole-flow incident's filter is empty, or leaves out what open applications'
        # incidents hold (ops/steps/scope.py).
        return self.topics.matches(source_topic)

    def covers_group(self, group: str) -> bool:
        """Whether the scope's own group filter takes `group` (an application that names no
        groups takes those that read its topics: the caller decides that)."""
        return self.groups.matches(group)

    def describe(self) -> str:
        if self.whole:
            return "the whole flow"
        if not self.adhoc:
            return f"application {self.name}"
        return "topics " + ", ".join(self.topics.include or (".*",))

    def describe_first(self) -> str:
        """`describe` opening a sentence: its first letter upper case, the names as they are
        (str.capitalize made application `Billing` 'Application billing')."""
        text = self.describe()
        return text[:1].upper() + text[1:]

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "topics": list(self.topics.include),
                "topics_exclude": list(self.topics.exclude),
                "groups": list(self.groups.include), "groups_exclude": list(self.groups.exclude)}

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any] | None) -> Scope:
        """A marker's scope (none in markers written before scopes: the whole flow)."""
        if not raw:
            return cls()
        return cls(str(raw.get("name", WHOLE_FLOW)),
                   NameFilter(tuple(raw.get("topics") or ()), tuple(raw.get("topics_exclude")
                                                                    or ())),
                   NameFilter(tuple(raw.get("groups") or ()), tuple(raw.get("groups_exclude")
                                                                    or ())))


# A one-off scope's name starts so; no application's name may.
ADHOC_PREFIX = "adhoc-"
# What every one-off scope was called before each had its own identity (older markers).
LEGACY_ADHOC_SCOPE = "ad hoc"


def adhoc_scope(topics: Sequence[str], groups: Sequence[str]) -> Scope:
    """The one-off scope of `--topics`/`--groups`: named by a digest of its regexes, so the
    same regexes continue their incident and other ones open another."""
    include = tuple(topics) or (".*",)
    digest = hashlib.sha256(json.dumps([include, list(groups)]).encode()).hexdigest()[:8]
    return Scope(ADHOC_PREFIX + digest, NameFilter(include), NameFilter(tuple(groups)))


@dataclass(frozen=True)
class HttpSettings:
    """An HTTP endpoint drctl calls (Kafka Connect, a schema registry): its URL, a login
    (basic or bearer) and TLS, configured the same way for each."""

    url: str | None = None
    username: str | None = None
    password: str | None = None
    token: str | None = None  # a bearer token, instead of username and password
    ca_file: str | None = None  # the CA that signed the server's certificate (HTTPS)
    cert_file: str | None = None  # drctl's client certificate (mutual TLS), PEM
    key_file: str | None = None  # its private key, PEM (may sit in cert_file instead)
    timeout_s: float = 10.0  # per request


@dataclass(frozen=True)
class ConnectSettings(HttpSettings):
    source_connector: str | None = None
    checkpoint_connector: str | None = None
    heartbeat_connector: str | None = None
    # How long a worker that does not answer is retried before it is unreachable: the
    # command's --deadline, set by the command (OpsContext), never read from the file.
    # None: the Connect client's own bound (kafka/connect_rest.py: CONNECT_RETRY).
    reach_deadline_s: float | None = None

    @property
    def connectors(self) -> tuple[str, ...]:
        names = (self.source_connector, self.checkpoint_connector, self.heartbeat_connector)
        return tuple(n for n in names if n)


@dataclass(frozen=True)
class StrimziSettings:
    """A flow whose connectors Strimzi's cluster operator owns: its `KafkaMirrorMaker2`
    resource (and where the reverse flow's lives or is created). Every change to the flow
    goes through the resource, none through Kafka Connect's REST API."""

    namespace: str
    name: str
    reverse_namespace: str | None = None  # None: the reverse flow is not drctl's to create
    reverse_name: str | None = None
    # None: $KUBECONFIG, ~/.kube/config, else the pod's service account (in-cluster).
    kubeconfig: str | None = None
    context: str | None = None  # None: the kubeconfig's current-context
    timeout_s: float = 10.0  # per request

    @property
    def resource(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def reverse_resource(self) -> str | None:
        if self.reverse_namespace is None:
            return None
        return f"{self.reverse_namespace}/{self.reverse_name or self.name}"


@dataclass(frozen=True)
class ReplicationSettings:
    kind: str
    source: str
    target: str
    topics: NameFilter = NameFilter()
    # How a source topic is named on the target; `{topic}` keeps names (active/standby DR).
    rename: str = "{topic}"
    source_alias: str = "primary"
    target_alias: str = "secondary"
    connect: ConnectSettings = ConnectSettings()
    replicator_group: str | None = None
    # The replicator's Kafka principal (`User:mirrormaker`): whom the replication fence denies.
    principal: str | None = None
    # How the flow the other way names its copies on this flow's source: in an active-active
    # pair the other flow's `rename` (its alias and separator, as its connectors write them);
    # None for one flow: drctl's own reverse flow's, `<target alias>.{topic}` (MirrorMaker
    # 2's default separator, the one drctl's reverse connector runs with).
    reverse_rename: str | None = None
    # MirrorMaker 2's separator in its internal topics' names (checkpoints, offset syncs):
    # replication.policy.separator, unless replication.policy.internal.topic.separator.enabled
    # is false ('.'). None: the one its prefixed names show (`rename`), else '.'.
    internal_separator: str | None = None
    # Strimzi owns the connectors: drctl changes them through this resource only.
    strimzi: StrimziSettings | None = None

    @property
    def separator(self) -> str:
        """The separator MirrorMaker 2 names its checkpoints and offset-syncs topics with."""
        if self.internal_separator is not None:
            return self.internal_separator
        prefix = self.rename.partition("{topic}")[0]
        if prefix.startswith(self.source_alias) and len(prefix) > len(self.source_alias):
            return prefix[len(self.source_alias):]
        return "."

    def mm2_topic(self, *words: str) -> str:
        """A MirrorMaker 2 internal topic's name: `words` joined with its separator
        (`primary.checkpoints.internal`, `mm2-offset-syncs_secondary_internal`)."""
        return self.separator.join(words)

    @property
    def names_kept(self) -> bool:
        return self.rename == "{topic}"

    def mirror_topic(self, source_topic: str) -> str:
        """The target topic that holds what was replicated from `source_topic`."""
        return self.rename.replace("{topic}", source_topic)

    def failover_topic(self, source_topic: str) -> str:
        """Where producers write on the target after failover (docs/design.md §2)."""
        return source_topic if not self.names_kept else self.mirror_topic(source_topic)

    @property
    def reverse_naming(self) -> str:
        """The flow the other way's naming (`reverse_rename`, or drctl's reverse flow's)."""
        return self.reverse_rename or f"{self.target_alias}.{{topic}}"

    def reverse_topic(self, failover_topic: str) -> str:
        """Where the reverse flow (target -> source) puts a failover topic's records on the
        source: the same topic with names kept, its copy's name when prefixed."""
        return failover_topic if self.names_kept else \
            self.reverse_naming.replace("{topic}", failover_topic)

    def reverse_copy_origin(self, source_topic: str) -> str | None:
        """The failover topic (on the target) whose reverse copies `source_topic` holds, or
        None when it is not a reverse copy topic (names kept: there are none)."""
        if self.names_kept:
            return None
        return _named_from(self.reverse_naming, source_topic)

    def replicates(self, source_topic: str) -> bool:
        """Whether forward replication copies this source-cluster topic: the filter matches
        and it is not a reverse copy. The reverse copies hold writes that already live in the
        target's failover topic; MirrorMaker 2 never copies a topic back to the cluster its
        name says it came from (its cycle check), and no drctl command treats one as a
        source topic (docs/design.md, "Prefixed names through the cycle")."""
        return self.topics.matches(source_topic) and self.reverse_copy_origin(source_topic) is None

    def source_topic_of(self, target_topic: str) -> str | None:
        """The source topic a mirror topic was replicated from, or None if it is not one."""
        return _named_from(self.rename, target_topic)


def _named_from(rename: str, topic: str) -> str | None:
    """The `{topic}` that `rename` turns into `topic`, or None when it does not."""
    prefix, _, suffix = rename.partition("{topic}")
    if (topic.startswith(prefix) and topic.endswith(suffix)
            and len(topic) > len(prefix) + len(suffix)):
        return topic[len(prefix):len(topic) - len(suffix)]
    return None


# The one topology besides one flow (active/standby, `replication:`): MirrorMaker 2 both ways.
ACTIVE_ACTIVE = "active-active"
TOPOLOGY_KINDS = (ACTIVE_ACTIVE,)


@dataclass(frozen=True)
class TopologySettings:
    """`topology:` — two flows between the same two clusters, one each way (docs/design.md
    §6, "Active-active"); each cluster is a region whose producers write its local topics.
    What the flows mean together lives in drctl/ops/active_active/; here only what the file
    says. Names kept both ways parse (`config check` and `failover` name the loop)."""

    kind: str
    flows: tuple[ReplicationSettings, ReplicationSettings]
    # Per region (cluster name): the groups its applications own (none given: every group
    # that commits on it, within `groups:`).
    region_groups: Mapping[str, NameFilter] = field(default_factory=dict)

    @property
    def regions(self) -> tuple[str, str]:
        return self.flows[0].source, self.flows[0].target

    def flow_from(self, region: str) -> ReplicationSettings:
        """The flow that copies `region`'s local topics to the other region."""
        for flow in self.flows:
            if flow.source == region:
                return flow
        raise KeyError(region)

    def other(self, region: str) -> str:
        return self.flow_from(region).target


@dataclass(frozen=True)
class StateSettings:
    dir: Path = Path(".drctl")
    topic: str = "_drctl_state"
    # On the target: `drctl guard`'s offset snapshots (compacted), read when the source is down.
    snapshots_topic: str = "_drctl_offset_snapshots"


@dataclass(frozen=True)
class SparkSettings:
    """Where the gap job runs: a Spark Connect server (`remote`, sc://HOST:PORT) that takes
    every gap job of the process, or a job of its own on `master` (local, or a cluster)."""

    master: str = "local[*]"
    jars: tuple[str, ...] = ()
    packages: tuple[str, ...] = ()
    conf: Mapping[str, str] = field(default_factory=dict)
    remote: str | None = None  # its token resolved: never print it (mask_url_userinfo)

    @property
    def where(self) -> str:
        """Where a gap job runs, for messages (a token masked)."""
        return f"Spark Connect {mask_url_userinfo(self.remote)}" if self.remote else self.master


@dataclass(frozen=True)
class Objectives:
    """The recovery objectives a drill is scored against (`objectives:`), in seconds; None
    where none is set. RPO: how much data, in time, a failover may lose; RTO: how long a
    failover may take from its command's start (detection excluded)."""

    rpo_s: float | None = None
    rto_s: float | None = None


@dataclass(frozen=True)
class Config:
    path: Path | None
    clusters: Mapping[str, Mapping[str, str]]
    replication: ReplicationSettings | None = None
    # Two flows, one each way (`topology:`); then `replication` is None: a command that works
    # on one flow takes one of them (`for_flow`).
    topology: TopologySettings | None = None
    # Per cluster, its `java:` map; None as a value leaves that property out of the Java client.
    java_clusters: Mapping[str, Mapping[str, str | None]] = field(default_factory=dict)
    # Per cluster, the schema registry its consumers decode with (`schema_registry:`).
    schema_registries: Mapping[str, HttpSettings] = field(default_factory=dict)
    groups: NameFilter = NameFilter()
    state: StateSettings = StateSettings()
    spark: SparkSettings = SparkSettings()
    retry: RetryPolicy = RetryPolicy()
    objectives: Objectives = Objectives()
    # Named scopes for incidents of one application (`applications:`).
    applications: Mapping[str, Scope] = field(default_factory=dict)
    redactor: Redactor = field(default_factory=Redactor, compare=False, repr=False)
    # Key path -> the `${env:...}`/`${file:...}` reference a value was written as, so that
    # `config show` prints the reference (never the secret it names).
    references: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)

    def scope(self, app: str | None = None, topics: Sequence[str] = (),
              groups: Sequence[str] = ()) -> Scope:
        """The scope a command names: an application (`--app`), an ad hoc one
        (`--topics`/`--groups`, regexes), or the whole flow."""
        if app and (topics or groups):
            raise ConfigError("--app and --topics/--groups exclude each other",
                              path=str(self.path) if self.path else None,
                              hint="Name an application, or its topics and groups.")
        if app:
            if app not in self.applications:
                known = ", ".join(sorted(self.applications)) or "none configured"
                raise ConfigError(f"unknown application '{app}' (applications: {known})",
                                  path=str(self.path) if self.path else None,
                                  key="applications", hint=did_you_mean(app, self.applications))
            return self.applications[app]
        if not topics and not groups:
            return Scope()
        for text in (*topics, *groups):
            try:
                re.compile(text)
            except re.error as exc:
                raise ConfigError(f"--topics/--groups: '{text}' is not a valid regex: {exc}",
                                  path=str(self.path) if self.path else None) from None
        return adhoc_scope(topics, groups)

    def cluster(self, name: str) -> Mapping[str, str]:
        if name not in self.clusters:
            known = ", ".join(sorted(self.clusters)) or "none"
            raise ConfigError(f"unknown cluster '{name}' (configured: {known})",
                              path=str(self.path) if self.path else None, key="clusters",
                              hint=did_you_mean(name, self.clusters))

        return self.clusters[name]

    def java_properties(self, name: str) -> Mapping[str, str | None]:
        """The cluster's `java:` map (Java client properties for the gap job), or nothing."""
        return self.java_clusters.get(name, {})

    def under_deadline(self, deadline_s: float | None) -> Config:
        """This config with a command's --deadline as its Connect worker's reach deadline
        (None: as it is)."""
        rep, topology = self.replication, self.topology
        if deadline_s is None or (rep is None and topology is None):
            return self

        def bounded(flow: ReplicationSettings) -> ReplicationSettings:
            return replace(flow, connect=replace(flow.connect, reach_deadline_s=deadline_s))

        if topology is not None:
            flows = (bounded(topology.flows[0]), bounded(topology.flows[1]))
            return replace(self, topology=replace(topology, flows=flows))
        assert rep is not None
        return replace(self, replication=bounded(rep))

    def for_flow(self, flow: ReplicationSettings) -> Config:
        """This config seen as one flow (`replication: flow`, no topology): every one-flow
        step — translation, guard, lag, RPO, markers — works on each flow of a topology
        through it."""
        return replace(self, replication=flow, topology=None)

    def require_replication(self) -> ReplicationSettings:
        if self.replication is None:
            if self.topology is not None:
                raise ConfigError(f"this command works on one replication flow; this "
                                  f"configuration's topology is {self.topology.kind}",
                                  path=str(self.path) if self.path else None, key="topology",
                                  hint="An active-active pair fails over and back by region: "
                                       "`drctl failover --region NAME`, `drctl failback`; "
                                       "`status`, `check` and `guard` read both flows "
                                       "(docs/operations.md, \"Active-active\").")
            raise ConfigError("this command needs a 'replication' section",
                              path=str(self.path) if self.path else None, key="replication")
        return self.replication


# ---------------------------------------------------------------------------------------------
# Loading


def config_path_from(option: str | None) -> Path:
    if option:
        return Path(option)
    env = os.environ.get(CONFIG_ENV_VAR)
    return Path(env) if env else DEFAULT_CONFIG_PATH


def load_config(path: Path) -> Config:
    if not path.exists():
        raise ConfigError(
            "no configuration file here",
            path=str(path),
            hint="Write one with `drctl config init` (it reads your replicator's connectors), "
                 "or pass --config PATH or set DRCTL_CONFIG. To try drctl without clusters of "
                 "your own: `drctl lab up`, then --config lab/drctl.yaml.",
        )
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ConfigError(f"not valid YAML{where}: {getattr(exc, 'problem', exc)}",
                          path=str(path)) from exc
    except OSError as exc:
        raise ConfigError(f"cannot read: {exc.strerror}", path=str(path)) from exc
    return parse_config(raw if raw is not None else {}, path=path)


def parse_config(raw: Any, path: Path | None = None) -> Config:
    """The configuration, or one ConfigError listing every problem in it (key path, reason
    and hint each), so that one edit fixes them all."""
    parser = _Parser(path)
    config = parser.collect(lambda: parser.config(raw), None)
    if parser.problems:
        raise ConfigError.of(parser.problems, str(path) if path else None)
    assert config is not None, "a parse without problems returns a config"
    return config


# `name="value"` in a JAAS line (sasl.jaas.config).
JAAS_OPTION = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"')
# Kafka's principal form, `Type:name` (User:alice, Group:ops); the name may contain ':' itself.
_PRINCIPAL = re.compile(r"[A-Za-z][A-Za-z0-9_]*:\S.*")

_TOP_KEYS = ("clusters", "replication", "topology", "groups", "state", "spark", "retry",
             "objectives", "applications")
_TOPOLOGY_KEYS = ("kind", "flows", "regions")
_REGION_KEYS = ("groups",)
_APPLICATION_KEYS = ("topics", "groups")
_REPLICATION_KEYS = ("kind", "source", "target", "topics", "rename", "source_alias",
                     "target_alias", "connect", "replicator_group", "principal",
                     "internal_separator", "strimzi")
_STRIMZI_KEYS = ("kubeconfig", "context", "namespace", "name", "reverse_namespace",
                 "reverse_name", "timeout_s")
# A Kubernetes namespace or object name (RFC 1123 label / subdomain).
_K8S_NAMESPACE = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
_K8S_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")
_HTTP_KEYS = ("url", "username", "password", "token", "ca_file", "cert_file", "key_file",
              "timeout_s")
_HTTP_FILE_KEYS = ("ca_file", "cert_file", "key_file")
_CONNECT_KEYS = (*_HTTP_KEYS, "source_connector", "checkpoint_connector",
                 "heartbeat_connector")
_FILTER_KEYS = ("include", "exclude")
_STATE_KEYS = ("dir", "topic", "snapshots_topic")
_SPARK_KEYS = ("master", "jars", "packages", "conf", "remote")
_RETRY_KEYS = ("initial_s", "multiplier", "max_s", "attempts", "deadline_s")
_OBJECTIVE_KEYS = ("rpo", "rto")


class _Parser:
    """Parses section by section; a value that does not parse is recorded as a problem and
    replaced by its default, so the rest of the file is still checked."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.base_dir = path.parent if path else Path.cwd()
        self.redactor = Redactor()
        self.references: dict[str, str] = {}
        self.problems: list[ConfigError] = []
        self.clusters_parsed = False  # references to clusters are checked only against a list
        self.registries: dict[str, HttpSettings] = {}  # filled by clusters()

    def error(self, key: str, message: str, hint: str | None = None) -> ConfigError:
        return ConfigError(message, path=str(self.path) if self.path else None, key=key,
                           hint=hint)

    def collect(self, parse: Callable[[], T], default: T) -> T:
        """`parse()`, or `default` with its ConfigError recorded."""
        try:
            return parse()
        except ConfigError as exc:
            self.problems.append(exc)
            return default

    def mapping(self, value: Any, key: str, allowed: tuple[str, ...] | None) -> dict[str, Any]:
        """The mapping's entries; unknown keys are recorded as problems and left out."""
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            raise self.error(key, f"expected a mapping, got {type_name(value)}")
        entries: dict[str, Any] = {}
        for name, item in value.items():
            if not isinstance(name, str):
                self.problems.append(self.error(key, f"keys must be strings, got {name!r}"))
            elif allowed is not None and name not in allowed:
                self.problems.append(self.error(f"{key}.{name}" if key else name,
                                                "unknown key", did_you_mean(name, allowed)))
            else:
                entries[name] = item
        return entries

    def string(self, value: Any, key: str, *, secret: bool = False) -> str:
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise self.error(key, f"expected a string, got {type_name(value)}")
        try:
            resolved = resolve_references(str(value))
        except UnresolvedReference as exc:
            raise self.error(key, f"unresolved reference: {exc}") from exc
        self.remember(key, str(value))
        if secret or is_secret_key(key):
            self.redactor.add(resolved)
        return resolved

    def remember(self, key: str, written: str) -> None:
        """The reference `key` was written as (a later value for the key replaces it)."""
        if is_reference(written):
            self.references[key] = written.strip()
        else:
            self.references.pop(key, None)

    def optional_string(self, value: Any, key: str) -> str | None:
        return None if value is None else self.string(value, key)

    def duration(self, value: Any, key: str) -> float:
        """Seconds from a duration as every command and runbook reads it (`90s`, `15m`, a
        number of seconds)."""
        try:
            return parse_duration(value)
        except ValueError as exc:
            raise self.error(key, str(exc)) from None

    def number(self, value: Any, key: str, *, integer: bool = False,
               minimum: float = 0) -> float:
        ok = isinstance(value, int) if integer else isinstance(value, (int, float))
        if isinstance(value, bool) or not ok:
            expected = "an integer" if integer else "a number"
            raise self.error(key, f"expected {expected}, got {type_name(value)}")
        if value < minimum:
            raise self.error(key, f"must be at least {minimum}, got {value}")
        return float(value)

    def string_list(self, value: Any, key: str, *, regex: bool = False) -> tuple[str, ...]:
        if value is None:
            return ()
        items = [value] if isinstance(value, str) else value
        if not isinstance(items, list):
            raise self.error(key, f"expected a list of strings, got {type_name(value)}")
        out = []
        for i, item in enumerate(items):
            text = self.collect(partial(self.string, item, f"{key}[{i}]"), None)
            if text is None:
                continue
            if regex:
                try:
                    re.compile(text)
                except re.error as exc:
                    self.problems.append(self.error(f"{key}[{i}]", f"not a valid regex: {exc}"))
                    continue
            out.append(text)
        return tuple(out)

    def name_filter(self, value: Any, key: str) -> NameFilter:
        raw = self.mapping(value, key, _FILTER_KEYS)
        return NameFilter(self.string_list(raw.get("include"), f"{key}.include", regex=True),
                          self.string_list(raw.get("exclude"), f"{key}.exclude", regex=True))

    def config(self, raw: Any) -> Config:
        if isinstance(raw, dict) and isinstance(raw.get("exit_status"), int):
            # `config show -o json` saved as is: its envelope's exit status is no setting.
            raw = {k: v for k, v in raw.items() if k != "exit_status"}
        top = self.mapping(raw, "", _TOP_KEYS)
        no_clusters: tuple[dict[str, dict[str, str]], dict[str, dict[str, str | None]]] = ({}, {})
        clusters, java_clusters = self.collect(lambda: self.clusters(top.get("clusters")),
                                               no_clusters)
        replication = None
        if top.get("replication") is not None:
            replication = self.collect(lambda: self.replication(top["replication"], clusters),
                                       None)
        topology = None
        if top.get("topology") is not None:
            topology = self.collect(lambda: self.topology(top["topology"], clusters), None)
            if replication is not None:
                self.problems.append(self.error(
                    "replication", "set together with topology: a topology's flows are its "
                    "own (topology.flows)", "Move the flow into topology.flows, or remove "
                    "topology for one flow."))
        return Config(
            path=self.path,
            clusters=clusters,
            replication=replication,
            topology=topology,
            java_clusters=java_clusters,
            schema_registries=self.registries,
            groups=self.collect(lambda: self.name_filter(top.get("groups"), "groups"),
                                NameFilter()),
            state=self.collect(lambda: self.state(top.get("state")), StateSettings()),
            spark=self.collect(lambda: self.spark(top.get("spark")), SparkSettings()),
            retry=self.collect(lambda: self.retry(top.get("retry")), RetryPolicy()),
            objectives=self.collect(lambda: self.objectives(top.get("objectives")),
                                    Objectives()),
            applications=self.collect(lambda: self.applications(top.get("applications")), {}),
            redactor=self.redactor,
            references=self.references,
        )

    def applications(self, value: Any) -> dict[str, Scope]:
        """`applications: {NAME: {topics: [regex, ...], groups: [regex, ...]}}`; `topics` is
        required, `groups` optional (default: the groups that read the topics)."""
        out: dict[str, Scope] = {}
        for name, spec in self.mapping(value, "applications", None).items():
            key = f"applications.{name}"
            if name in (WHOLE_FLOW, LEGACY_ADHOC_SCOPE) or name.startswith(ADHOC_PREFIX) \
                    or not re.fullmatch(r"[\w.-]+", name):
                self.problems.append(self.error(key, "an application's name is letters, "
                                                     "digits, '.', '_' and '-', and does not "
                                                     f"start with '{ADHOC_PREFIX}'"))
                continue
            raw = self.mapping(spec, key, _APPLICATION_KEYS)
            topics = self.string_list(raw.get("topics"), f"{key}.topics", regex=True)
            if not topics:
                self.problems.append(self.error(f"{key}.topics", "an application names at "
                                                                 "least one topic regex"))
                continue
            groups = self.string_list(raw.get("groups"), f"{key}.groups", regex=True)
            out[name] = Scope(name, NameFilter(topics), NameFilter(groups))
        return out

    def state(self, value: Any) -> StateSettings:
        raw = self.mapping(value, "state", _STATE_KEYS)
        defaults = StateSettings()
        return StateSettings(
            dir=self.collect(lambda: self.resolve_path(
                self.string(raw.get("dir", ".drctl"), "state.dir")), defaults.dir),
            topic=self.collect(lambda: self.string(raw.get("topic", defaults.topic),
                                                   "state.topic"), defaults.topic),
            snapshots_topic=self.collect(lambda: self.string(
                raw.get("snapshots_topic", defaults.snapshots_topic), "state.snapshots_topic"),
                defaults.snapshots_topic),
        )

    def resolve_path(self, text: str) -> Path:
        p = Path(text).expanduser()
        return p if p.is_absolute() else (self.base_dir / p)

    def clusters(self, value: Any) -> tuple[dict[str, dict[str, str]],
                                            dict[str, dict[str, str | None]]]:
        """Each cluster's librdkafka properties, and its `java:` map where it has one (its
        `schema_registry:` goes to `self.registries`)."""
        raw = self.mapping(value, "clusters", None)
        if not raw:
            raise self.error("clusters", "at least one cluster is required")
        self.clusters_parsed = True
        clusters: dict[str, dict[str, str]] = {}
        java_clusters: dict[str, dict[str, str | None]] = {}
        for name, props in raw.items():
            key = f"clusters.{name}"
            if isinstance(props, Mapping) and SCHEMA_REGISTRY_KEY in props:
                registry = self.collect(partial(self.schema_registry,
                                                props[SCHEMA_REGISTRY_KEY],
                                                f"{key}.{SCHEMA_REGISTRY_KEY}"), None)
                if registry is not None:
                    self.registries[name] = registry
                props = {k: v for k, v in props.items() if k != SCHEMA_REGISTRY_KEY}
            if isinstance(props, Mapping) and JAVA_PROPERTIES_KEY in props:
                java_key = f"{key}.{JAVA_PROPERTIES_KEY}"
                java_clusters[name] = self.collect(
                    partial(self.java_properties, props[JAVA_PROPERTIES_KEY], java_key), {})
                props = {k: v for k, v in props.items() if k != JAVA_PROPERTIES_KEY}
            # A cluster with a bad property still counts, so references to it do not fail too.
            clusters[name] = self.collect(partial(self.cluster_properties, props, key), {})
        return clusters, java_clusters

    def java_properties(self, value: Any, key: str) -> dict[str, str | None]:
        """A cluster's `java:` map; a null value stays None (leave the property out)."""
        props: dict[str, str | None] = {}
        for prop, prop_value in self.mapping(value, key, None).items():
            if prop_value is None:
                props[prop] = None
                continue
            text = self.property_text(prop_value, key, prop)
            if text is not None:
                props[prop] = text
                # A JAAS line's password or client secret, should a message quote it alone.
                for option, option_value in JAAS_OPTION.findall(text):
                    if is_secret_key(option):
                        self.redactor.add(option_value)
        return props

    def property_text(self, value: Any, key: str, prop: str) -> str | None:
        """A client property's value as text (YAML booleans as Kafka writes them), secrets
        masked; None with the problem recorded."""
        if isinstance(value, bool):
            value = "true" if value else "false"
        return self.collect(partial(self.string, value, f"{key}.{prop}",
                                    secret=is_secret_key(prop)), None)

    def cluster_properties(self, value: Any, key: str) -> dict[str, str]:
        props_raw = dict(self.mapping(value, key, None))
        empty: dict[str, str] = {}
        resolved = self.collect(partial(self.client_properties,
                                        props_raw.pop(CLIENT_PROPERTIES_KEY, None),
                                        f"{key}.{CLIENT_PROPERTIES_KEY}"), empty)
        for prop, prop_value in props_raw.items():
            text = self.property_text(prop_value, key, prop)
            if text is not None:
                resolved[prop] = text
        if "bootstrap.servers" not in resolved:
            self.problems.append(self.error(key, "missing 'bootstrap.servers'"))
        return resolved

    def client_properties(self, value: Any, key: str) -> dict[str, str]:
        """A Kafka `.properties` file's settings, to lie under the cluster's own keys."""
        if value is None:
            return {}
        path = self.resolve_path(self.string(value, key))
        try:
            props = read_properties(path)
        except OSError as exc:
            raise self.error(key, f"cannot read {path}: {exc.strerror}") from exc
        except UnicodeDecodeError as exc:
            raise self.error(key, f"{path} is not UTF-8 text: {exc.reason}") from exc
        resolved: dict[str, str] = {}
        cluster_key = key.removesuffix(f".{CLIENT_PROPERTIES_KEY}")
        for prop, prop_value in props.items():
            self.remember(f"{cluster_key}.{prop}", prop_value)
            try:
                resolved[prop] = resolve_references(prop_value)
            except UnresolvedReference as exc:
                raise self.error(key, f"{path}: property '{prop}': unresolved reference: "
                                 f"{exc}") from exc
            if is_secret_key(prop):
                self.redactor.add(resolved[prop])
        return resolved

    def cluster_ref(self, value: Any, key: str, clusters: Mapping[str, Any]) -> str:
        name = self.string(value, key)
        if self.clusters_parsed and name not in clusters:
            raise self.error(key, f"unknown cluster '{name}' (configured: "
                             f"{', '.join(sorted(clusters))})", did_you_mean(name, clusters))
        return name

    def replication(self, value: Any, clusters: Mapping[str, Any],
                    key: str = "replication") -> ReplicationSettings | None:
        """One flow, under `key` (`replication`, or `topology.flows[i]`)."""
        raw = self.mapping(value, key, _REPLICATION_KEYS)
        missing = [f"{key}.{k}" for k in ("kind", "source", "target") if k not in raw]
        for name in missing:
            self.problems.append(self.error(name, "required key is missing"))
        kind = self.collect(lambda: self.kind(raw.get("kind"), key), None)
        # A missing one is recorded above: the rest of the section is still checked.
        source, target = (
            self.collect(partial(self.cluster_ref, raw[k], f"{key}.{k}", clusters), None)
            if k in raw else None for k in ("source", "target"))
        if source is not None and source == target:
            self.problems.append(self.error(f"{key}.target",
                                            "source and target are the same cluster"))
        rename = self.collect(lambda: self.rename(raw.get("rename", "{topic}"), kind, key),
                              None)
        connect = self.collect(lambda: self.connect(raw.get("connect"), key), ConnectSettings())
        topics = self.collect(lambda: self.name_filter(raw.get("topics"), f"{key}.topics"),
                              NameFilter())
        aliases = [self.collect(partial(self.optional_string, raw.get(k, default),
                                        f"{key}.{k}"), None)
                   for k, default in (("source_alias", source), ("target_alias", target))]
        group = self.collect(lambda: self.optional_string(raw.get("replicator_group"),
                                                          f"{key}.replicator_group"), None)
        principal = self.collect(lambda: self.principal(raw.get("principal"),
                                                        f"{key}.principal"), None)
        separator = self.collect(lambda: self.optional_string(
            raw.get("internal_separator"), f"{key}.internal_separator"), None)
        strimzi = None
        if raw.get("strimzi") is not None:
            strimzi = self.collect(lambda: self.strimzi(raw["strimzi"], kind, key), None)
        if (kind is None or source is None or target is None or rename is None
                or aliases[0] is None or aliases[1] is None):
            return None  # each missing piece is a recorded problem
        return ReplicationSettings(
            kind=kind,
            source=source,
            target=target,
            topics=topics,
            rename=rename,
            source_alias=aliases[0],
            target_alias=aliases[1],
            connect=connect,
            replicator_group=group,
            principal=principal,
            internal_separator=separator or None,
            strimzi=strimzi,
        )

    def strimzi(self, value: Any, kind: str | None, key: str = "replication"
                ) -> StrimziSettings | None:
        """`strimzi: {namespace, name, reverse_namespace, reverse_name, kubeconfig,
        context}`: the flow's KafkaMirrorMaker2 resource."""
        key = f"{key}.strimzi"
        raw = self.mapping(value, key, _STRIMZI_KEYS)
        if kind is not None and not kind_entry(kind).run_by_strimzi:
            raise self.error(key, f"Strimzi runs MirrorMaker 2, not {kind}",
                             "Set replication.kind: mirrormaker2, or remove strimzi.")
        names: dict[str, str | None] = {}
        for name in ("namespace", "name", "reverse_namespace", "reverse_name"):
            text = self.collect(partial(self.optional_string, raw.get(name), f"{key}.{name}"),
                                None)
            pattern = _K8S_NAMESPACE if name.endswith("namespace") else _K8S_NAME
            if text is not None and not pattern.fullmatch(text):
                self.problems.append(self.error(
                    f"{key}.{name}", f"'{text}' is not a Kubernetes "
                    f"{'namespace' if pattern is _K8S_NAMESPACE else 'object name'}",
                    "Lower-case letters, digits and '-' (names also '.'), starting and "
                    "ending with a letter or digit."))
                text = None
            names[name] = text
        for name in ("namespace", "name"):
            if name not in raw:
                self.problems.append(self.error(f"{key}.{name}", "required key is missing",
                                                "The KafkaMirrorMaker2 resource of the flow: "
                                                "its namespace and name."))
        if names["reverse_name"] is not None and names["reverse_namespace"] is None:
            self.problems.append(self.error(f"{key}.reverse_name",
                                            "set reverse_namespace too",
                                            "The reverse flow's resource lives in the other "
                                            "cluster's namespace."))
        kubeconfig = self.collect(partial(self.optional_string, raw.get("kubeconfig"),
                                          f"{key}.kubeconfig"), None)
        if kubeconfig is not None:
            resolved = self.resolve_path(kubeconfig)
            if not resolved.is_file():
                self.problems.append(self.error(f"{key}.kubeconfig",
                                                f"no such file: {resolved}"))
            kubeconfig = str(resolved)
        context = self.collect(partial(self.optional_string, raw.get("context"),
                                       f"{key}.context"), None)
        timeout = self.collect(partial(self.number, raw.get("timeout_s", 10.0),
                                       f"{key}.timeout_s"), 10.0)
        namespace, resource = names["namespace"], names["name"]
        if namespace is None or resource is None:
            return None
        return StrimziSettings(namespace, resource, names["reverse_namespace"],
                               names["reverse_name"], kubeconfig, context, timeout)

    def kind(self, value: Any, key: str = "replication") -> str | None:
        if value is None:
            return None  # recorded as missing
        kind = self.string(value, f"{key}.kind")
        if kind not in KIND_NAMES:
            raise self.error(f"{key}.kind", f"must be one of {', '.join(KIND_NAMES)}, "
                             f"got '{kind}'", did_you_mean(kind, KIND_NAMES))
        return kind

    def rename(self, value: Any, kind: str | None, key: str = "replication") -> str:
        rename = self.string(value, f"{key}.rename")
        if rename.count("{topic}") != 1:
            raise self.error(f"{key}.rename", "must contain '{topic}' exactly once, "
                             "e.g. '{topic}' (names kept) or 'primary.{topic}'")
        if kind is not None and kind_entry(kind).keeps_topic_names and rename != "{topic}":
            raise self.error(f"{key}.rename", f"{kind} mirrors keep topic names")
        return rename

    def connect(self, value: Any, key: str = "replication") -> ConnectSettings:
        connect_raw = self.mapping(value, f"{key}.connect", _CONNECT_KEYS)
        names: dict[str, Any] = {
            name: self.collect(partial(self.optional_string, connect_raw.get(name),
                                       f"{key}.connect.{name}"), None)
            for name in _CONNECT_KEYS if name not in _HTTP_KEYS}
        return ConnectSettings(**self.http_fields(connect_raw, f"{key}.connect"), **names)

    def topology(self, value: Any, clusters: Mapping[str, Any]) -> TopologySettings | None:
        """`topology: {kind: active-active, flows: [A -> B, B -> A], regions: {A: {groups:
        ...}}}`: two MirrorMaker 2 flows between the same two clusters, opposite ways."""
        raw = self.mapping(value, "topology", _TOPOLOGY_KEYS)
        kind = self.collect(lambda: self.string(raw.get("kind", ACTIVE_ACTIVE),
                                                "topology.kind"), None)
        if kind is not None and kind not in TOPOLOGY_KINDS:
            self.problems.append(self.error(
                "topology.kind", f"must be {' or '.join(TOPOLOGY_KINDS)}, got '{kind}'",
                "One flow (active/standby) is the `replication:` section, not a topology."))
            kind = None
        items = raw.get("flows")
        if not isinstance(items, list) or len(items) != 2:
            got = f"{len(items)} flow(s)" if isinstance(items, list) else type_name(items)
            self.problems.append(self.error(
                "topology.flows", f"an active-active pair is two flows, one each way; got "
                f"{got}", "E.g. [{source: primary, target: secondary, ...}, {source: "
                "secondary, target: primary, ...}]."))
            return None
        a, b = (self.collect(partial(self.replication, item, clusters, f"topology.flows[{i}]"),
                             None) for i, item in enumerate(items))
        if a is None or b is None or kind is None:
            return None  # each missing piece is a recorded problem
        if (a.source, a.target) != (b.target, b.source):
            self.problems.append(self.error(
                "topology.flows", f"the flows {a.source} -> {a.target} and {b.source} -> "
                f"{b.target} are not one each way between the same two clusters"))
            return None
        for i, flow in enumerate((a, b)):
            if not kind_entry(flow.kind).runs_both_ways:
                both = [n for n in KIND_NAMES if kind_entry(n).runs_both_ways]
                self.problems.append(self.error(
                    f"topology.flows[{i}].kind", f"an active-active pair runs "
                    f"{' or '.join(both)} both ways; {flow.kind} is not supported there yet"))
        regions: dict[str, NameFilter] = {}
        for name, spec in self.mapping(raw.get("regions"), "topology.regions", None).items():
            key = f"topology.regions.{name}"
            if name not in (a.source, a.target):
                self.problems.append(self.error(key, f"not a cluster of the pair "
                                                     f"({a.source}, {a.target})",
                                                did_you_mean(name, (a.source, a.target))))
                continue
            region = self.mapping(spec, key, _REGION_KEYS)
            regions[name] = self.collect(partial(self.name_filter, region.get("groups"),
                                                 f"{key}.groups"), NameFilter())
        # Each flow's copies on the other's source are named as the other flow names them.
        a, b = replace(a, reverse_rename=b.rename), replace(b, reverse_rename=a.rename)
        return TopologySettings(kind, (a, b), regions)

    def schema_registry(self, value: Any, key: str) -> HttpSettings:
        """A cluster's `schema_registry:` — where its consumers look schema ids up."""
        raw = self.mapping(value, key, _HTTP_KEYS)
        fields = self.http_fields(raw, key)
        if fields["url"] is None:
            raise self.error(f"{key}.url", "required key is missing",
                             "The registry's URL, e.g. https://registry:8081 (Apicurio: "
                             "https://host/apis/ccompat/v7).")
        return HttpSettings(**fields)

    def http_fields(self, raw: Mapping[str, Any], key: str) -> dict[str, Any]:
        """An HTTP endpoint's URL, login and TLS files (paths from this file's directory),
        each problem recorded under `key`."""
        fields: dict[str, Any] = {}
        for name in _HTTP_KEYS:
            if name == "timeout_s":
                fields[name] = self.collect(
                    partial(self.number, raw.get(name, 10.0), f"{key}.{name}"), 10.0)
            else:
                fields[name] = self.collect(
                    partial(self.optional_string, raw.get(name), f"{key}.{name}"), None)
                if name in _HTTP_FILE_KEYS and fields[name] is not None:
                    fields[name] = str(self.resolve_path(fields[name]))
        if fields["token"] is not None and fields["username"] is not None:
            self.problems.append(self.error(f"{key}.token",
                                            "set a token or a username, not both"))
        if fields["key_file"] is not None and fields["cert_file"] is None:
            self.problems.append(self.error(f"{key}.key_file",
                                            "a key without cert_file is never used"))
        return fields

    def principal(self, value: Any, key: str) -> str | None:
        if value is None:
            return None
        text = self.string(value, key)
        if not _PRINCIPAL.fullmatch(text):
            raise self.error(key, f"'{text}' is not a Kafka principal",
                             "Write it as Type:name, e.g. User:mirrormaker.")
        return text

    def spark(self, value: Any) -> SparkSettings:
        raw = self.mapping(value, "spark", _SPARK_KEYS)
        conf_raw: dict[str, Any] = self.collect(
            lambda: self.mapping(raw.get("conf"), "spark.conf", None), {})
        jar_names: tuple[str, ...] = self.collect(
            lambda: self.string_list(raw.get("jars"), "spark.jars"), ())
        jars = tuple(str(self.resolve_path(j)) for j in jar_names)
        packages: tuple[str, ...] = self.collect(
            lambda: self.string_list(raw.get("packages"), "spark.packages"), ())
        conf = {k: self.collect(partial(self.string, v, f"spark.conf.{k}"), "")
                for k, v in conf_raw.items()}
        remote = self.collect(lambda: self.spark_remote(raw), None)
        return SparkSettings(
            master=self.collect(lambda: self.string(raw.get("master", "local[*]"),
                                                    "spark.master"), "local[*]"),
            jars=jars,
            packages=packages,
            conf=conf,
            remote=remote,
        )

    def spark_remote(self, raw: Mapping[str, Any]) -> str | None:
        """`spark.remote`: a Spark Connect URL, as Spark Connect takes it
        (sc://host:port/;use_ssl=true;token=...). Where the job runs is one setting: the
        server's own classpath and master replace spark.master, spark.jars, spark.packages."""
        if raw.get("remote") is None:
            return None
        url = self.string(raw["remote"], "spark.remote")
        written = str(raw["remote"]).strip()
        if "${" in written:  # `config show` prints the references, never what they name
            self.references["spark.remote"] = written
        token = url_token(url)
        if token:
            self.redactor.add(token)
        if not re.fullmatch(r"sc://[^/;:\s]+(:\d+)?/?(;[^;=\s]+=[^;\s]*)*", url):
            raise self.error("spark.remote", f"'{mask_url_userinfo(url)}' is not a Spark "
                             "Connect URL",
                             "Write it as sc://HOST:PORT, with parameters after '/;', e.g. "
                             "sc://spark:15002/;use_ssl=true;token=${env:SPARK_TOKEN}.")
        both = [k for k in ("master", "jars", "packages") if raw.get(k)]
        if both:
            raise self.error("spark.remote", f"set together with spark.{both[0]}: a gap job "
                             "runs on the Spark Connect server, with its master and "
                             "classpath",
                             f"Remove spark.{both[0]} (it is for a job drctl starts itself), "
                             "or spark.remote.")
        return url

    def retry(self, value: Any) -> RetryPolicy:
        raw = self.mapping(value, "retry", _RETRY_KEYS)
        defaults = RetryPolicy()

        def number(name: str, default: float, **limits: Any) -> float:
            return self.collect(partial(self.number, raw.get(name, default), f"retry.{name}",
                                        **limits), default)

        deadline = raw.get("deadline_s")
        return RetryPolicy(
            initial_s=number("initial_s", defaults.initial_s),
            multiplier=number("multiplier", defaults.multiplier, minimum=1),
            max_s=number("max_s", defaults.max_s),
            attempts=int(number("attempts", defaults.attempts, integer=True, minimum=1)),
            deadline_s=None if deadline is None else number("deadline_s", 0.0),
        )

    def objectives(self, value: Any) -> Objectives:
        raw = self.mapping(value, "objectives", _OBJECTIVE_KEYS)
        seconds = {name: self.collect(partial(self.duration, raw[name], f"objectives.{name}"),
                                      None)
                   for name in _OBJECTIVE_KEYS if raw.get(name) is not None}
        return Objectives(rpo_s=seconds.get("rpo"), rto_s=seconds.get("rto"))


def type_name(value: Any) -> str:
    """How an error message names the type of a value read from YAML."""
    if value is None:
        return "nothing"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, bool):
        return "a boolean"
    return type(value).__name__


def config_as_data(config: Config) -> dict[str, Any]:
    """The resolved configuration under the file's own keys, so that `config show` output
    is a configuration drctl reads back: secrets masked, a value written as a reference
    (`${env:...}`, `${file:...}`) shown as that reference, relative paths resolved."""
    from drctl.secrets import mask_mapping

    rep = config.replication
    data: dict[str, Any] = {
        "clusters": {name: {**mask_mapping(props),
                            **({JAVA_PROPERTIES_KEY: mask_mapping(java)}
                               if (java := config.java_properties(name)) else {}),
                            **({SCHEMA_REGISTRY_KEY: http_data(registry)}
                               if (registry := config.schema_registries.get(name)) else {})}
                     for name, props in config.clusters.items()},
        "replication": None,
        "groups": {"include": list(config.groups.include),
                   "exclude": list(config.groups.exclude)},
        "state": {"dir": os.path.abspath(config.state.dir), "topic": config.state.topic,
                  "snapshots_topic": config.state.snapshots_topic},
        "spark": ({"remote": config.references.get("spark.remote")
                   or mask_url_userinfo(config.spark.remote),
                   "conf": mask_mapping(config.spark.conf)} if config.spark.remote else
                  {"master": config.spark.master,
                   "jars": [os.path.abspath(jar) for jar in config.spark.jars],
                   "packages": list(config.spark.packages),
                   "conf": mask_mapping(config.spark.conf)}),
        "retry": {"initial_s": config.retry.initial_s, "multiplier": config.retry.multiplier,
                  "max_s": config.retry.max_s, "attempts": config.retry.attempts,
                  "deadline_s": config.retry.deadline_s},
        "objectives": {name: None if seconds is None else f"{seconds:g}s"
                       for name, seconds in (("rpo", config.objectives.rpo_s),
                                             ("rto", config.objectives.rto_s))},
    }
    if config.applications:
        data["applications"] = {name: {"topics": list(app.topics.include),
                                       "groups": list(app.groups.include)}
                                for name, app in sorted(config.applications.items())}
    if rep is not None:
        data["replication"] = _flow_data(rep)
    topology = config.topology
    if topology is not None:
        del data["replication"]
        data["topology"] = {
            "kind": topology.kind, "flows": [_flow_data(flow) for flow in topology.flows],
            "regions": {name: {"groups": {"include": list(groups.include),
                                          "exclude": list(groups.exclude)}}
                        for name, groups in sorted(topology.region_groups.items())}}
    _put_references(data, config.references)
    redacted: dict[str, Any] = config.redactor.redact_data(data)
    return redacted


def _flow_data(rep: ReplicationSettings) -> dict[str, Any]:
    """One flow under the file's keys."""
    return {
        "kind": rep.kind, "source": rep.source, "target": rep.target,
        "topics": {"include": list(rep.topics.include), "exclude": list(rep.topics.exclude)},
        "rename": rep.rename, "source_alias": rep.source_alias,
        "target_alias": rep.target_alias, "replicator_group": rep.replicator_group,
        "principal": rep.principal, "internal_separator": rep.internal_separator,
        "connect": {
            **http_data(rep.connect),
            "source_connector": rep.connect.source_connector,
            "checkpoint_connector": rep.connect.checkpoint_connector,
            "heartbeat_connector": rep.connect.heartbeat_connector,
        },
        **({"strimzi": {
            "namespace": rep.strimzi.namespace, "name": rep.strimzi.name,
            "reverse_namespace": rep.strimzi.reverse_namespace,
            "reverse_name": rep.strimzi.reverse_name, "kubeconfig": rep.strimzi.kubeconfig,
            "context": rep.strimzi.context, "timeout_s": rep.strimzi.timeout_s,
        }} if rep.strimzi is not None else {}),
    }


def http_data(endpoint: HttpSettings) -> dict[str, Any]:
    """An HTTP endpoint's settings under the file's keys, secrets masked."""
    from drctl.secrets import mask_mapping

    return mask_mapping({
        "url": endpoint.url, "username": endpoint.username, "password": endpoint.password,
        "token": endpoint.token,
        **{key: os.path.abspath(path) if path else None for key, path in (
            ("ca_file", endpoint.ca_file), ("cert_file", endpoint.cert_file),
            ("key_file", endpoint.key_file))},
        "timeout_s": endpoint.timeout_s})


def config_context(config: Config) -> dict[str, Any]:
    """The configuration as runbooks see it (`config.replication.source`): its data, and
    `config.path`, the file it was read from."""
    return {"path": str(config.path) if config.path else None, **config_as_data(config)}


def _put_references(data: dict[str, Any], references: Mapping[str, str],
                    prefix: str = "") -> None:
    """Each value written as a reference back to that reference (key paths as the parser
    names them: `clusters.primary.sasl.password`)."""
    for key, value in data.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict):
            _put_references(value, references, f"{path}.")
        elif isinstance(value, list) and all(isinstance(v, dict) for v in value):
            for i, item in enumerate(value):  # a topology's flows: `topology.flows[0].…`
                _put_references(item, references, f"{path}[{i}].")
        elif path in references:
            data[key] = references[path]
