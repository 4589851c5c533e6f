"""What lab tests do to the clusters, written once: produce records, read what arrived, wait
until enough did."""

from __future__ import annotations

import os
import time
import weakref
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer

from drctl.errors import DrctlError
from drctl.kafka.clients import ClusterClients
from drctl.kafka.connect_rest import ConnectError
from drctl.kafka.offsets import watermarks
from drctl.kafka.records import read_all
from drctl.replication.control import ConnectorActivity, ConnectorReading
from tests.conftest import RunningLab

# (partition, key, value) or (partition, key, value, timestamp_ms, headers); a timestamp of 0
# lets the producer stamp it.
Sent = tuple[int, bytes | None, bytes] | tuple[int, bytes | None, bytes, int,
                                               Sequence[tuple[str, bytes]]]


# One producer per set of clients: a new idempotent producer waits half a second for its
# producer id, and tests produce hundreds of times.
_producers: weakref.WeakKeyDictionary[ClusterClients, Producer] = weakref.WeakKeyDictionary()


def produce(clients: ClusterClients, topic: str, records: Iterable[Sent]) -> None:
    """Write `records` and wait until every one is acknowledged."""
    records = list(records)
    producer = _producers.get(clients)
    if producer is None:
        producer = _producers[clients] = clients.producer()
    _await_partitions(producer, topic, {rec[0] for rec in records})
    # flush() counts what is still queued, not what failed: a record the broker refused
    # must fail here, not later as "replication lost it".
    failed: list[str] = []

    def delivered(err: KafkaError | None, msg: Any) -> None:
        if err is not None:
            failed.append(f"{msg.topic()}[{msg.partition()}]: {err}")

    for rec in records:
        p, key, value = rec[0], rec[1], rec[2]
        timestamp, headers = (rec[3], list(rec[4])) if len(rec) == 5 else (0, [])
        try:
            producer.produce(topic, key=key, value=value, partition=p, timestamp=timestamp,
                             headers=headers, on_delivery=delivered)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError._UNKNOWN_PARTITION:
                raise
            # A partition added since the producer last read the topic's metadata.
            assert producer.flush(30) == 0
            producer = _producers[clients] = clients.producer()
            producer.produce(topic, key=key, value=value, partition=p, timestamp=timestamp,
                             headers=headers, on_delivery=delivered)
    assert producer.flush(30) == 0
    assert not failed, f"{len(failed)} record(s) not written: {failed[:5]}"


def _await_partitions(producer: Producer, topic: str, wanted: set[int]) -> None:
    """Until the producer's metadata shows every partition in `wanted`. A partition (or topic)
    the controller just created reaches the broker's metadata a moment later: a record sent
    to it meanwhile fails, unknown, in its delivery report (seen in a matrix run: five records
    to a partition added on the secondary right before)."""
    deadline = time.monotonic() + 30
    while True:
        meta = producer.list_topics(topic, timeout=10).topics.get(topic)
        known = set(meta.partitions) if meta is not None and meta.error is None else set()
        if wanted <= known:
            return
        assert time.monotonic() < deadline, (
            f"{topic}: partition(s) {sorted(wanted - known)} not in the metadata after 30 s")
        time.sleep(0.2)


def keyed(prefix: str, count: int, partitions: int = 2) -> list[Sent]:
    """`count` records keyed `<prefix>-<i>`, round-robin over the partitions."""
    return [(i % partitions, f"{prefix}-{i}".encode(), f"{prefix}-v{i}".encode())
            for i in range(count)]


def keys_on(clients: ClusterClients, topic: str) -> Counter[str]:
    return Counter((r.key or b"").decode() for r in read_all(clients, topic))


def wait_count(clients: ClusterClients, topic: str, count: int,
               deadline_s: float = 90) -> None:
    """Until `topic` holds at least `count` records on `clients`' cluster."""
    end = time.monotonic() + deadline_s
    got = 0
    while True:
        try:
            got = len(read_all(clients, topic))
        except KafkaException:  # a broker that just came back may not lead yet
            got = 0
        if got >= count:
            return
        if time.monotonic() > end:
            raise AssertionError(f"only {got}/{count} records of {topic} on {clients.name}")
        time.sleep(0.5)


def wait_replicated(lab: RunningLab, topic: str, count: int, deadline_s: float = 90) -> None:
    """Until MirrorMaker 2 has copied at least `count` records of `topic` to the secondary;
    when it has not, the failure says what Connect reported of its connectors."""
    try:
        wait_count(lab.secondary, lab.mirror(topic), count, deadline_s)
    except AssertionError as exc:
        raise AssertionError(f"{exc}; ends per partition: {partition_ends(lab, topic)}; "
                             f"Connect: {connector_report(lab)}") from None


def partition_ends(lab: RunningLab, topic: str) -> str:
    """Each partition's end offset on the source and on the target, side by side: which
    partition's records did not arrive (a diagnosis only)."""
    sides = []
    for clients, name in ((lab.primary, topic), (lab.secondary, lab.mirror(topic))):
        try:
            md = clients.admin().list_topics(name, timeout=10).topics[name]
            if md.error is not None or not md.partitions:
                sides.append(f"{clients.name} has no {name} ({md.error})")
                continue
            ends = watermarks(clients.admin(), [(name, p) for p in md.partitions])
            sides.append(f"{clients.name} " + " ".join(
                f"{tp[1]}:{end}" for tp, (_, end) in sorted(ends.items())))
        except Exception as exc:  # noqa: BLE001 - a diagnosis only: the failure is raised anyway
            sides.append(f"{clients.name} unreadable ({exc})")
    return "; ".join(sides)


def connector_report(lab: RunningLab) -> str:
    """Each connector as drctl describes it, with the first line of a failed task's trace:
    what a replication that stopped copying looked like to Connect."""
    client = lab.lab.connect_client(lab.state)
    parts = []
    try:
        for name in client.connectors():
            status = client.status(name)
            traces = [str(t["trace"]).splitlines()[0]
                      for t in status.get("tasks") or [] if t.get("trace")]
            parts.append(f"{name} {ConnectorReading.from_status(name, status).describe()}"
                         + (f" ({'; '.join(traces)})" if traces else ""))
    except (DrctlError, OSError) as exc:  # a diagnosis only: the failure is raised anyway
        parts.append(f"unreadable ({exc})")
    return "; ".join(parts)


def fresh_clients(lab: RunningLab, cluster: str) -> ClusterClients:
    """New clients: the lab's own were made before a broker restarted. Their group-request
    child ends when they are dropped, or at the end of a `with` block."""
    return lab.lab.clients(lab.state, cluster)


def run_drctl(*argv: str) -> tuple[int, str, str]:
    """`drctl ARGV…` in this process, through its error boundary: exit status, stdout,
    stderr."""
    import contextlib
    import io

    from drctl.cli.app import main

    out, err = io.StringIO(), io.StringIO()
    started = time.monotonic()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(list(argv))
    _log_command_time(argv, status, time.monotonic() - started)
    return status, out.getvalue(), err.getvalue()


def _log_command_time(argv: tuple[str, ...], status: int, seconds: float) -> None:
    """With DRCTL_TEST_COMMAND_LOG=FILE, one line per command a lab test ran: where a test's
    time goes (the suite's wall time is budgeted, see tests/conftest.py)."""
    path = os.environ.get("DRCTL_TEST_COMMAND_LOG")
    if path:
        shown = [a for a in argv if not a.endswith((".yaml", ".yml"))]
        test = os.environ.get("PYTEST_CURRENT_TEST", "").split(" ")[0]
        with open(path, "a", encoding="utf-8") as log:
            log.write(f"{time.strftime('%H:%M:%S')} {seconds:7.1f}s exit {status} {test} "
                      f"drctl {' '.join(shown)}\n")


def _log_phases(document: dict[str, Any]) -> None:
    """With DRCTL_TEST_COMMAND_LOG, the phases the command timed (its `timing`), on the line
    after the command's: which phase of a failback a test waits on."""
    path = os.environ.get("DRCTL_TEST_COMMAND_LOG")
    timing = document.get("timing") if isinstance(document, dict) else None
    this = timing.get("this_run") if isinstance(timing, dict) else None
    phases = this.get("phases") if isinstance(this, dict) else None
    if path and phases:
        shown = " ".join(f"{p['phase']}={p['seconds']:.1f}" for p in phases)
        with open(path, "a", encoding="utf-8") as log:
            log.write(f"    phases: {shown}\n")


def run_json(*argv: str) -> tuple[int, dict[str, Any]]:
    """`drctl -o json ARGV…` in this process: its exit status and the JSON document it
    printed, checked against the command's schema (docs/schemas/)."""
    import json
    import sys

    from tests.json_schemas import command_of, validate_output

    status, out, err = run_drctl("--output", "json", *argv)
    sys.stderr.write(err)  # where it went before: tests read it with capsys
    document = json.loads(out)
    _log_phases(document)
    assert document["exit_status"] == status, (document, err)
    validate_output(command_of(argv), document)
    return status, document


# A wait's last attempt may run up to a second past its deadline (drctl/retry.py
# `time_left`), and the process is scheduled late on a loaded machine: the most drctl's own
# measure of a wait may pass its deadline by.
WAIT_OVERRUN_S = 5.0


def assert_waited_out(doc: dict[str, Any], deadline_s: float) -> None:
    """The command ended on a cluster or Connect worker it waited for within `deadline_s`
    (its --deadline): what drctl measured of that wait and reported (the JSON error's
    `waited_s`, under `deadline_s`), never the wall time of a process on a loaded machine.
    The wait ran to its deadline (the cluster stayed silent) and no further."""
    error = doc["error"]
    assert error["kind"] == "Unreachable", error
    waited, under = error["waited_s"], error["deadline_s"]
    assert under is not None and under <= deadline_s, error
    assert under - 0.5 <= waited <= under + WAIT_OVERRUN_S, error


def wait_offsets_stored(lab: RunningLab, *topics: str, deadline_s: float = 60) -> None:
    """Until Connect has stored MirrorMaker 2's source offsets up to the last record of every
    partition of `topics` on the primary (it flushes them every second in the lab): a worker
    killed or stopped after this copies none of them again."""
    client = lab.lab.connect_client(lab.state)
    name = lab.lab.flow(lab.state).connector_names()["source"]
    last: dict[tuple[str, int], int] = {}
    for topic in topics:
        for rec in read_all(lab.primary, topic):
            last[(topic, rec.partition)] = max(last.get((topic, rec.partition), -1), rec.offset)
    end = time.monotonic() + deadline_s
    while True:
        # MirrorMaker 2 stores the offset of the last record it copied, not the next one.
        stored = {(str(e["partition"]["topic"]), int(e["partition"]["partition"])):
                  int(e["offset"]["offset"])
                  for e in client.offsets(name).get("offsets", [])
                  if "topic" in e.get("partition", {}) and "offset" in (e.get("offset") or {})}
        behind = {tp: o for tp, o in last.items() if stored.get(tp, -1) < o}
        if not behind:
            return
        assert time.monotonic() < end, f"source offsets not stored up to {behind}: {stored}"
        time.sleep(0.2)


def stop_forward_quietly(lab: RunningLab, topic: str, *more: str) -> None:
    """MirrorMaker 2's source connector stops once it stored its offsets of the topics, and
    nothing copies any more."""
    client = lab.lab.connect_client(lab.state)
    name = lab.lab.flow(lab.state).connector_names()["source"]
    wait_offsets_stored(lab, topic, *more)
    client.stop(name)
    end = time.monotonic() + 60
    while ConnectorReading.read(client, name).activity is not ConnectorActivity.STOPPED:
        assert time.monotonic() < end, "the source connector did not stop"
        time.sleep(0.2)


def wait_tasks_assigned(lab: RunningLab, *topics: str, deadline_s: float = 90) -> None:
    """Until MirrorMaker 2's source tasks were given every partition of `topics` (it finds a
    new topic, then reconfigures and restarts its tasks) and run: records sent after this
    are copied by the tasks that keep them, not by one that restarts half-way."""
    client = lab.lab.connect_client(lab.state)
    name = lab.lab.flow(lab.state).connector_names()["source"]
    wanted = {f"{t}-{p}" for t in topics
              for p in lab.primary.admin().list_topics(t, timeout=10).topics[t].partitions}
    end = time.monotonic() + deadline_s
    while True:
        try:
            configs = client.request("GET", f"/connectors/{name}/tasks") or []
        except ConnectError as exc:
            # Kafka Connect 3.9 answers 500 "a rebalance is expected" while the tasks are
            # being reconfigured (4.x answers with the old ones): not assigned yet.
            if exc.status < 500:
                raise
            configs = []
        assigned = {tp for task in configs
                    for tp in str(task["config"].get("task.assigned.partitions", "")).split(",")}
        if wanted <= assigned and source_tasks(lab) and \
                all(t == "RUNNING" for t in source_tasks(lab)):
            return
        assert time.monotonic() < end, f"{sorted(wanted - assigned)} not assigned to a task"
        time.sleep(0.2)


def source_tasks(running: RunningLab) -> list[str]:
    """MirrorMaker 2's source connector's task states; none while a restarted worker has not
    read its status topic yet (Connect answers 404 "No status found" then)."""
    name = running.lab.flow(running.state).connector_names()["source"]
    return list(ConnectorReading.read(running.lab.connect_client(running.state), name).tasks)


def checkpointed_topic(lab: RunningLab, ns: str, name: str) -> tuple[str, str]:
    """A mirrored topic `<ns>-<name>` (20 records over 2 partitions) and a group `<ns>-app`
    at offset 10 on each, checkpointed by MirrorMaker 2: a flow a failover would handle."""
    from confluent_kafka import TopicPartition

    from drctl.lab.workload import commit_offsets, create_topics

    topic, group = f"{ns}-{name}", f"{ns}-app"
    create_topics(lab.primary, (topic,), 2)
    produce(lab.primary, topic, keyed("k", 20))
    wait_replicated(lab, topic, 20)
    commit_offsets(lab.primary, group, [TopicPartition(topic, p, 10) for p in (0, 1)])
    lab.wait_checkpointed(group, topic, {0: 10, 1: 10})
    return topic, group


_DIES_MID_TRANSACTION = """
import sys, time
from confluent_kafka import Producer
p = Producer({"bootstrap.servers": sys.argv[1], "transactional.id": sys.argv[2],
              "transaction.timeout.ms": 600000})
p.init_transactions()
p.begin_transaction()
for i in range(int(sys.argv[4])):
    p.produce(sys.argv[3], key=b"t%d" % i, value=b"open", partition=0)
p.flush(30)
print("sent", flush=True)
time.sleep(600)
"""


def die_mid_transaction(bootstrap: str, transactional_id: str, topic: str,
                        records: int) -> None:
    """A producer writes `records` records to partition 0 of `topic` in a transaction and is
    SIGKILLed before it ends it: the partition's last stable offset stays where the
    transaction began for its timeout (10 minutes) or until it is aborted."""
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-c", _DIES_MID_TRANSACTION, bootstrap,
                             transactional_id, topic, str(records)],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "sent"
    finally:
        proc.kill()
        proc.wait()


def _kafka_request(bootstrap: str, api_key: int, version: int, body: bytes) -> bytes:
    """One request in Kafka's wire protocol over a plain socket (header v1), its response
    body (after the correlation id)."""
    import socket
    import struct

    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    client = b"drctl-test-legacy"
    header = struct.pack(">hhih", api_key, version, 1, len(client)) + client
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(struct.pack(">i", len(header) + len(body)) + header + body)
        size = struct.unpack(">i", _read_exactly(sock, 4))[0]
        return _read_exactly(sock, size)[4:]


def _read_exactly(sock: Any, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        data += chunk
    return data


def _string(text: str) -> bytes:
    import struct

    raw = text.encode()
    return struct.pack(">h", len(raw)) + raw


def commit_as_legacy_consumer(bootstrap: str, group: str, topic: str,
                              offsets: dict[int, int], deadline_s: float = 60) -> None:
    """Commit `offsets` (partition -> offset) of `topic` for `group` as a consumer of Kafka's
    first clients did: a plain OffsetCommit (v2, generation -1, no member), which the
    brokers still accept for the group "" that librdkafka refuses to name. The lab has one
    broker per cluster: it is every group's coordinator (asked again while it loads)."""
    import struct

    body = (_string(group) + struct.pack(">i", -1) + _string("") + struct.pack(">q", -1)
            + struct.pack(">i", 1) + _string(topic) + struct.pack(">i", len(offsets))
            + b"".join(struct.pack(">iq", p, o) + struct.pack(">h", -1)
                       for p, o in sorted(offsets.items())))
    end = time.monotonic() + deadline_s
    while True:
        answer = _kafka_request(bootstrap, 8, 2, body)
        # topics[1]: name, partitions[n]: (partition, error code)
        at = 4 + 2 + struct.unpack(">h", answer[4:6])[0]
        count = struct.unpack(">i", answer[at:at + 4])[0]
        codes = [struct.unpack(">ih", answer[at + 4 + 6 * i:at + 10 + 6 * i])[1]
                 for i in range(count)]
        if all(code == 0 for code in codes):
            return
        # 14, 15, 16: the coordinator is loading, not there yet, or moving
        if set(codes) - {0, 14, 15, 16} or time.monotonic() > end:
            raise AssertionError(f"OffsetCommit for group {group!r} answered {codes}")
        time.sleep(0.5)


def delete_as_legacy_admin(bootstrap: str, group: str) -> int:
    """Delete `group` with a plain DeleteGroups (v1); the broker's error code (0: done)."""
    import struct

    answer = _kafka_request(bootstrap, 42, 1, struct.pack(">i", 1) + _string(group))
    # throttle_time_ms, results[1]: (group id, error code)
    at = 4 + 4 + 2 + struct.unpack(">h", answer[8:10])[0]
    return int(struct.unpack(">h", answer[at:at + 2])[0])
