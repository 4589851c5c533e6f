"""`drctl lab`: two real Kafka clusters and MirrorMaker 2 on this machine."""

from __future__ import annotations

import time
from dataclasses import replace
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from drctl.cli.help import Typer
from drctl.cli.options import OutputOption, old_spelling, renamed
from drctl.cli.state import CURRENT
from drctl.errors import UsageError
from drctl.lab.lab import NO_SERVER, OWN_SERVER, SECURE_LOGINS, Lab, LabPorts
from drctl.lab.registry import DEFAULT_PORT as DEFAULT_REGISTRY_PORT
from drctl.lab.registry import lab_values, registry_url
from drctl.lab.workload import WorkloadSpec, run_workload
from drctl.terminal import OutputFormat, human_bytes

app = Typer(help="A local DR lab: primary and secondary Kafka clusters plus MirrorMaker 2."
                 "\n\n\b\nExamples:"
                 "\n  drctl lab up && export DRCTL_CONFIG=lab/drctl.yaml"
                 "\n  drctl lab load && drctl lab fail primary"
                 "\n  drctl lab down --purge",
            no_args_is_help=True)

DirOption = Annotated[Path, typer.Option("--dir", envvar="DRCTL_LAB_DIR", metavar="DIR",
                                         help="Where the lab keeps its data, logs and config.")]


class TopicNaming(StrEnum):
    kept = "kept"
    prefixed = "prefixed"


class Topology(StrEnum):
    one_way = "one-way"
    active_active = "active-active"


class Platform(StrEnum):
    connect = "connect"
    strimzi = "strimzi"


class CrdVersion(StrEnum):
    v1 = "v1"
    v1beta2 = "v1beta2"


class Failable(StrEnum):
    primary = "primary"
    secondary = "secondary"
    replication = "replication"


WhatArg = Annotated[Failable, typer.Argument(
    metavar="primary|secondary|replication", show_default=False,
    help="primary or secondary: that cluster's broker and controller; replication: the "
         "Kafka Connect worker running MirrorMaker 2.")]


@app.command("up")
def up(
    dir: DirOption = Path("lab"),
    topic_naming: Annotated[TopicNaming | None, typer.Option(
        help="kept: MM2 IdentityReplicationPolicy (topics keep their names); prefixed: "
             "MM2's default primary.<topic>. Default: kept (one-way), prefixed "
             "(active-active).", show_default=False)] = None,
    topology: Annotated[Topology, typer.Option(
        help="one-way: MirrorMaker 2 primary -> secondary; active-active: both ways, names "
             "prefixed (primary.<topic> on secondary, secondary.<topic> on primary), the "
             "config's `topology:`.")] = Topology.one_way,
    separator: Annotated[str | None, typer.Option(
        metavar="SEP",
        help="MirrorMaker 2's replication.policy.separator (prefixed names and its internal "
             "topics: primary_orders with _). Default: '.' for a new lab.",
        show_default=False)] = None,
    kafka_version: Annotated[str | None, typer.Option(
        metavar="VERSION",
        help="Kafka release from Maven Central, e.g. 4.3.1 or 3.9.x (default: 4.3.1, or "
             "KAFKA_HOME when set).")] = None,
    primary_port: Annotated[int, typer.Option(
        metavar="PORT",
        help="primary's listener (controller: +1; with --secure, mTLS: +2).")] = 19092,
    secondary_port: Annotated[int, typer.Option(
        metavar="PORT",
        help="secondary's listener (controller: +1; with --secure, mTLS: +2).")] = 29092,
    connect_port: Annotated[int, typer.Option(
        metavar="PORT", help="Kafka Connect REST port.")] = 18083,
    spark_workers: Annotated[int | None, typer.Option(
        min=0, metavar="N",
        help="Also run a Spark standalone cluster with N one-core workers and point "
             "the config's spark.master at it; 0 stops it (default: keep the lab's, "
             "none for a new lab).")] = None,
    spark_port: Annotated[int, typer.Option(
        metavar="PORT", help="Spark master port (web UIs: the next ports, one per worker after the "
             "master's).")] = 17077,
    spark_connect: Annotated[bool | None, typer.Option(
        "--spark-connect/--no-spark-connect",
        help="Run a Spark Connect server for the gap jobs and point the config's "
             "spark.remote at it; --no-spark-connect: each gap job a local Spark job "
             "(default: keep the lab's, a server for a new lab).", show_default=False)] = None,
    spark_connect_port: Annotated[int, typer.Option(
        metavar="PORT", help="The Spark Connect server's port (gRPC).")] = 17002,
    secure: Annotated[bool, typer.Option(
        "--secure", help="TLS from a CA the lab makes; SASL_SSL (SCRAM-SHA-512, PLAIN, "
                         "OAUTHBEARER) and mTLS listeners; ACLs: drctl as a super user, "
                         "MirrorMaker 2 as 'mirrormaker' with only the ACLs it needs; Connect "
                         "REST over HTTPS with basic auth.")] = False,
    schema_registry: Annotated[bool | None, typer.Option(
        "--schema-registry/--no-schema-registry",
        help="Also run a schema registry per cluster (Apicurio Registry 2.4.2, Confluent's "
             "API; built with Maven on first use) and name them in the config; "
             "--no-schema-registry stops them (default: keep the lab's, none for a new "
             "lab).")] = None,
    registry_port: Annotated[int, typer.Option(
        metavar="PORT", help="primary's schema registry port (secondary's: +1).")]
    = DEFAULT_REGISTRY_PORT,
    legacy_keys: Annotated[bool | None, typer.Option(
        "--legacy-keys/--no-legacy-keys",
        help="Configure MirrorMaker 2's connectors with the old names of their exclude "
             "lists, topics.blacklist and groups.blacklist, as connectors set up years ago "
             "are (Kafka 3.x only: 4.0 dropped them); --no-legacy-keys: topics.exclude "
             "(default: keep the lab's, the new names for a new lab).",
        show_default=False)] = None,
    platform: Annotated[Platform | None, typer.Option(
        help="connect: the lab creates MirrorMaker 2's connectors through Connect's REST "
             "API; strimzi: a real Kubernetes API server (kube-apiserver + etcd, built once "
             "per machine with Go) holds Strimzi's KafkaMirrorMaker2 resource, and the lab's "
             "own operator (Strimzi's contract, emulated) reconciles it onto Connect. "
             "Default: the lab's, connect for a new lab.", show_default=False)] = None,
    crd_version: Annotated[CrdVersion | None, typer.Option(
        help="With --platform strimzi: kafka.strimzi.io/v1 (Strimzi 1.x) or v1beta2 "
             "(Strimzi 0.45). Default: the lab's, v1 for a new lab.", show_default=False)]
    = None,
    kube_port: Annotated[int, typer.Option(
        metavar="PORT", help="With --platform strimzi: kube-apiserver's HTTPS port.")] = 16443,
    etcd_port: Annotated[int, typer.Option(
        metavar="PORT", help="With --platform strimzi: etcd's client port (peer: +1).")]
    = 12379,
    output: Annotated[OutputFormat | None, OutputOption] = None,
) -> None:
    """Start the lab (idempotent) and write DIR/drctl.yaml.

    \b
    Examples:
      drctl lab up
      drctl lab up --topic-naming prefixed --dir lab-prefixed
      drctl lab up --topology active-active --dir lab-aa
      drctl lab up --secure --spark-workers 2
      drctl lab up --schema-registry   # a registry per cluster
      drctl lab up --kafka-version 3.9.x --legacy-keys   # topics.blacklist
      drctl lab up --platform strimzi --dir lab-k8s   # Strimzi, on k8s

    \b
    Exit status: 0 up; 1 the lab could not start (the message names the log to
    read); 2 usage."""
    term = CURRENT.terminal(output)
    if topology == Topology.active_active and topic_naming == TopicNaming.kept:
        raise UsageError("--topic-naming kept with --topology active-active: names kept both "
                         "ways are a loop MirrorMaker 2 cannot break.",
                         "Leave --topic-naming out (an active-active lab prefixes names).")
    naming = topic_naming or (TopicNaming.prefixed if topology == Topology.active_active
                              else TopicNaming.kept)
    lab = Lab(dir)
    started = time.monotonic()
    state = lab.up(ports=LabPorts(primary_port, secondary_port, connect_port, spark_port,
                                  spark_connect_port, kube_port, etcd_port),
                   platform=platform.value if platform else None,
                   crd_version=crd_version.value if crd_version else None,
                   kafka_version=kafka_version, topology=topology.value,
                   names_kept=naming == TopicNaming.kept, spark_workers=spark_workers,
                   secure=secure, schema_registry=schema_registry,
                   registry_port=registry_port, legacy_keys=legacy_keys, separator=separator,
                   spark_connect=(OWN_SERVER if spark_connect or (
                       spark_connect is None and not lab.state_file.exists()) else
                       None if spark_connect is None else NO_SERVER),
                   notify=term.step)
    elapsed = time.monotonic() - started
    status = lab.status()
    if term.json_mode:
        term.emit_json({**status, "elapsed_s": round(elapsed, 1)})
        return
    secured = ", TLS + SASL + ACLs" if state.secure else ""
    legacy = ", topics.blacklist/groups.blacklist" if state.legacy_keys else ""
    strimzi = f", Strimzi {state.crd_version}" if state.strimzi else ""
    term.success(f"Lab up in {elapsed:.1f} s: Kafka {state.kafka_version}, {state.topology}, "
                 f"topic naming {state.topic_naming}{secured}{legacy}{strimzi}, "
                 f"{human_bytes(status['total_rss_bytes'])} resident.")
    remote = lab.spark_remote(state)
    spark = (f"  spark     spark://127.0.0.1:{state.ports.spark_master}, "
             f"{state.spark_workers} worker(s)\n" if state.spark_workers
             else f"  spark     {remote} (Spark Connect)\n" if remote else "")
    mtls = (lambda port: f" (mTLS 127.0.0.1:{state.ports.mtls(port)})") if state.secure \
        else (lambda port: "")
    configs = "".join(f"\n  config    {lab.secure_config_file(login)}  ({login})"
                      for login in SECURE_LOGINS) if state.secure else ""
    registries = "".join(f"  registry  {registry_url(port)}  ({cluster})\n"
                         for cluster, port in state.registry_ports.items())
    term.info(f"  primary   127.0.0.1:{state.ports.primary}{mtls(state.ports.primary)}\n"
              f"  secondary 127.0.0.1:{state.ports.secondary}{mtls(state.ports.secondary)}\n"
              f"  connect   {lab.connect_url(state)}\n{spark}{registries}"
              + (f"  k8s       https://127.0.0.1:{state.ports.kube_api}  (KUBECONFIG="
                 f"{lab.strimzi.kubeconfig})\n" if state.strimzi else "") +
              f"  config    {lab.config_file}  (export DRCTL_CONFIG={lab.config_file})"
              f"{configs}")


@app.command("down")
def down(
    dir: DirOption = Path("lab"),
    purge: Annotated[bool, typer.Option("--purge", help="Also delete the lab's data.")] = False,
) -> None:
    """Stop every process the lab started (idempotent).

    \b
    Examples:
      drctl lab down
      drctl lab down --purge          # and delete its data

    \b
    Exit status: 0 stopped, or nothing was running; 2 usage."""
    term = CURRENT.terminal()
    stopped = Lab(dir).down(purge=purge)
    if term.json_mode:
        term.emit_json({"stopped": stopped, "purged": purge})
    term.success(f"Stopped {', '.join(stopped)}." if stopped else "Nothing was running.")


@app.command("status")
def status(dir: DirOption = Path("lab"),
           output: Annotated[OutputFormat | None, OutputOption] = None) -> None:
    """Processes, connectors and per-topic replication lag.

    \b
    Examples:
      drctl lab status
      drctl lab status -o json"""
    term = CURRENT.terminal(output)
    st = Lab(dir).status()
    if term.json_mode:
        term.emit_json(st)
        return
    term.info(f"Lab {st['dir']} — Kafka {st['kafka_version']}, topic naming "
              f"{st['topic_naming']}, {human_bytes(st['total_rss_bytes'])} resident"
              + (f"; gap jobs on Spark Connect {st['spark_remote']}" if st["spark_remote"]
                 else ""))
    term.table("Processes", ["name", "running", "pid", "port", "memory", "log"],
               [[p["name"], "yes" if p["running"] else "NO", p["pid"], p["port"],
                 human_bytes(p["rss_bytes"]), p["log"]] for p in st["processes"]])
    if st.get("kubeconfig"):
        term.info(f"Strimzi {st['crd_version']}: KUBECONFIG={st['kubeconfig']}")
    if st["connectors"]:
        term.table("Connectors", ["connector", "state", "tasks"],
                   [[c["name"], c["state"], ", ".join(c["tasks"]) or "-"]
                    for c in st["connectors"]])
    if st["replication_lag"]:
        term.table("Replication lag (offsets behind on primary)",
                   ["topic", "partitions", "end offsets", "behind"],
                   [[r["topic"], r["partitions"], r["end"], r["behind"]]
                    for r in st["replication_lag"]])


@app.command("fail")
def fail(what: WhatArg, dir: DirOption = Path("lab")) -> None:
    """Hard-kill a part of the lab (SIGKILL), like losing a datacenter.

    \b
    Examples:
      drctl lab fail primary          # the source datacenter is gone
      drctl lab fail replication      # MirrorMaker 2 stops copying

    \b
    Exit status: 0 killed, or it was not running; 1 no lab in DIR; 2 usage."""
    component = Lab(dir).fail(what.value)
    term = CURRENT.terminal()
    if term.json_mode:
        term.emit_json({"killed": component})
    term.success(f"Killed {component} (SIGKILL). `drctl lab heal {what.value}` restarts it "
                 "on the same data.")


@app.command("heal")
def heal(what: WhatArg, dir: DirOption = Path("lab")) -> None:
    """Restart a failed part of the lab on its existing data.

    \b
    Examples:
      drctl lab heal primary
      drctl lab heal replication

    \b
    Exit status: 0 running again; 1 it did not come back (the message names
    the log to read); 2 usage."""
    term = CURRENT.terminal()
    healed = Lab(dir).heal(what.value, notify=term.step)
    if term.json_mode:
        term.emit_json({"healed": healed})
    term.success(f"{what.value} is running again.")


class OperatorAction(StrEnum):
    stop = "stop"
    start = "start"
    slow = "slow"


@app.command("operator")
def operator(
    action: Annotated[OperatorAction, typer.Argument(
        metavar="stop|start|slow", show_default=False,
        help="stop: end the lab's Strimzi operator (nothing reconciles); start: run it again; "
             "slow: it acts on a resource's change only --delay seconds after it saw it.")],
    dir: DirOption = Path("lab"),
    delay: Annotated[float, typer.Option(
        min=0, metavar="SECONDS", help="With slow: how long a change waits (0: none).")]
    = 0.0,
) -> None:
    """Stop, start or slow down the Strimzi lab's operator (`lab up --platform strimzi`).

    \b
    Examples:
      drctl lab operator stop
      drctl lab operator slow --delay 30
      drctl lab operator start

    \b
    Exit status: 0 done; 1 no Strimzi lab in DIR; 2 usage."""
    term = CURRENT.terminal()
    done = Lab(dir).operator(action.value, delay_s=delay)
    if term.json_mode:
        term.emit_json({"operator": done})
    term.success(f"The lab's Strimzi operator: {done}.")


@app.command("load")
def load(
    dir: DirOption = Path("lab"),
    topic: Annotated[list[str] | None, typer.Option(
        "--topic", metavar="TOPIC", help="Topic to produce to (repeatable).")] = None,
    partitions: Annotated[int, typer.Option(
        min=1, metavar="N", help="Partitions of each topic.")] = 3,
    records: Annotated[int, typer.Option(
        min=0, metavar="N", help="Committed records per topic.")] = 1000,
    seed: Annotated[int, typer.Option(metavar="N", help="Same seed, same records.")] = 7,
    transactions: Annotated[int, typer.Option(
        min=0, metavar="N",
        help="Transactional batches per topic; every other one is aborted.")] = 4,
    commit: Annotated[list[str] | None, typer.Option(
        "--commit", metavar="GROUP=POSITION",
        help="Commit GROUP at POSITION: 0, an offset, N% or end (repeatable).")] = None,
    old_group: Annotated[list[str] | None, old_spelling("--group")] = None,
    cluster: Annotated[str | None, typer.Option(
        metavar="CLUSTER", help="primary or secondary (e.g. post-failover writes). Default: "
        "primary; both regions in an active-active lab (each its own local topics, the "
        "secondary with --seed + 1).", show_default=False)] = None,
    schema_registry: Annotated[bool, typer.Option(
        "--schema-registry", help="Write values as Avro with Confluent's serializer through "
        "the cluster's schema registry (subject <topic>-value; the lab needs `lab up "
        "--schema-registry`).")] = False,
    output: Annotated[OutputFormat | None, OutputOption] = None,
) -> None:
    """Produce a deterministic DR workload to a lab cluster and commit consumer groups.

    \b
    Examples:
      drctl lab load
      drctl lab load --topic orders --records 10000 --commit billing=50%
      drctl lab load --cluster secondary --seed 8   # post-failover writes
      drctl lab load --schema-registry              # Avro through the registry
      drctl lab load --dir lab-aa                   # active-active: both regions

    \b
    Exit status: 0 produced and committed; 1 the lab could not (no lab, a
    cluster down); 2 usage."""
    term = CURRENT.terminal(output)
    group = renamed(commit, old_group, old="--group", new="--commit", warn=term.warn)
    lab = Lab(dir)
    state = lab.load_state()
    spec = WorkloadSpec(
        topics=tuple(topic or WorkloadSpec.topics), partitions=partitions, records=records,
        seed=seed, transactions=transactions,
        groups=tuple(group) if group is not None else WorkloadSpec.groups)
    # An active-active lab's regions both write their local topics (unless one is named),
    # each with records of its own and groups named after it: a region's groups are its own.
    clusters = [cluster] if cluster else (["primary", "secondary"] if state.active_active
                                          else ["primary"])
    summaries: dict[str, dict] = {}
    for i, name in enumerate(clusters):
        encode = lab_values(state.registry_ports, name, lab.dir) if schema_registry else None
        regional = replace(spec, seed=spec.seed + i, groups=tuple(
            f"{g.partition('=')[0]}-{name}={g.partition('=')[2]}" for g in spec.groups)) \
            if len(clusters) > 1 else spec
        with lab.clients(state, name) as clients:  # its group commits' child ends here
            result = run_workload(clients, regional, notify=term.step, encode=encode)
        summaries[name] = result.summary()
    if term.json_mode:
        term.emit_json(summaries[clusters[0]] if len(clusters) == 1
                       else {"regions": summaries})
        return
    for name, summary in summaries.items():
        term.table(f"Produced to {name}", ["topic", "records by kind"],
                   [[t, ", ".join(f"{k}={v}" for k, v in sorted(kinds.items()))]
                    for t, kinds in summary["topics"].items()])
        term.table(f"Committed groups on {name}", ["group", "topic", "offsets by partition"],
                   [[g, t, ", ".join(f"{p}:{o}" for p, o in sorted(parts.items()))]
                    for g, topics in summary["groups"].items() for t, parts in topics.items()])
