"""gap-analysis against real clusters: exactly the records produced after replication stopped
are reported (checked record by record), and --check-order classifies exactly the sets the
test built. Aborted transactions are never a gap."""

from __future__ import annotations

import dataclasses
import json
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaException, TopicPartition

from drctl.config import Config, SparkSettings, load_config
from drctl.context import OpsContext
from drctl.errors import TimedOut
from drctl.gap.planner import plan_gap_analysis
from drctl.gap.result import GapRecord, GapResult
from drctl.gap.runner import run_gap_analysis
from drctl.kafka.clients import ClusterClients
from drctl.kafka.records import read_all
from drctl.lab.workload import WorkloadSpec, create_topics, run_workload
from tests.conftest import RunningLab
from tests.json_schemas import validate_output
from tests.lab.support import run_drctl, wait_replicated

pytestmark = [pytest.mark.lab, pytest.mark.spark]
PARTS = 3

# What a record is, for comparing what was produced with what was reported.
Ident = tuple[str, int, int, bytes | None, bytes | None, int, tuple[tuple[str, Any], ...]]


@dataclasses.dataclass
class Sent:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp_ms: int
    headers: tuple[tuple[str, bytes | None], ...]
    expect: str  # safe | conflict | unkeyed-flagged | unkeyed | aborted

    def ident(self) -> Ident:
        return (self.topic, self.partition, self.offset, self.key, self.value,
                self.timestamp_ms, self.headers)


def ident(rec: GapRecord) -> Ident:
    return (rec.topic, rec.partition, rec.offset, rec.key, rec.value, rec.timestamp_ms,
            rec.headers)


class Producer:
    def __init__(self, clients: ClusterClients, topic: str) -> None:
        self.clients = clients
        self.topic = topic
        self.producer = clients.producer()
        self.sent: list[Sent] = []
        self.ts = int(time.time() * 1000) - 60_000

    def send(self, partition: int, key: bytes | None, value: bytes | None, expect: str, *,
             headers: Iterable[tuple[str, bytes | None]] = (), ts: int | None = None,
             producer: Any = None) -> None:
        self.ts += 1
        stamp = self.ts if ts is None else ts
        hdrs = tuple(headers)

        def done(err: Any, msg: Any) -> None:
            assert err is None, err
            self.sent.append(Sent(self.topic, msg.partition(), msg.offset(), key, value, stamp,
                                  hdrs, expect))
        (producer or self.producer).produce(self.topic, key=key, value=value,
                                            partition=partition, timestamp=stamp,
                                            headers=list(hdrs), on_delivery=done)

    def flush(self) -> None:
        assert self.producer.flush(30) == 0

    def transaction(self, records: list[tuple[int, bytes | None, bytes]], *,
                    abort: bool) -> None:
        self.flush()
        txp = self.clients.producer(**{"transactional.id": f"{self.topic}-{len(self.sent)}"})
        txp.init_transactions(30)
        txp.begin_transaction()
        for p, key, value in records:
            self.send(p, key, value, "aborted" if abort else "safe", producer=txp)
        txp.flush(30)
        if abort:
            txp.abort_transaction(30)
        else:
            txp.commit_transaction(30)


def ends(clients: ClusterClients, topic: str) -> dict[int, int]:
    consumer = clients.consumer()
    deadline = time.monotonic() + 20
    try:
        while True:
            try:
                return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10,
                                                          cached=False)[1] for p in range(PARTS)}
            except KafkaException:  # a topic created a moment ago may still elect leaders
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
    finally:
        consumer.close()


def produce_gap(primary: Producer, earlier: Any) -> None:
    """N records only the source will hold, each with the class the order check must give."""
    for i in range(6):
        primary.send(i % PARTS, b"safe-%d" % i, b"v%d" % i, "safe",
                     headers=[("h", b"%d" % i)] if i % 2 else ())
    for i in range(4):
        primary.send((i * 2) % PARTS, b"conf-%d" % i, b"old-%d" % i, "conflict")
    for i in range(3):
        primary.send(0, None, b"unkeyed-p0-%d" % i, "unkeyed-flagged")
        primary.send(1, None, b"unkeyed-p1-%d" % i, "unkeyed")
    primary.send(2, b"tomb", None, "safe")
    primary.send(1, b"", b"", "safe")
    same = primary.ts + 1
    for _ in range(2):  # identical copies, both unreplicated
        primary.send(2, b"twin", b"twin", "safe", headers=[("n", None)], ts=same)
    # A verbatim copy of a record the target holds: only this second copy is missing.
    primary.send(earlier.partition, earlier.key, earlier.value,
                 "unkeyed-flagged" if earlier.key is None and earlier.partition != 1
                 else "unkeyed" if earlier.key is None else "safe",
                 headers=earlier.headers, ts=earlier.timestamp_ms)
    primary.transaction([(0, b"txn-a", b"aborted"), (2, None, b"aborted")], abort=True)
    primary.transaction([(2, b"txn-c", b"committed")], abort=False)
    primary.flush()


def post_failover_writes(secondary: Producer) -> None:
    """Writes to the failover topic on the target: keys conf-* (one of them in another
    partition than its gap record), a null key in partition 0, nothing in partition 1."""
    for i in range(4):
        secondary.send(2 if i == 0 else 0, b"conf-%d" % i, b"new-%d" % i, "post")
    secondary.send(0, None, b"post-unkeyed", "post")
    secondary.send(2, b"brand-new", b"x", "post")
    secondary.flush()


def check(result: GapResult, gap: list[Sent]) -> None:
    expected = {s.ident(): s.expect for s in gap if s.expect != "aborted"}
    got = {ident(r): r for r in result.iter_records()}
    assert set(got) == set(expected), (sorted(set(got) - set(expected))[:3],
                                       sorted(set(expected) - set(got))[:3])
    assert result.totals["unreplicated"] == len(expected)
    for key, want in expected.items():
        rec = got[key]
        if want.startswith("unkeyed"):
            assert rec.classification == "unkeyed", key
            assert rec.flagged == (want == "unkeyed-flagged"), key
        else:
            assert rec.classification == want, key
        if want == "conflict":
            assert rec.conflicts and all(w.offset >= 0 for w in rec.conflicts)
    t = result.totals
    assert t["conflict"] == 4
    assert t["safe"] + t["conflict"] + t["unkeyed"] == len(expected)
    by_p = {p["partition"]: p for p in result.partitions}
    # post_failover_writes: four in partition 0, two in 2, none elsewhere.
    assert {p: row["post_failover_writes"] for p, row in by_p.items()} == {
        p: {0: 4, 2: 2}.get(p, 0) for p in range(PARTS)}
    for p, row in by_p.items():
        mine = sorted(s.offset for s in gap if s.partition == p and s.expect != "aborted")
        assert row["unreplicated"] == len(mine)
        if mine:
            assert (row["first_offset"], row["last_offset"]) == (mine[0], mine[-1])


def lab_config(lab: RunningLab, **replication: Any) -> Config:
    config = load_config(lab.config_file)
    rep = config.require_replication()
    return dataclasses.replace(config, replication=dataclasses.replace(rep, **replication))


def gap_cli(lab: RunningLab, args: list[str]) -> tuple[int, str, str]:
    """`drctl gap-analysis -o json ARGS…` in this process; its document checked against the
    schema."""
    code, stdout, stderr = run_drctl("--config", str(lab.config_file), "--output", "json",
                                     "gap-analysis", *args)
    validate_output(["gap-analysis"], json.loads(stdout))
    return code, stdout, stderr


def scenario(lab: RunningLab, ns: str, failover_topic_offsets: bool
             ) -> tuple[str, list[Sent], dict[int, int], dict[int, int] | None]:
    topic = f"{ns}-orders"
    spec = WorkloadSpec(topics=(topic,), partitions=PARTS, records=300, seed=4,
                        burst_every=100, burst_size=20, transactions=2, groups=())
    workload = run_workload(lab.primary, spec)
    wait_replicated(lab, topic, len(workload.visible()))
    lab.lab.fail("replication")
    primary = Producer(lab.primary, topic)
    produce_gap(primary, workload.visible()[7])
    f_point = ends(lab.secondary, lab.mirror(topic))
    # The failover topic is the mirror itself when names are kept, else the plain name.
    fo_start = None
    if failover_topic_offsets:
        create_topics(lab.secondary, (topic,), PARTS)
        fo_start = ends(lab.secondary, topic)
    post_failover_writes(Producer(lab.secondary, topic))
    return topic, primary.sent, f_point, fo_start


def test_gap_names_kept_through_the_cli(lab: RunningLab, ns: str, tmp_path: Path) -> None:
    try:
        topic, gap, f_point, _ = scenario(lab, ns, failover_topic_offsets=False)
        out = tmp_path / "gap"
        target_end = json.dumps({topic: {str(p): o for p, o in f_point.items()}})
        code, stdout, stderr = gap_cli(lab, [
            "--topics", topic, "--target-end", target_end, "--check-order",
            "--report-dir", str(out),
            "--to-topic", f"{ns}-quarantine", "--yes"])
        assert code == 3, stderr  # conflicts exist
        data = json.loads(stdout)
        assert data["totals"]["conflict"] == 4
        assert {c["key"] for c in data["conflicts"]} == {(b"conf-%d" % i).hex()
                                                         for i in range(4)}
        check(GapResult.load(out), gap)
        assert json.loads((out / "summary.json").read_text())["totals"]["unreplicated"] == len(
            [s for s in gap if s.expect != "aborted"])
        # The quarantine topic holds the same records, partition by partition, in order.
        quarantined = read_all(lab.secondary, f"{ns}-quarantine")
        want = sorted((s for s in gap if s.expect != "aborted"),
                      key=lambda s: (s.partition, s.offset))
        assert [(r.partition, r.key, r.value, r.timestamp_ms, r.headers) for r in quarantined] \
            == [(s.partition, s.key, s.value, s.timestamp_ms, s.headers) for s in want]
        # --fail-on-gap without --check-order: exit 3 because records are missing.
        code, stdout, _ = gap_cli(lab, ["--topics", topic, "--target-end", target_end,
                                        "--fail-on-gap"])
        assert code == 3 and json.loads(stdout)["totals"]["unreplicated"] == len(want)
    finally:
        lab.lab.heal("replication")


def test_gap_prefixed_names_as_a_library(lab_prefixed: RunningLab, ns: str,
                                         monkeypatch: pytest.MonkeyPatch,
                                         full_matrix: bool) -> None:
    """In the full matrix the same plan runs as a large one too (generated code, adaptive
    execution, its frames cached on the server: gap/job.py `_sql_defaults`) and finds the
    same: 30 s more of a loaded run, and no plan of the suite's is large."""
    from drctl.gap import job

    lab = lab_prefixed
    try:
        topic, gap, f_point, fo_start = scenario(lab, ns, failover_topic_offsets=True)
        assert fo_start is not None
        config = lab_config(lab)
        plan = plan_gap_analysis(OpsContext.from_config(config), [topic],
                                 target_end={f"primary.{topic}": f_point},
                                 post_failover_start={topic: fo_start}, check_order=True)
        assert plan.topics[0].target_topic == f"primary.{topic}"
        assert plan.topics[0].failover_topic == topic
        with run_gap_analysis(plan, config.spark) as result:
            check(result, gap)
            assert result.temporary
        assert not Path(plan.out_dir).exists()
        if not full_matrix:
            return
        monkeypatch.setattr(job, "SMALL_PLAN_ROWS", 0)  # this plan, run as a large one
        large = dataclasses.replace(plan, out_dir=tempfile.mkdtemp(prefix="drctl-gap-"))
        assert not job.small_plan(large)
        with run_gap_analysis(large, config.spark) as result:
            check(result, gap)
        assert not Path(large.out_dir).exists()
    finally:
        lab.lab.heal("replication")


def test_gap_identity_mirror(lab_prefixed: RunningLab, ns: str) -> None:
    """Equal offsets: the gap is [F, source end); a changed record in the overlap is reported
    as divergence."""
    lab = lab_prefixed  # its MirrorMaker prefixes names: it never touches these topics
    topic = f"{ns}-ident"
    for clients in (lab.primary, lab.secondary):
        create_topics(clients, (topic,), PARTS)
    primary, secondary = Producer(lab.primary, topic), Producer(lab.secondary, topic)
    for i in range(60):
        key = None if i % 7 == 0 else b"k%d" % (i % 11)
        value = b"v%d" % i
        headers = [("i", b"%d" % i)] if i % 3 == 0 else []
        primary.send(i % PARTS, key, value, "both", headers=headers)
        secondary.send(i % PARTS, key, b"CHANGED" if i == 31 else value, "both",
                       headers=headers, ts=primary.ts)
    primary.flush()
    secondary.flush()
    changed = next(s for s in secondary.sent if s.value == b"CHANGED")
    f_point = ends(lab.secondary, topic)
    assert f_point == ends(lab.primary, topic)
    before = len(primary.sent)
    for i in range(4):
        primary.send(i % PARTS, b"k%d" % i, b"late-%d" % i, "conflict" if i == 1 else "safe")
    primary.send(1, None, b"late-unkeyed", "unkeyed")
    primary.transaction([(0, b"gone", b"aborted")], abort=True)
    primary.send(0, b"after-abort", b"x", "safe")
    primary.flush()
    secondary.send(1, b"k1", b"post-failover", "post")
    secondary.flush()

    config = lab_config(lab, kind="identity", rename="{topic}")
    plan = plan_gap_analysis(OpsContext.from_config(config), [topic],
                             target_end={topic: f_point}, check_order=True)
    assert plan.kind == "identity"
    with run_gap_analysis(plan, config.spark) as result:
        gap = primary.sent[before:]
        check_identity(result, gap)
        assert result.totals["divergent"] == 1
        assert [(d["partition"], d["offset"]) for d in result.divergence_sample] == [
            (changed.partition, changed.offset)]
        assert result.totals["source_records"] == 60 + len(
            [s for s in gap if s.expect != "aborted"])
        assert result.totals["target_records"] == 60


def check_identity(result: GapResult, gap: list[Sent]) -> None:
    expected = {s.ident(): s.expect for s in gap if s.expect != "aborted"}
    got = {ident(r): r for r in result.iter_records()}
    assert set(got) == set(expected)
    for key, want in expected.items():
        assert got[key].classification == want, key
    # Partition 1 received a post-failover write: its unkeyed gap record is flagged.
    assert [r.flagged for r in got.values() if r.classification == "unkeyed"] == [True]


def test_gap_jobs_in_turn_on_the_spark_connect_server_and_a_timeout_interrupts_one(
        lab_prefixed: RunningLab, ns: str) -> None:
    """spark.remote (the test worker's server): jobs run in turn on it, each finds exactly its
    gap; a job past its timeout is interrupted (TimedOut) and leaves the server to the next;
    a job of its own (spark.master) finds the same."""
    lab = lab_prefixed  # its MirrorMaker prefixes names: it never touches this topic
    topic = f"{ns}-remote"
    for clients in (lab.primary, lab.secondary):
        create_topics(clients, (topic,), PARTS)
    primary = Producer(lab.primary, topic)
    for i in range(30):
        primary.send(i % PARTS, b"k%d" % i, b"v%d" % i, "safe")
    primary.flush()
    config = lab_config(lab, kind="identity", rename="{topic}")
    assert config.spark.remote
    want = {s.ident() for s in primary.sent}

    def found(spark: SparkSettings = config.spark, **kwargs: Any) -> set[Ident]:
        plan = plan_gap_analysis(OpsContext.from_config(config), [topic],
                                 target_end={topic: dict.fromkeys(range(PARTS), 0)})
        with run_gap_analysis(plan, spark, **kwargs) as result:
            assert result.connector == "the Spark Connect server's classpath" or \
                not spark.remote
            return {ident(r) for r in result.iter_records()}

    assert found() == want
    assert found() == want
    with pytest.raises(TimedOut):
        found(timeout_s=0.2)
    assert found() == want
    assert found(SparkSettings(master="local[2]")) == want
