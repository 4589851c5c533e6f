"""The lab: two single-node KRaft clusters and a Kafka Connect worker running MirrorMaker 2,
all on loopback, all stoppable. State lives in one directory (`lab.json` plus a folder per
process), so any later drctl process can find, stop, fail or heal what an earlier one started.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import os
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import yaml

from drctl.errors import DrctlError, LabError
from drctl.gap.class_archive import ClassArchive, recorded_by
from drctl.kafka.clients import ClusterClients, cluster_metadata, describe
from drctl.kafka.connect_rest import ConnectClient, ConnectError
from drctl.kafka.mm2_connectors import MirrorFlow
from drctl.kafka_release import kafka_release
from drctl.lab.jars import KafkaDistribution, java_major, require_java, resolve_kafka
from drctl.lab.kube import KubePorts
from drctl.lab.processes import ManagedProcess, port_in_use, wait_until
from drctl.lab.registry import DEFAULT_PORT, LabRegistries, registry_ports, registry_url
from drctl.lab.security import (
    CONNECT_REST_USER,
    MM2_PRINCIPAL,
    PLAIN,
    LabCredentials,
    broker_listener_properties,
    connect_jvm_options,
    connect_worker_properties,
    create_scram_users,
    drctl_client_properties,
    drctl_mtls_properties,
    drctl_oauthbearer_properties,
    mm2_java_properties,
    mm2_source_acls,
    mm2_target_acls,
    write_private,
)
from drctl.lab.spark_cluster import SparkCluster, SparkClusterPorts, spark_config
from drctl.lab.spark_connect import SparkConnectServer, remote_url
from drctl.lab.strimzi_lab import RESOURCE_NAME, StrimziPlatform, connector_names
from drctl.lab.workload import WorkloadSpec
from drctl.progress import Notify
from drctl.retry import RetryPolicy, WaitTimedOut, wait_for

COMPONENTS = ("primary", "secondary", "connect")
# What MirrorMaker 2 copies: one flow primary -> secondary (active/standby), or a flow each way
# with prefixed names (`lab up --topology active-active`).
ONE_WAY, ACTIVE_ACTIVE = "one-way", "active-active"
TOPOLOGIES = (ONE_WAY, ACTIVE_ACTIVE)
OWN_SERVER, NO_SERVER = "own", "none"
CONNECT_PLATFORM, STRIMZI = "connect", "strimzi"
PLATFORMS = (CONNECT_PLATFORM, STRIMZI)
FAILABLE = {"primary": "primary", "secondary": "secondary", "replication": "connect",
            "connect": "connect"}

BROKER_HEAP = os.environ.get("DRCTL_LAB_BROKER_HEAP", "384m")
CONNECT_GROUP = "drctl-lab-connect"
# The secure lab's other logins for drctl, each with a config of its own (secure_config_file);
# drctl.yaml uses SCRAM-SHA-512.
SECURE_LOGINS = ("mtls", "oauthbearer")
CONNECT_HEAP = os.environ.get("DRCTL_LAB_CONNECT_HEAP", "512m")
# The lab's JVMs are small and often restarted (every outage of a drill or a test): C1 alone
# compiles for them. Measured on 2 cores: a broker's start plus 10 s costs 3.0 s of CPU
# instead of 4.8 s, a Connect worker's 2.8 s instead of 4.5 s, and a restart is ready sooner.
_JVM_COMMON = ["-XX:+UseSerialGC", "-XX:MaxMetaspaceSize=160m", "-XX:ReservedCodeCacheSize=64m",
               "-Xss512k", "-XX:MaxDirectMemorySize=128m", "-Djava.awt.headless=true",
               "-XX:TieredStopAtLevel=1"]


@dataclass(frozen=True)
class LabPorts:
    primary: int = 19092
    secondary: int = 29092
    connect: int = 18083
    spark_master: int = 17077  # with --spark-workers; web UIs on the next ports
    spark_connect: int = 17002  # the lab's Spark Connect server (gRPC)
    kube_api: int = 16443  # --platform strimzi: kube-apiserver (HTTPS)
    etcd: int = 12379  # --platform strimzi: etcd's client port (peer: + 1)

    @property
    def kube(self) -> KubePorts:
        return KubePorts(self.kube_api, self.etcd)

    def controller(self, broker_port: int) -> int:
        return broker_port + 1

    def mtls(self, broker_port: int) -> int:
        """The secure lab's client-certificate (SSL) listener."""
        return broker_port + 2


@dataclass
class LabState:
    """What `lab up` decided; written to `lab.json` and read by every later lab command."""

    ports: LabPorts
    kafka_version: str
    lib_dir: str
    kafka_source: str
    names_kept: bool
    cluster_ids: dict[str, str] = field(default_factory=dict)
    spark_workers: int = 0  # a Spark standalone cluster with this many workers; 0: none
    secure: bool = False  # TLS, SASL, mTLS + authorizer (drctl/lab/security.py)
    # A schema registry per cluster (drctl/lab/registry.py), cluster -> port; empty: none.
    registry_ports: dict[str, int] = field(default_factory=dict)
    # Where the config's gap jobs run (spark.remote): OWN_SERVER, the lab's Spark Connect
    # server (`drctl lab up`); NO_SERVER, a local job of their own (a lab from before); or an
    # sc:// URL, a server the lab shares (a test worker's). A Spark cluster (spark_workers)
    # takes them instead.
    spark_connect: str = "none"
    # MirrorMaker 2's exclude lists under their old names (topics.blacklist,
    # groups.blacklist), as connectors set up years ago are: Kafka 3.x only.
    legacy_keys: bool = False
    topology: str = ONE_WAY  # ONE_WAY or ACTIVE_ACTIVE (always prefixed)
    # MirrorMaker 2's replication.policy.separator (`lab up --separator`): its prefixed names
    # and its internal topics' (an estate's `_`, which metrics stores prefer).
    separator: str = "."
    # Who runs MirrorMaker 2's connectors: CONNECT_PLATFORM, the lab through Connect's REST
    # API; STRIMZI, the lab's operator from a KafkaMirrorMaker2 resource on a real Kubernetes
    # API server (drctl/lab/strimzi_lab.py), of Strimzi API version `crd_version`.
    platform: str = "connect"
    crd_version: str = "v1"

    @property
    def strimzi(self) -> bool:
        return self.platform == STRIMZI

    @property
    def topic_naming(self) -> str:
        return "kept" if self.names_kept else "prefixed"

    @property
    def active_active(self) -> bool:
        return self.topology == ACTIVE_ACTIVE


def _new_cluster_id() -> str:
    # The storage tool would read an id starting with "-" as an option.
    while True:
        cid = base64.urlsafe_b64encode(os.urandom(16)).rstrip(b"=").decode()
        if not cid.startswith("-"):
            return cid


class Lab:
    def __init__(self, directory: Path) -> None:
        self.dir = directory.resolve()

    # -- layout ---------------------------------------------------------------------------

    @property
    def state_file(self) -> Path:
        return self.dir / "lab.json"

    @property
    def config_file(self) -> Path:
        return self.dir / "drctl.yaml"

    def process(self, component: str) -> ManagedProcess:
        # The config path in the command line tells our JVMs apart from anyone else's.
        return ManagedProcess(component, self.dir / component,
                              signature=str(self.dir / component))

    def load_state(self) -> LabState:
        try:
            raw = json.loads(self.state_file.read_text())
        except FileNotFoundError:
            raise LabError(f"No lab in {self.dir}.",
                           "Start one with `drctl lab up` (or pass --dir).") from None
        raw["ports"] = LabPorts(**raw["ports"])
        return LabState(**raw)

    def save_state(self, state: LabState) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        self.state_file.write_text(json.dumps(asdict(state), indent=2))

    def bootstrap(self, state: LabState, cluster: str) -> str:
        if cluster not in ("primary", "secondary"):
            raise LabError(f"The lab has no cluster '{cluster}'.", "Use primary or secondary.")
        return f"127.0.0.1:{getattr(state.ports, cluster)}"

    @property
    def credentials(self) -> LabCredentials:
        return LabCredentials(self.dir / "credentials")

    def client_properties(self, state: LabState, cluster: str) -> dict[str, str]:
        """librdkafka properties for drctl's principal on a lab cluster."""
        props = {"bootstrap.servers": self.bootstrap(state, cluster)}
        if state.secure:
            props.update(drctl_client_properties(self.credentials, by_reference=False,
                                                 mechanism=PLAIN))
        return props

    def clients(self, state: LabState, cluster: str) -> ClusterClients:
        return ClusterClients(cluster, self.client_properties(state, cluster))

    def flow(self, state: LabState) -> MirrorFlow:
        java = mm2_java_properties(self.credentials) if state.secure else {}
        return MirrorFlow("primary", "secondary", self.bootstrap(state, "primary"),
                          self.bootstrap(state, "secondary"), names_kept=state.names_kept,
                          fast=True, source_client=java, target_client=java,
                          legacy_keys=state.legacy_keys, separator=state.separator)

    def flows(self, state: LabState) -> list[MirrorFlow]:
        """What the lab's MirrorMaker 2 runs: the flow primary -> secondary and, active-active,
        secondary -> primary too (both prefixing names: kept both ways would loop)."""
        forward = self.flow(state)
        if not state.active_active:
            return [forward]
        return [forward, MirrorFlow("secondary", "primary", forward.target_bootstrap,
                                    forward.source_bootstrap, names_kept=False, fast=True,
                                    separator=state.separator)]

    def connector_names(self, state: LabState, flow: MirrorFlow) -> dict[str, str]:
        """Role (source, checkpoint, heartbeat) -> connector name: the lab's own names, or
        Strimzi's under --platform strimzi."""
        if state.strimzi:
            return connector_names(flow, state.crd_version)
        return flow.connector_names()

    @property
    def strimzi(self) -> StrimziPlatform:
        return StrimziPlatform(self.dir)

    def connect_url(self, state: LabState) -> str:
        return f"{'https' if state.secure else 'http'}://127.0.0.1:{state.ports.connect}"

    def connect_client(self, state: LabState, *, deadline_s: float | None = None
                       ) -> ConnectClient:
        """One attempt per call: the lab's own waits retry, and watch the process meanwhile.
        With `deadline_s`, a call is asked again within it while Connect answers transiently,
        as drctl's own client is (a read right after a config change can meet the rebalance
        it causes: 500, "a rebalance is expected")."""
        policy = (RetryPolicy(attempts=1) if deadline_s is None
                  else RetryPolicy(initial_s=0.5, max_s=2.0).with_deadline(deadline_s))
        auth: dict[str, Any] = ({"username": CONNECT_REST_USER,
                                  "password": self.credentials.connect_password(),
                                  "ca_file": str(self.credentials.ca_file)}
                                 if state.secure else {})
        return ConnectClient(self.connect_url(state), timeout_s=10, policy=policy, **auth)

    def spark_cluster(self, ports: LabPorts) -> SparkCluster:
        return SparkCluster(self.dir, SparkClusterPorts(ports.spark_master))

    @property
    def registries(self) -> LabRegistries:
        return LabRegistries(self.dir)

    def spark_server(self, ports: LabPorts) -> SparkConnectServer:
        return SparkConnectServer(self.dir, ports.spark_connect)

    def spark_remote(self, state: LabState) -> str | None:
        """The `spark.remote` the lab's config gets, None for a local job (or a cluster)."""
        if state.spark_workers or state.spark_connect == NO_SERVER:
            return None
        if state.spark_connect == OWN_SERVER:
            return remote_url(state.ports.spark_connect)
        return state.spark_connect

    # -- up -------------------------------------------------------------------------------

    def up(self, *, ports: LabPorts = LabPorts(), kafka_version: str | None = None,
           names_kept: bool = True, spark_workers: int | None = None, secure: bool = False,
           schema_registry: bool | None = None, registry_port: int = DEFAULT_PORT,
           spark_connect: str | None = None, legacy_keys: bool | None = None,
           topology: str = ONE_WAY, separator: str | None = None,
           platform: str | None = None, crd_version: str | None = None,
           notify: Notify = lambda _: None) -> LabState:
        """Start what is not running; `spark_workers` None keeps the lab's Spark cluster as
        it was (none for a new lab), `schema_registry` None its schema registries,
        `spark_connect` None its Spark Connect server (the lab's: none for a new lab;
        LabState.spark_connect), and `legacy_keys` None its connectors' key names.
        `topology` ACTIVE_ACTIVE runs MirrorMaker 2 both ways, names prefixed; `separator`
        MirrorMaker 2's replication.policy.separator (None: the lab's; '.' for a new lab).
        `platform` STRIMZI runs the connectors from KafkaMirrorMaker2 resources of Strimzi
        API version `crd_version` (v1, v1beta2) through the lab's operator (None: the lab's;
        CONNECT_PLATFORM and v1 for a new lab)."""
        if platform == STRIMZI and (secure or legacy_keys):
            raise LabError("The Strimzi lab runs without --secure and --legacy-keys.",
                           "Leave them out, or start a lab without --platform strimzi.")
        if topology == ACTIVE_ACTIVE and (names_kept or secure):
            raise LabError("An active-active lab prefixes topic names (kept both ways would "
                           "loop) and runs without --secure.",
                           "Start it with `drctl lab up --topology active-active`.")
        existing = self._existing_state()
        if existing is not None:
            platform = platform or existing.platform
            crd_version = crd_version or existing.crd_version
            if (existing.platform, existing.crd_version) != (platform, crd_version) and not (
                    platform == existing.platform == CONNECT_PLATFORM):
                raise LabError(f"The lab in {self.dir} runs on platform {existing.platform}"
                               + (f" ({existing.crd_version})" if existing.strimzi else "")
                               + ".", "Run `drctl lab down --purge` first to start one on "
                               "another platform.")
            if existing.topology != topology:
                raise LabError(f"The lab in {self.dir} runs the {existing.topology} topology.",
                               "Run `drctl lab down --purge` first to start one with another "
                               "topology.")
            if existing.names_kept != names_kept:
                raise LabError(
                    f"The lab in {self.dir} replicates with topic naming "
                    f"'{existing.topic_naming}'.",
                    "Run `drctl lab down --purge` first to start one with another naming.")
            if separator is not None and existing.separator != separator:
                raise LabError(f"The lab in {self.dir} runs MirrorMaker 2 with separator "
                               f"'{existing.separator}'.",
                               "Run `drctl lab down --purge` first to start one with another "
                               "separator.")
            if existing.secure != secure:
                raise LabError(
                    f"The lab in {self.dir} runs {'with' if existing.secure else 'without'} "
                    "--secure.",
                    "Run `drctl lab down --purge` first to start one the other way.")
            state = existing
        else:
            java = require_java()
            if java_major(java) < 17:
                raise LabError(f"{java} is older than Java 17, which Kafka 4 needs.",
                               "Install a JDK 17 or set JAVA_HOME to one.")
            notify("Resolving Kafka jars (first run downloads them from Maven Central)")
            dist = resolve_kafka(kafka_version, log_dir=self.dir)
            state = LabState(ports, dist.version, str(dist.lib_dir), dist.source, names_kept,
                             {c: _new_cluster_id() for c in ("primary", "secondary")},
                             secure=secure, spark_connect=spark_connect or NO_SERVER,
                             topology=topology, separator=separator or ".",
                             platform=platform or CONNECT_PLATFORM,
                             crd_version=crd_version or "v1")
            self.save_state(state)
        if state.secure:
            LabCredentials.ensure(self.credentials.directory)
        dist = KafkaDistribution(state.kafka_version, Path(state.lib_dir), state.kafka_source)
        if legacy_keys is not None and legacy_keys != state.legacy_keys:
            if legacy_keys and dist.major >= 4:
                raise LabError(f"Kafka {dist.version} no longer reads topics.blacklist and "
                               "groups.blacklist (Kafka 4.0 dropped them).",
                               "Start a Kafka 3.x lab for them: `drctl lab up --kafka-version "
                               "3.9.x --legacy-keys` (in another --dir, or after `drctl lab "
                               "down --purge`).")
            state.legacy_keys = legacy_keys
            self.save_state(state)
        notify(f"Kafka {dist.version} ({dist.source}: {dist.lib_dir})")

        self._check_ports(state)
        if state.strimzi:
            self.strimzi.server.check_ports(state.ports.kube)
        for cluster in ("primary", "secondary"):
            self._start_broker(state, dist, cluster)
        for cluster in ("primary", "secondary"):
            notify(f"Waiting for {cluster} on {self.bootstrap(state, cluster)}")
            self._wait_broker(state, cluster)
        if state.secure:
            notify(f"Granting MirrorMaker 2 ({MM2_PRINCIPAL}) its ACLs and SCRAM users")
            self._grant_mm2(state)
        notify(f"Starting the Connect worker on 127.0.0.1:{state.ports.connect}")
        self._start_connect(state, dist)
        self._wait_connect(state)
        if state.strimzi:
            notify("MirrorMaker 2 as Strimzi runs it: KafkaMirrorMaker2 resources ("
                   + ", ".join(f"{f.target_alias}/{RESOURCE_NAME}" for f in self.flows(state))
                   + ") on a Kubernetes API server, the lab's operator reconciling them")
            self.strimzi.up(state.ports.kube, state.crd_version, self.flows(state),
                            kafka_version=state.kafka_version,
                            connect_url=self.connect_url(state), connect_group=CONNECT_GROUP,
                            notify=notify)
        else:
            notify("Configuring MirrorMaker 2 connectors ("
                   + ", ".join(f"{f.source_alias} -> {f.target_alias}"
                               for f in self.flows(state)) + ")")
            self._ensure_connectors(state)
        if (spark_workers is not None and spark_workers != state.spark_workers) or (
                spark_connect is not None and spark_connect != state.spark_connect):
            state.spark_workers = state.spark_workers if spark_workers is None \
                else spark_workers
            state.spark_connect = spark_connect or state.spark_connect
            self.save_state(state)  # first, so `lab down` finds the daemons if a start fails
        self.spark_cluster(state.ports).up(state.spark_workers, notify)
        if schema_registry is not None:
            state.registry_ports = registry_ports(registry_port) if schema_registry else {}
            self.save_state(state)  # first, so `lab down` finds them if a start fails
        self.registries.up(state.registry_ports, notify)
        if not self.spark_server(state.ports).process().is_running() and \
                ports.spark_connect != state.ports.spark_connect:
            # A server that is not running starts where asked (a lab from before it had one).
            state.ports = dataclasses.replace(state.ports, spark_connect=ports.spark_connect)
            self.save_state(state)
        server = self.spark_server(state.ports)
        if self.spark_remote(state) == server.url:
            server.up(notify)
        else:
            server.down()
        self.write_config(state)
        return state

    def _existing_state(self) -> LabState | None:
        if not self.state_file.exists():
            return None
        return self.load_state()

    def _check_ports(self, state: LabState) -> None:
        wanted = {cluster: [port, state.ports.controller(port),
                            *([state.ports.mtls(port)] if state.secure else [])]
                  for cluster, port in (("primary", state.ports.primary),
                                        ("secondary", state.ports.secondary))}
        wanted["connect"] = [state.ports.connect]
        for component, ports in wanted.items():
            if self.process(component).is_running():
                continue
            for port in ports:
                if port_in_use(port):
                    raise LabError(
                        f"Port {port} on 127.0.0.1 (for the lab's {component}) is in use by "
                        "another process.",
                        "Stop that process (is another lab running? `drctl lab down --dir ...`) "
                        "or choose other ports with --primary-port/--secondary-port/"
                        "--connect-port.")

    def _log_config(self, dist: KafkaDistribution, workdir: Path, name: str) -> list[str]:
        log_file = workdir / f"{name}.log"
        if dist.major >= 4:
            cfg = workdir / "log4j2.properties"
            cfg.write_text(
                "status = error\n"
                "appender.file.type = File\n"
                "appender.file.name = FILE\n"
                f"appender.file.fileName = {log_file}\n"
                "appender.file.layout.type = PatternLayout\n"
                "appender.file.layout.pattern = [%d] %p %m (%c)%n\n"
                "rootLogger.level = INFO\n"
                "rootLogger.appenderRef.file.ref = FILE\n"
                "logger.reflections.name = org.reflections\n"
                "logger.reflections.level = ERROR\n")
            return [f"-Dlog4j2.configurationFile={cfg}"]
        cfg = workdir / "log4j.properties"
        cfg.write_text(
            "log4j.rootLogger=INFO, file\n"
            "log4j.appender.file=org.apache.log4j.FileAppender\n"
            f"log4j.appender.file.File={log_file}\n"
            "log4j.appender.file.layout=org.apache.log4j.PatternLayout\n"
            "log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n\n"
            "log4j.logger.org.reflections=ERROR\n")
        return [f"-Dlog4j.configuration=file:{cfg}"]

    def _start_broker(self, state: LabState, dist: KafkaDistribution, cluster: str) -> None:
        proc = self.process(cluster)
        if proc.is_running():
            return
        workdir = proc.workdir
        data = workdir / "data"
        data.mkdir(parents=True, exist_ok=True)
        port = getattr(state.ports, cluster)
        cport = state.ports.controller(port)
        props = workdir / "server.properties"
        listeners = broker_listener_properties(self.credentials, port, cport,
                                               state.ports.mtls(port)) if state.secure \
            else [f"listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{cport}",
                  f"advertised.listeners=PLAINTEXT://127.0.0.1:{port}",
                  "controller.listener.names=CONTROLLER",
                  "inter.broker.listener.name=PLAINTEXT",
                  "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT"]
        # Owner-only: in secure mode it holds the broker's JAAS passwords.
        write_private(props, "\n".join([
            "process.roles=broker,controller",
            "node.id=1",
            f"controller.quorum.voters=1@127.0.0.1:{cport}",
            *listeners,
            f"log.dirs={data}",
            "num.partitions=1",
            "auto.create.topics.enable=false",
            "offsets.topic.replication.factor=1",
            "offsets.topic.num.partitions=10",
            "transaction.state.log.replication.factor=1",
            "transaction.state.log.min.isr=1",
            "transaction.state.log.num.partitions=4",
            "share.coordinator.state.topic.replication.factor=1",
            "share.coordinator.state.topic.min.isr=1",
            "group.initial.rebalance.delay.ms=0",
            "num.network.threads=2",
            "num.io.threads=4",
            "background.threads=2",
            "log.cleaner.dedupe.buffer.size=16777216",
            "log.cleaner.threads=1",
            # Drills and tests wait for compaction: look for dirty logs every second, not 15.
            "log.cleaner.backoff.ms=1000",
            # A broker killed and started again registers anew only once the controller has
            # given up on its old session: 9 s by default, a third of every restart.
            "broker.session.timeout.ms=2000",
            "broker.heartbeat.interval.ms=500",
            "num.recovery.threads.per.data.dir=2",
            # An idle lab (one waits while its worker's tests run on another lab): the
            # controller appends a no-op record to the metadata log every 500 ms by default,
            # which it writes and the broker fetches and applies. Not the consumers' own
            # fetch.max.wait.ms: a source task's consumer closing at a reconfiguration (every
            # new topic) waits for its fetch in flight, and a new topic's first records with it.
            "metadata.max.idle.interval.ms=5000",
            "",
        ]))
        log_opts = self._log_config(dist, workdir, cluster)
        java = require_java()
        if not (data / "meta.properties").exists():
            import subprocess

            archive = dist.class_archive(java, "format")
            cmd = [java, "-Xmx256m", *_JVM_COMMON, *_archive_options(archive), "-cp",
                   dist.classpath, *log_opts, "kafka.tools.StorageTool", "format", "-t",
                   state.cluster_ids[cluster], "-c", str(props)]
            fmt = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
            if fmt.returncode != 0 and not (data / "meta.properties").exists():
                # Seen once under heavy load; a second try costs a second.
                fmt = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
            _keep_recorded(archive, fmt.returncode == 0)
            if fmt.returncode != 0 and not (data / "meta.properties").exists():
                (workdir / "format.log").write_text(fmt.stdout + fmt.stderr)
                raise LabError(f"Formatting the {cluster} log dir failed.",
                               f"Read {workdir / 'format.log'}.")
        proc.start([java, "-Xms64m", f"-Xmx{BROKER_HEAP}", *_JVM_COMMON, *log_opts,
                    *_archive_options(dist.class_archive(java, "broker")),
                    "-cp", dist.classpath, "kafka.Kafka", str(props)])

    def _wait_broker(self, state: LabState, cluster: str) -> None:
        proc = self.process(cluster)
        clients = self.clients(state, cluster)

        def ready() -> bool:
            # Answering is not enough after a restart: every partition needs its leader back.
            if describe(clients, timeout_s=2).broker_count < 1:
                return False
            # A probe: its own short deadline, the wait around it is the long one.
            topics = cluster_metadata(clients, timeout_s=5, deadline_s=5).topics.values()
            return all(p.leader >= 0 for t in topics for p in t.partitions.values())

        wait_until(ready, deadline_s=90, what=f"Kafka broker '{cluster}'",
                   log_file=proc.log_file, alive=proc.is_running)

    def _start_connect(self, state: LabState, dist: KafkaDistribution) -> None:
        proc = self.process("connect")
        if proc.is_running():
            return
        workdir = proc.workdir
        workdir.mkdir(parents=True, exist_ok=True)
        props = workdir / "worker.properties"
        port = state.ports.connect
        # Owner-only: in secure mode it holds the REST keystore's password.
        write_private(props, "\n".join([
            f"bootstrap.servers={self.bootstrap(state, 'secondary')}",
            f"group.id={CONNECT_GROUP}",
            "key.converter=org.apache.kafka.connect.converters.ByteArrayConverter",
            "value.converter=org.apache.kafka.connect.converters.ByteArrayConverter",
            "config.storage.topic=connect-configs.internal",
            "offset.storage.topic=connect-offsets.internal",
            "status.storage.topic=connect-status.internal",
            "config.storage.replication.factor=1",
            "offset.storage.replication.factor=1",
            "status.storage.replication.factor=1",
            "offset.storage.partitions=1",
            "status.storage.partitions=1",
            "offset.flush.interval.ms=1000",
            # The worker's own readers of its config, offset and status topics (not the
            # connectors' clients, configured per connector): an idle one asked the secondary
            # for records twice a second each. A record written answers a waiting fetch at
            # once. Measured on an idle lab: 7.0 fetches/s to 1.4, the secondary's broker
            # 3.5 % of a core to 2.7 %, Connect 1.8 % to 1.5 %.
            "fetch.max.wait.ms=5000",
            # Kafka's own plugins all carry ServiceLoader manifests: reflective scanning of
            # the classpath costs 2.5 s of a core at every worker start.
            "plugin.discovery=service_load",
            # No rebootstrap loop while the secondary restarts (see mm2_connectors.py).
            "metadata.recovery.strategy=none",
            *([] if state.secure else [f"listeners=http://127.0.0.1:{port}"]),
            "rest.advertised.host.name=127.0.0.1",
            f"rest.advertised.port={port}",
            "connector.client.config.override.policy=All",
            "scheduled.rebalance.max.delay.ms=0",
            # A connector whose source is gone hangs in its stop until this runs out.
            "task.shutdown.graceful.timeout.ms=1000",
            *(connect_worker_properties(self.credentials, port) if state.secure else []),
            "",
        ]))
        log_opts = self._log_config(dist, workdir, "connect")
        java = require_java()
        jaas = connect_jvm_options(self.credentials) if state.secure else []
        proc.start([java, "-Xms64m", f"-Xmx{CONNECT_HEAP}", *_JVM_COMMON, *log_opts, *jaas,
                    *_archive_options(dist.class_archive(java, "connect")),
                    "-cp", dist.classpath, "org.apache.kafka.connect.cli.ConnectDistributed",
                    str(props)])

    def _grant_mm2(self, state: LabState) -> None:
        from drctl.kafka.acls import grant

        grant(self.clients(state, "primary").admin(), mm2_source_acls())
        grant(self.clients(state, "secondary").admin(),
              mm2_target_acls(self.flow(state).source_alias, CONNECT_GROUP))
        for cluster in ("primary", "secondary"):
            create_scram_users(self.clients(state, cluster).admin(), self.credentials)

    def _wait_connect(self, state: LabState) -> None:
        """Until the worker has joined its group and started its share of the connectors.
        Its REST API answers seconds before that (the wait for a killed worker's session
        to expire), with the last incarnation's statuses from the status topic, and holds a
        stop or a config change until then."""
        proc = self.process("connect")
        client = self.connect_client(state)

        def started() -> bool:
            version = str(client.info().get("version", ""))
            if not version or client.connectors() is None:
                return False
            release = kafka_release(version)
            if release is not None and release.at_least(3, 9):
                # GET /health (KIP-1017, Kafka 3.9) answers 200 only once the herder runs.
                client.request("GET", "/health")
            return True

        wait_until(started, deadline_s=120, what="Kafka Connect worker",
                   log_file=proc.log_file, alive=proc.is_running)

    def _ensure_connectors(self, state: LabState) -> None:
        client = self.connect_client(state)
        proc = self.process("connect")
        self._refuse_cycle(state, client)
        try:
            current = client.connector_configs()
        except DrctlError:
            current = {}  # Connect is just starting: every connector is put below
        wanted = {name: cfg for flow in self.flows(state)
                  for name, cfg in flow.connectors().items()}
        for name, cfg in wanted.items():
            # A connector already as wanted is left alone: a PUT restarts it and its tasks
            # (and rebalances the worker) for nothing.
            if {k: v for k, v in current.get(name, {}).items() if k != "name"} != cfg:
                # PUT /config is create-or-update; Connect may still be joining its group.
                def create(n: str = name, c: dict[str, str] = cfg) -> bool:
                    client.put_config(n, c)
                    return True

                wait_until(create, deadline_s=60, what=f"creating connector {name}",
                           log_file=proc.log_file, alive=proc.is_running)
            else:
                # What a PUT would have repaired; Connect answers 409 for a moment after
                # another connector's change, so it is asked again.
                def restart_failed(n: str = name) -> bool:
                    client.restart_failed(n)
                    return True

                wait_until(restart_failed, deadline_s=60, what=f"restarting connector {name}",
                           log_file=proc.log_file, alive=proc.is_running)
            # Resume unconditionally (a no-op when running): right after a config update the
            # status can still read RUNNING for a connector whose target state is STOPPED.
            def resume(n: str = name) -> bool:
                client.resume(n)
                return True

            wait_until(resume, deadline_s=30, what=f"resuming connector {name}",
                       log_file=proc.log_file, alive=proc.is_running)
        for name in wanted:
            # Running, and the worker past its rebalance: a connector's config answers (for
            # a moment after a connector changed — a reverse flow deleted — Connect answers
            # "a rebalance is expected", and the next caller's first request failed on it).
            def running(n: str = name) -> bool:
                return _running(client, n) and bool(client.config(n))

            wait_until(running, deadline_s=90,
                       what=f"connector {name}", log_file=proc.log_file, alive=proc.is_running)

    def _refuse_cycle(self, state: LabState, client: ConnectClient) -> None:
        """With names kept, the forward flow must not start while a reverse flow (left by a
        failback) copies: the two would form a cycle."""
        if not state.names_kept or state.active_active:
            return
        flow = self.flow(state)
        reverse = MirrorFlow(flow.target_alias, flow.source_alias, "", "").connector_names()
        try:
            names = client.connectors()
            running = [n for n in reverse.values() if n in names
                       and client.connector_state(n)[0] not in ("STOPPED", "PAUSED")]
        except DrctlError:
            return  # Connect is just starting: the connectors wait below reads it again
        if running:
            raise LabError(
                f"The reverse flow {', '.join(running)} runs: starting the forward one too "
                "would form a cycle (topic names are kept).",
                "Run `drctl reprotect` (it retires the reverse flow and restarts the forward "
                "one), or delete the reverse connector first.")

    def _wait_connectors_settled(self, state: LabState) -> None:
        client = self.connect_client(state)
        proc = self.process("connect")

        def settled() -> bool:
            names = client.connectors()
            states = [client.connector_state(n) for n in names]
            # A FAILED task is settled too: it stays so until restarted (a replication fence
            # fails MirrorMaker 2's task on authorization as soon as it copies).
            return all(s in ("RUNNING", "PAUSED", "STOPPED") and
                       all(t in ("RUNNING", "PAUSED", "FAILED") for t in tasks)
                       for s, tasks in states)

        wait_until(settled, deadline_s=90, what="connectors after restart",
                   log_file=proc.log_file, alive=proc.is_running)

    def secure_config_file(self, login: str) -> Path:
        """The secure lab's config with drctl logging in another way (SECURE_LOGINS)."""
        return self.dir / f"drctl-{login}.yaml"

    def _cluster_section(self, state: LabState, cluster: str, login: str) -> dict[str, str]:
        if not state.secure:
            return {"bootstrap.servers": self.bootstrap(state, cluster)}
        if login == "mtls":
            port = state.ports.mtls(getattr(state.ports, cluster))
            return {"bootstrap.servers": f"127.0.0.1:{port}",
                    **drctl_mtls_properties(self.credentials)}
        security = (drctl_oauthbearer_properties(self.credentials) if login == "oauthbearer"
                    else drctl_client_properties(self.credentials, by_reference=True))
        return {"bootstrap.servers": self.bootstrap(state, cluster), **security}

    def write_config(self, state: LabState) -> Path:
        """DIR/drctl.yaml (secure: SASL_SSL with SCRAM-SHA-512), and in secure mode one more
        config per other login, DIR/drctl-<login>.yaml."""
        connect: dict[str, str] = {"url": self.connect_url(state)}
        if state.secure:
            connect.update({"ca_file": str(self.credentials.ca_file),
                            "username": CONNECT_REST_USER,
                            "password": f"${{file:{self.credentials.connect_password_file}}}"})

        def flow_section(flow: MirrorFlow) -> dict[str, Any]:
            names = self.connector_names(state, flow)
            return {
                "kind": "mirrormaker2",
                "source": flow.source_alias,
                "target": flow.target_alias,
                "rename": "{topic}" if flow.names_kept
                else f"{flow.source_alias}{flow.separator}{{topic}}",
                **({"internal_separator": flow.separator}
                   if flow.names_kept and flow.separator != "." else {}),
                "source_alias": flow.source_alias,
                "target_alias": flow.target_alias,
                "connect": {
                    **connect,
                    "source_connector": names["source"],
                    "checkpoint_connector": names["checkpoint"],
                    **({"heartbeat_connector": names["heartbeat"]} if "heartbeat" in names
                       else {}),
                },
                # The forward flow's resource in its target's namespace; the reverse one's in
                # the source's (one KafkaMirrorMaker2 per target cluster).
                **({"strimzi": {"kubeconfig": str(self.strimzi.kubeconfig), "context": "lab",
                                "namespace": flow.target_alias, "name": RESOURCE_NAME,
                                "reverse_namespace": flow.source_alias,
                                "reverse_name": RESOURCE_NAME}} if state.strimzi else {}),
                **({"principal": MM2_PRINCIPAL} if state.secure else {}),
            }

        flows = self.flows(state)
        config: dict[str, Any] = {
            "clusters": {},
            **({"topology": {"kind": ACTIVE_ACTIVE,
                             "flows": [flow_section(flow) for flow in flows]}}
               if state.active_active else {"replication": flow_section(flows[0])}),
            "state": {"dir": "state", "topic": "_drctl_state"},
            # The workload's two applications (`drctl lab load`), for `--app`.
            "applications": {t: {"topics": [t]} for t in WorkloadSpec.topics},
            "spark": (spark_config(SparkClusterPorts(state.ports.spark_master))
                      if state.spark_workers else {"master": "local[2]"}
                      if self.spark_remote(state) is None
                      else {"remote": self.spark_remote(state)}),
        }
        for login in ("scram", *(SECURE_LOGINS if state.secure else ())):
            config["clusters"] = {c: {**self._cluster_section(state, c, login),
                                      **({"schema_registry": {"url": registry_url(port)}}
                                         if (port := state.registry_ports.get(c)) else {})}
                                  for c in ("primary", "secondary")}
            how = {"scram": "SASL_SSL/SCRAM-SHA-512", "mtls": "mTLS (PEM client certificate)",
                   "oauthbearer": "SASL_SSL/OAUTHBEARER (unsecured JWT)"}[login]
            header = (f"# Written by `drctl lab up` for the lab in {self.dir}\n"
                      f"# Kafka {state.kafka_version}, MirrorMaker 2 "
                      + ", ".join(f"{f.source_alias} -> {f.target_alias}" for f in flows)
                      + f", topic naming: {state.topic_naming}"
                      + (f", run by Strimzi's KafkaMirrorMaker2 ({state.crd_version})"
                         if state.strimzi else "")
                      + f"{f', {how} + ACLs' if state.secure else ''}\n")
            path = self.config_file if login == "scram" else self.secure_config_file(login)
            path.write_text(header + yaml.safe_dump(config, sort_keys=False))
        return self.config_file

    # -- down, fail, heal -----------------------------------------------------------------

    def down(self, *, purge: bool = False, discard: bool = False) -> list[str]:
        """Stop everything this lab started. `discard`: nothing more is wanted of it (a
        test's lab, done with), so its Kafka and Connect JVMs are killed, not shut down — a
        Connect worker's shutdown takes 5-6 s and a broker's a second or two — save one
        recording a class archive, which writes it only as it exits normally."""
        # Spark first, then Connect, so nothing logs the loss of what it depends on. Stopping
        # goes by pid files, whatever the ports.
        stopped = [*self.spark_cluster(LabPorts()).down(),
                   *self.spark_server(LabPorts()).down(discard=discard), *self.registries.down()]
        # The operator before Connect (it would recreate what it finds missing), the API
        # server with it.
        stopped += self.strimzi.down()
        for component in ("connect", "secondary", "primary"):
            proc = self.process(component)
            if proc.is_running():
                archive = recorded_by(proc.command())
                if discard and archive is None:
                    proc.kill()
                else:
                    _keep_recorded(archive, proc.stop())
                stopped.append(component)
            proc.pid_file.unlink(missing_ok=True)
        if purge and self.dir.exists():
            import shutil

            shutil.rmtree(self.dir)
        return stopped

    def operator(self, action: str, *, delay_s: float = 0.0) -> str:
        """The Strimzi lab's operator: "stop", "start" or "slow" (every pass waits `delay_s`
        first); what it did."""
        state = self.load_state()
        if not state.strimzi:
            raise LabError(f"The lab in {self.dir} runs no Strimzi operator.",
                           "Start one with `drctl lab up --platform strimzi`.")
        platform = self.strimzi
        if action == "stop":
            return "stopped" if platform.down_operator() else "was not running"
        if action == "slow":
            platform.set_operator_delay(delay_s)
            return f"a change waits {delay_s:g} s"
        platform.set_operator_delay(0)
        platform.start_operator(state.crd_version, self.connect_url(state))
        return "running"

    def fail(self, what: str) -> str:
        component = _component(what)
        self.load_state()
        self.process(component).kill()
        return component

    def heal(self, what: str, notify: Notify = lambda _: None, *, settle: bool = True) -> str:
        """Start it again and wait until it answers; the Connect worker, with `settle`, also
        until its connectors settled (a drill's next step reads them). A fault's systemd-like
        restart does not wait for that: a connector whose source cluster is down never
        settles."""
        component = _component(what)
        state = self.load_state()
        dist = KafkaDistribution(state.kafka_version, Path(state.lib_dir), state.kafka_source)
        if component == "connect":
            # Same data, same connector states: a connector that drctl stopped for a failover
            # stays stopped (only `lab up` starts them).
            self._start_connect(state, dist)
            self._wait_connect(state)
            if settle:
                self._wait_connectors_settled(state)
        else:
            self._start_broker(state, dist, component)
            self._wait_broker(state, component)
        notify(f"{component} is back")
        return component

    # -- status ---------------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        from drctl.kafka.lag import mm2_replication_lag

        state = self.load_state()
        processes = []
        for component in COMPONENTS:
            proc = self.process(component)
            port = getattr(state.ports, component)
            processes.append({"name": component, "pid": proc.pid() if proc.is_running() else None,
                              "running": proc.is_running(), "port": port,
                              "rss_bytes": proc.rss_bytes(), "log": str(proc.log_file)})
        if state.spark_workers:
            processes += self.spark_cluster(state.ports).rows(state.spark_workers)
        processes += self.registries.rows(state.registry_ports)
        if state.strimzi:
            processes += self.strimzi.rows(state.ports.kube)
        server = self.spark_server(state.ports)
        if self.spark_remote(state) == server.url:
            processes.append(server.row())
        connectors: list[dict[str, Any]] = []
        lag: list[dict[str, Any]] = []
        if self.process("connect").is_running():
            client = self.connect_client(state)
            for flow in self.flows(state):
                for name in self.connector_names(state, flow).values():
                    try:
                        cstate, tasks = client.connector_state(name)
                    except ConnectError as exc:
                        cstate, tasks = f"ERROR: {exc.message}", []
                    connectors.append({"name": name, "state": cstate, "tasks": tasks})
                if self.process(flow.source_alias).is_running():
                    source = self.clients(state, flow.source_alias)
                    lag += [{**row, "flow": f"{flow.source_alias} -> {flow.target_alias}"}
                            for row in mm2_replication_lag(
                                source, client, self.connector_names(state, flow)["source"],
                                partial(_copied_by, flow), separator=flow.separator)]
        return {
            "dir": str(self.dir),
            "kafka_version": state.kafka_version,
            "topic_naming": state.topic_naming,
            "topology": state.topology,
            "separator": state.separator,
            "secure": state.secure,
            "legacy_keys": state.legacy_keys,
            "platform": state.platform,
            **({"crd_version": state.crd_version, "kubeconfig": str(self.strimzi.kubeconfig)}
               if state.strimzi else {}),
            "config": str(self.config_file),
            "spark_workers": state.spark_workers,
            "spark_remote": self.spark_remote(state),
            "processes": processes,
            "total_rss_bytes": sum(p["rss_bytes"] for p in processes),
            "connectors": connectors,
            "replication_lag": lag,
        }

    def healthy(self) -> bool:
        st = self.status()
        return (all(p["running"] for p in st["processes"])
                and all(c["state"] == "RUNNING" and all(t == "RUNNING" for t in c["tasks"])
                        for c in st["connectors"]))


def _component(what: str) -> str:
    if what not in FAILABLE:
        raise LabError(f"'{what}' is not part of the lab.",
                       "Use one of: primary, secondary, replication.")
    return FAILABLE[what]


def _copied_by(flow: MirrorFlow, topic: str) -> bool:
    """Whether `flow` copies `topic`: its filter, and never a copy made by the other flow of an
    active-active lab (MirrorMaker 2's cycle check: the name carries its target's alias)."""
    return flow.replicates(topic) and (
        flow.names_kept or not topic.startswith(f"{flow.target_alias}{flow.separator}"))


def _archive_options(archive: ClassArchive | None) -> list[str]:
    return archive.java_options() if archive is not None else []


def _keep_recorded(archive: ClassArchive | None, ended_normally: bool) -> None:
    """A JVM's class archive, recorded as it exited (KafkaDistribution.class_archive), is
    kept only when it ended normally: one killed may have left half of it."""
    if archive is None:
        return
    if ended_normally:
        archive.keep()
    else:
        archive.discard()


def _running(client: ConnectClient, name: str) -> bool:
    state, tasks = client.connector_state(name)
    if state == "FAILED" or "FAILED" in tasks:
        raise LabError(f"Connector {name} failed.", "Read the Connect log in the lab dir.")
    return state == "RUNNING" and all(t == "RUNNING" for t in tasks)


def wait_for_lab(lab: Lab, deadline_s: float = 60) -> None:
    """Wait until every process and connector of a lab is healthy."""
    try:
        wait_for(lambda: True if lab.healthy() else None, deadline_s=deadline_s)
    except WaitTimedOut:
        raise LabError("The lab did not become healthy in time.",
                       "Run `drctl lab status`.") from None
