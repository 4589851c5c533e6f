"""The Spark job of `drctl gap-analysis`.

drctl starts it in its own process (`python -m drctl.gap.job PLAN --events-fd N`), or runs
`GapJob` in its own process on a Spark Connect session (runner.py, remote.py: no JVM here);
the same file runs under spark-submit:

    PYSPARK_PYTHON=python3 spark-submit --jars <connector jars> drctl/gap/job.py PLAN

where PLAN is a plan file written by `drctl gap-analysis --plan-out PLAN`. It writes the
unreplicated records as Parquet (`records/`) and `summary.json` into the plan's `out_dir`.

Stages (docs/design.md §5): (1) one shuffle of narrow rows (tix, partition, fingerprint, sign,
offset) gives the multiset difference; (2) only when identical records are among the missing,
their copies are located by a second, bounded read; (3) on compacted topics, missing records
the target copied and then compacted away (superseded) leave the gap, found by a narrow read of
keys; (4) payloads are read back for the missing offsets only; (5) `--check-order` joins them
with the post-failover writes by key.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import weakref
from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, Any

from pyspark.sql import Column, DataFrame, Observation, SparkSession
from pyspark.sql import functions as F

from drctl.fingerprint.spark import FP_TYPE, digest_bytes
from drctl.gap import diff
from drctl.gap.class_archive import QUICK_JIT
from drctl.gap.plan import IDENTITY, GapPlan, TopicPlan
from drctl.gap.result import RECORDS_DIR, SUMMARY_FILE, scope_fields, tally, totals

Ranges = dict[str, dict[int, tuple[int, int]]]  # topic -> partition -> [start, end)
Emit = Callable[[dict[str, Any]], None]
_WRITES = "tix int, partition int, offset bigint, key binary, timestamp_ms bigint"  # post-failover
# Larger fetches than the Java client's defaults: the job reads whole ranges end to end.
_FETCH_DEFAULTS = {"kafka.max.partition.fetch.bytes": str(8 << 20),
                   "kafka.fetch.max.bytes": str(64 << 20),
                   "kafka.receive.buffer.bytes": str(1 << 20),
                   # A range that ends at the log's end (the target up to F, the source's
                   # tail) leaves one fetch waiting at the end for new records: the default
                   # 500 ms, paid by every task. Fetches with data return at once anyway.
                   "kafka.fetch.max.wait.ms": "10"}

DIVERGENCE_SAMPLE = 100
SORT_IN_ONE_TASK = 2_000_000  # unreplicated records: fewer are sorted and written by one task
_WORK = ".work"
_INTERMEDIATE = ("groups", "missing", "superseded", "gap", "divergence", "post-failover",
                 "spark-local")

# Spark's own log lines, and the JVM's, go to stderr at this level unless --debug.
_LOG4J2 = """status = error
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
rootLogger.level = {level}
rootLogger.appenderRef.console.ref = console
"""


class JobEvents:
    """Progress, then done or error, to drctl: `send` takes each event (JSON lines on a pipe
    from the job's own process, or drctl's own follower on a Spark Connect session); silent
    when the job runs under spark-submit without --events-fd."""

    def __init__(self, send: Emit | None) -> None:
        self._send = send
        self._lock = threading.Lock()
        self.phase = "starting"
        self._since = time.monotonic()
        self.timings: dict[str, float] = {}

    @classmethod
    def to_stream(cls, stream: IO[str] | None) -> JobEvents:
        def write(event: dict[str, Any]) -> None:
            assert stream is not None
            stream.write(json.dumps(event) + "\n")
            stream.flush()

        return cls(write if stream is not None else None)

    @property
    def silent(self) -> bool:
        return self._send is None

    def emit(self, event: dict[str, Any]) -> None:
        if self._send is None:
            return
        with self._lock:
            self._send(event)

    def enter(self, phase: str) -> None:
        now = time.monotonic()
        self.timings[self.phase] = round(self.timings.get(self.phase, 0.0) + now - self._since, 3)
        self._since = now
        self.phase = phase
        self.emit({"event": "phase", "phase": phase})


def is_connect(spark: SparkSession) -> bool:
    """Whether `spark` is a Spark Connect session (no SparkContext, no JVM in this process)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def default_parallelism(spark: SparkSession) -> int:
    """The cores Spark schedules tasks on. A Spark Connect session has no SparkContext to ask:
    a range without a partition count is split into exactly that many partitions (asked once
    per session)."""
    if not is_connect(spark):
        return int(spark.sparkContext.defaultParallelism)
    if spark not in _CONNECT_PARALLELISM:
        parts = spark.range(0, 1 << 16).select(F.spark_partition_id().alias("p"))
        _CONNECT_PARALLELISM[spark] = int(parts.agg(F.max("p")).first()[0]) + 1  # type: ignore[index]
    return _CONNECT_PARALLELISM[spark]


_CONNECT_PARALLELISM: weakref.WeakKeyDictionary[SparkSession, int] = \
    weakref.WeakKeyDictionary()


def follow_progress(spark: SparkSession, events: JobEvents) -> Callable[[], None]:
    """Report the tasks of Spark's running stages as progress events; returns what stops it.
    A SparkContext's status tracker is polled; a Spark Connect session reports each
    operation's stages itself."""
    if not is_connect(spark):
        poller = StatusPoller(spark, events)
        poller.start()
        return poller.stop
    last: list[tuple[str, int, int]] = []

    def handler(**info: Any) -> None:
        stages = info.get("stages") or []
        now = (events.phase, sum(s.num_completed_tasks for s in stages),
               sum(s.num_tasks for s in stages))
        if now[2] and now not in last:
            last[:] = [now]
            events.emit({"event": "progress", "phase": now[0], "done": now[1],
                         "total": now[2]})

    spark.registerProgressHandler(handler)  # type: ignore[arg-type]
    return lambda: spark.removeProgressHandler(handler)  # type: ignore[arg-type]


class StatusPoller(threading.Thread):
    """Reports the tasks of Spark's active stages twice a second."""

    def __init__(self, spark: SparkSession, events: JobEvents, interval_s: float = 0.5) -> None:
        super().__init__(name="drctl-spark-progress", daemon=True)
        self._tracker = spark.sparkContext.statusTracker()
        self._events = events
        self._interval = interval_s
        self._halt = threading.Event()

    def run(self) -> None:
        last: tuple[str, int, int] | None = None
        while not self._halt.wait(self._interval):
            done = total = 0
            for stage_id in self._tracker.getActiveStageIds():
                info = self._tracker.getStageInfo(stage_id)
                if info is not None:
                    done += info.numCompletedTasks
                    total += info.numTasks
            now = (self._events.phase, done, total)
            if total and now != last:
                self._events.emit({"event": "progress", "phase": now[0], "done": done,
                                   "total": total})
                last = now

    def stop(self) -> None:
        self._halt.set()


def _compared_rows(plan: GapPlan) -> int:
    return sum(t.source_end[p] - t.source_start[p] + t.target_end[p] - t.target_start[p]
               for t in plan.topics for p in t.partitions)


# Fewer records than this: the driver JVM compiles with C1 only. A small job (a tail scope) is
# mostly the JVM warming up, which C1 shortens by seconds; past about a million records C2's
# faster hashing wins it back (10M records per side took 1.7x as long with C1 only).
_QUICK_JIT_ROWS = 1_000_000


# Fewer records than this compared: a small plan. Its queries are mostly Spark's fixed cost
# per query — planning, generating and compiling code, a task and a Kafka consumer per
# split — not the records: interpreted expressions, no optimizer rules that pay only at
# scale, one task per Kafka partition and few shuffle partitions cost a small job a fraction
# of the CPU. Measured, not guessed: bench/bench_gap_warm.py and docs/performance.md.
SMALL_PLAN_ROWS = 50_000


def _range_rows(ranges: Ranges) -> int:
    return sum(end - start for parts in ranges.values() for start, end in parts.values())


def small_plan(plan: GapPlan) -> bool:
    return _compared_rows(plan) <= SMALL_PLAN_ROWS


def _sql_defaults(plan: GapPlan, parallelism: Callable[[], int]) -> dict[str, str]:
    # Spark's 200 shuffle partitions suit a cluster. A few per core keep small shuffles and
    # writes cheap, and about a million narrow rows per partition keep each hash map in
    # memory.
    rows = _compared_rows(plan)
    small = small_plan(plan)
    return {
        # Fingerprints are unique per record: a map-side partial aggregation would only copy
        # every row into a hash map before the shuffle.
        "spark.sql.execution.bypassPartialAggregation": "true",
        # A small plan's few rows in two (no question to the server for its cores).
        "spark.sql.shuffle.partitions": str(2 if small
                                            else max(4 * parallelism(), rows // 1_000_000)),
        "spark.sql.session.timeZone": "UTC",
        # Set either way: a session may run a small plan after a large one.
        "spark.sql.codegen.wholeStage": "false" if small else "true",
        # Spark's own switch between generated and interpreted expressions (its
        # CodeGeneratorWithInterpretedFallback): interpreted for a small plan.
        "spark.sql.codegen.factoryMode": "NO_CODEGEN" if small else "FALLBACK",
        # Filters inferred from constraints: most of a small query's optimizer time when the
        # plan joins the same inputs several times (the diff, the order check).
        "spark.sql.constraintPropagation.enabled": "false" if small else "true",
        # Re-planning at every stage pays when stages are large.
        "spark.sql.adaptive.enabled": "false" if small else "true",
    }


def build_session(plan: GapPlan) -> SparkSession:
    """The session `plan` asks for, in this process's own JVM."""
    builder = SparkSession.builder.appName("drctl gap-analysis")
    settings = plan.spark
    if settings is None:  # under spark-submit: its command line decides, then our defaults
        spark = builder.getOrCreate()
        spark.sparkContext.setLogLevel("WARN")
        given = spark.sparkContext.getConf()
        for key, value in _sql_defaults(plan, lambda: default_parallelism(spark)).items():
            if not given.contains(key):
                spark.conf.set(key, value)
        return spark
    work = Path(plan.out_dir) / _WORK
    work.mkdir(parents=True, exist_ok=True)
    quick = _compared_rows(plan) <= _QUICK_JIT_ROWS
    log4j = work / "log4j2.properties"
    log4j.write_text(_LOG4J2.replace("{level}", "info" if settings.debug else "error"))
    conf = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.extraJavaOptions": " ".join(
            [f"-Dlog4j2.configurationFile=file:{log4j}", *settings.driver_java_options]
            + ([QUICK_JIT] if quick else [])),
        "spark.local.dir": str(work / "spark-local"),
    }
    if quick:  # executors in their own JVMs (a cluster) warm up the same way
        conf["spark.executor.extraJavaOptions"] = QUICK_JIT
    if settings.jars:
        conf["spark.jars"] = ",".join(settings.jars)
    if settings.packages:
        conf["spark.jars.packages"] = ",".join(settings.packages)
    conf.update(settings.conf)
    builder = builder.master(settings.master)
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("INFO" if settings.debug else "ERROR")
    return plan_session(spark, plan, settings.conf)


def plan_session(spark: SparkSession, plan: GapPlan, given: Mapping[str, str]) -> SparkSession:
    """`spark` with the SQL settings sized for `plan` (those the config's `given` leaves
    open)."""
    for key, value in _sql_defaults(plan, lambda: default_parallelism(spark)).items():
        if key not in given:
            spark.conf.set(key, value)
    return spark


class GapJob:
    def __init__(self, spark: SparkSession, plan: GapPlan, events: JobEvents) -> None:
        self.spark = spark
        self.plan = plan
        self.events = events
        self.tix = plan.topic_index()
        self.out = Path(plan.out_dir)
        self.work = self.out / _WORK
        self.connect = is_connect(spark)
        self.small = small_plan(plan)
        self.gap_rows = 0  # how many unreplicated records the analysis expects
        self._cached: list[DataFrame] = []

    def parallelism(self) -> int:
        """The cores Spark schedules tasks on (asked of a Spark Connect server once per
        session, only by a plan that is not small)."""
        return max(2, default_parallelism(self.spark))

    # -- reading ------------------------------------------------------------------------------

    def read(self, kafka: Mapping[str, str], ranges: Ranges) -> DataFrame | None:
        """A batch read of numeric offset ranges; None when every range is empty."""
        ranges = {t: {p: r for p, r in parts.items() if r[1] > r[0]}
                  for t, parts in ranges.items()}
        ranges = {t: parts for t, parts in ranges.items() if parts}
        if not ranges:
            return None
        assign = {t: sorted(parts) for t, parts in ranges.items()}
        start = {t: {str(p): r[0] for p, r in parts.items()} for t, parts in ranges.items()}
        end = {t: {str(p): r[1] for p, r in parts.items()} for t, parts in ranges.items()}
        options = {**_FETCH_DEFAULTS, **self.plan.waits, **kafka}
        return (self.spark.read.format("kafka").options(**options)
                .option("assign", json.dumps(assign))
                .option("startingOffsets", json.dumps(start))
                .option("endingOffsets", json.dumps(end))
                .option("includeHeaders", "true")
                # Splits big Kafka partitions so every core has work; a small plan reads
                # each in one task (a task and a consumer per split is its cost).
                .option("minPartitions", str(1 if self.small else 2 * self.parallelism()))
                .load())

    def source_ranges(self, bounds: Callable[[TopicPlan, int], tuple[int, int]]) -> Ranges:
        return {t.source_topic: {p: bounds(t, p) for p in t.partitions}
                for t in self.plan.topics}

    def target_ranges(self) -> Ranges:
        # Late copies past F are copies: read up to the last of them so they match.
        return {t.target_topic: {p: (t.target_start[p],
                                     max([t.target_end[p]] + [r[1] for r in
                                                              t.late_runs.get(p, [])]))
                                 for p in t.partitions}
                for t in self.plan.topics}

    def late_offsets(self) -> DataFrame | None:
        """(tix, partition, offset) of late copies sitting in a failover topic (names kept):
        never post-failover writes."""
        rows = [(i, p, o) for i, t in enumerate(self.plan.topics)
                if t.failover_topic == t.target_topic
                for p, runs in t.late_runs.items() for start, end in runs
                for o in range(start, end)]
        if not rows:
            return None
        return self.spark.createDataFrame(rows, "tix int, partition int, offset bigint")

    def source_names(self) -> dict[str, int]:
        return dict(self.tix)

    def target_names(self) -> dict[str, int]:
        return {t.target_topic: i for i, t in enumerate(self.plan.topics)}

    def compared(self, side: str) -> set[str]:
        return {t.source_topic if side == "source" else t.target_topic
                for t in self.plan.topics if t.compare_timestamps}

    def counted(self, df: DataFrame | None, name: str) -> tuple[DataFrame | None,
                                                                Observation | None]:
        """`df` observed with a record count per (tix, partition), gathered by the action
        that runs it (no extra pass over Kafka)."""
        if df is None:
            return None, None
        exprs: list[Column] = []
        for i, t in enumerate(self.plan.topics):
            for p in t.partitions:
                cond = (F.col("tix") == i) & (F.col("partition") == p)
                exprs.append(F.count_if(cond).alias(f"{i}:{p}"))
        obs = Observation(name)
        return df.observe(obs, *exprs), obs

    @staticmethod
    def counts(obs: Observation | None) -> dict[tuple[int, int], int]:
        if obs is None:
            return {}
        out = {}
        for key, value in obs.get.items():
            i, p = key.split(":")
            out[(int(i), int(p))] = int(value)
        return out

    def empty_narrow(self) -> DataFrame:
        return self.spark.createDataFrame(
            [], f"tix int, partition int, fp {FP_TYPE}, sign tinyint, offset bigint")

    def materialize(self, df: DataFrame, name: str, *, by_next_query: bool = False
                    ) -> DataFrame:
        """`df` computed once (and its observations gathered). Its own process writes it to
        the work directory; a Spark Connect server shares no file system with drctl, and
        keeps it cached in its executors until the job ends (`release`) — computed by a
        count, or with `by_next_query` by the next query that reads it (its observations
        are gathered then): a query less."""
        if self.connect:
            df = df.cache()
            if not by_next_query:
                df.count()
            self._cached.append(df)
            return df
        path = str(self.work / name)
        df.write.mode("overwrite").parquet(path)
        return self.spark.read.parquet(path)

    def release(self) -> None:
        """What `materialize` cached on a Spark Connect server."""
        for df in self._cached:
            df.unpersist()
        self._cached.clear()

    # -- the analysis -------------------------------------------------------------------------

    def run(self) -> dict[str, Any]:
        started = time.monotonic()
        if self.plan.kind == IDENTITY:
            gap, counts, divergence = self.identity()
        else:
            gap, counts = self.multiset()
            divergence = []
        post_counts: dict[tuple[int, int], int] = {}
        if self.plan.check_order:
            self.events.enter("check-order")
            gap, post_counts = self.check_order(gap)
        self.events.enter("write")
        columns = [F.col("topic"), F.col("partition"), F.col("offset"),
                   F.unix_millis("timestamp").alias("timestamp_ms"),
                   F.col("timestampType").alias("timestamp_type"), F.col("key"), F.col("value"),
                   F.col("headers")]
        if self.plan.check_order:
            columns += [F.col("classification"), F.col("conflicts"), F.col("partition_writes")]
        records_path = self.out / RECORDS_DIR
        ordered = gap.select(F.col("tix"), *columns)
        if self.connect:
            written = self.fetch(ordered, records_path)
        else:
            if self.gap_rows <= SORT_IN_ONE_TASK:
                # One sorted file in one pass: no sampling job, no second read of Kafka.
                ordered = ordered.repartition(1).sortWithinPartitions("tix", "partition",
                                                                       "offset")
            else:
                # Materialized first: a global sort samples its input, and that must not be a
                # Kafka read.
                ordered = self.materialize(ordered, "gap").orderBy("tix", "partition",
                                                                   "offset")
            # Counted by Spark as its executors write: on a cluster, the driver's machine must
            # see every record they wrote (runner.check_shared_output).
            observed = Observation("written")
            (ordered.drop("tix").observe(observed, F.count(F.lit(1)).alias("n"))
             .write.mode("overwrite").parquet(str(records_path)))
            written = int(observed.get["n"])
        summary = self.summarize(records_path, counts, post_counts, divergence)
        summary["records_path"] = str(records_path)
        summary["records_written"] = written
        self.events.enter("done")
        summary["elapsed_s"] = round(time.monotonic() - started, 3)
        summary["phases_s"] = dict(self.events.timings)
        return summary

    def fetch(self, ordered: DataFrame, records_path: Path) -> int:
        """The unreplicated records over the Spark Connect session (Arrow), in one query,
        written here as the Parquet file its own process would write: the failback host needs
        no storage shared with the server. Returns how many."""
        import pyarrow.parquet as pq

        if self.small:
            # Sorted in one task: a global sort would first sample its input, reading Kafka
            # a second time. Only for a small plan: a task's result comes back whole, and a
            # large one outgrows the server's memory store (TaskResultLost).
            ordered = ordered.repartition(1).sortWithinPartitions("tix", "partition", "offset")
        else:
            # Sorted, then cached: read back from the cache in its sorted blocks.
            ordered = self.materialize(ordered.orderBy("tix", "partition", "offset"), "gap")
        table = ordered.drop("tix").toArrow()
        shutil.rmtree(records_path, ignore_errors=True)
        records_path.mkdir(parents=True)
        pq.write_table(table, records_path / "part-00000.parquet")
        return int(table.num_rows)

    def multiset(self) -> tuple[DataFrame, dict[str, dict[tuple[int, int], int]]]:
        self.events.enter("diff")
        src_raw = self.read(self.plan.source_kafka,
                            self.source_ranges(lambda t, p: (t.source_start[p], t.source_end[p])))
        tgt_raw = self.read(self.plan.target_kafka, self.target_ranges())
        src, src_obs = self.counted(
            None if src_raw is None else diff.narrow(src_raw, self.source_names(), sign=1,
                                                     compared=self.compared("source")),
            "source")
        tgt, tgt_obs = self.counted(
            None if tgt_raw is None else diff.narrow(tgt_raw, self.target_names(), sign=-1,
                                                     compared=self.compared("target")),
            "target")
        # On a Spark Connect server the query below computes (and caches) it.
        groups = self.materialize(
            diff.unmatched_groups(src if src is not None else self.empty_narrow(),
                                  tgt if tgt is not None else self.empty_narrow()),
            "groups", by_next_query=True)

        # One look at the (small) unmatched groups answers both questions: where the copies
        # of identical records live, and which source offsets hold the payloads.
        is_multi, is_single = F.col("n_src") > 1, F.col("n_src") == 1
        spans = (groups.groupBy(*diff.KEYS)
                 .agg(F.min(F.when(is_multi, F.col("first_src"))).alias("multi_lo"),
                      F.max(F.when(is_multi, F.col("last_src"))).alias("multi_hi"),
                      F.min(F.when(is_single, F.col("last_src"))).alias("single_lo"),
                      F.max(F.when(is_single, F.col("last_src"))).alias("single_hi"),
                      F.sum("net").alias("missing")).collect())
        counts = {"source": self.counts(src_obs), "target": self.counts(tgt_obs)}
        self.events.enter("duplicates")
        self.gap_rows = sum(r["missing"] for r in spans)
        multi = {(r["tix"], r["partition"]): (r["multi_lo"], r["multi_hi"] + 1)
                 for r in spans if r["multi_lo"] is not None}
        copies = None
        if multi:
            raw = self.read(self.plan.source_kafka, self._by_topic(multi))
            if raw is not None:
                copies = diff.narrow(raw, self.source_names(), sign=1,
                                     compared=self.compared("source"))
        missing = diff.missing_offsets(groups, copies)
        if copies is not None:
            missing = self.materialize(missing, "missing")
        bounds = {}
        for r in spans:
            los = [v for v in (r["multi_lo"], r["single_lo"]) if v is not None]
            his = [v for v in (r["multi_hi"], r["single_hi"]) if v is not None]
            if los:  # a superset of the missing offsets: the join below picks them out
                bounds[(r["tix"], r["partition"])] = (min(los), max(his) + 1)
        # Before --check-order and reconcile: they see the real gap only.
        missing, counts["superseded"] = self.drop_superseded(missing, bounds)
        self.gap_rows -= sum(counts["superseded"].values())

        self.events.enter("payloads")
        raw = self.read(self.plan.source_kafka, self._by_topic(bounds))
        if raw is None:
            return self.empty_gap(), counts
        return diff.gap_records(raw, self.source_names(), missing), counts

    def drop_superseded(self, missing: DataFrame,
                        bounds: Mapping[tuple[int, int], tuple[int, int]]
                        ) -> tuple[DataFrame, dict[tuple[int, int], int]]:
        """Compacted topics: the missing records the target copied and then compacted away
        (diff.superseded) leave the gap, counted per partition. One narrow read of the source
        from each partition's first missing offset to its end."""
        compacted = {i for i, t in enumerate(self.plan.topics) if t.compacted}
        ranges = {(i, p): (lo, self.plan.topics[i].source_end[p])
                  for (i, p), (lo, _) in bounds.items() if i in compacted}
        raw = self.read(self.plan.source_kafka, self._by_topic(ranges))
        if raw is None:
            return missing, {}
        self.events.enter("compaction")
        superseded = diff.superseded(missing, diff.source_keys(raw, self.source_names()),
                                     compacted)
        if self.small:
            # A small plan's superseded offsets (no more than its records) come back in one
            # query and go back as a local table: on a Spark Connect server, caching them
            # first cost two round trips more (the cache's planning, then its count), a
            # second or more of a small job.
            rows = [(r["tix"], r["partition"], r["offset"]) for r in superseded.collect()]
            if not rows:
                return missing, {}
            per_partition = dict(Counter((tix, partition) for tix, partition, _ in rows))
            gone = self.spark.createDataFrame(rows, "tix int, partition int, offset bigint")
        else:
            gone = self.materialize(superseded, "superseded")
            per_partition = {(r["tix"], r["partition"]): r["n"]
                             for r in gone.groupBy(*diff.KEYS).agg(
                                 F.count(F.lit(1)).alias("n")).collect()}
        if not per_partition:
            return missing, {}
        return missing.join(gone, [*diff.KEYS, "offset"], "left_anti"), per_partition

    def identity(self) -> tuple[DataFrame, dict[str, dict[tuple[int, int], int]],
                                list[dict[str, Any]]]:
        """Offsets are equal: the gap is [F, source end); the overlap [start, F) must match
        offset by offset."""
        self.events.enter("overlap")
        src_raw = self.read(self.plan.source_kafka, self.source_ranges(
            lambda t, p: (t.source_start[p], min(t.target_end[p], t.source_end[p]))))
        tgt_raw = self.read(self.plan.target_kafka, self.target_ranges())
        src, src_obs = self.counted(
            None if src_raw is None else diff.identity_narrow(
                src_raw, self.source_names(), compared=self.compared("source")), "source")
        tgt, tgt_obs = self.counted(
            None if tgt_raw is None else diff.identity_narrow(
                tgt_raw, self.target_names(), compared=self.compared("target")), "target")
        empty = self.spark.createDataFrame(
            [], f"tix int, partition int, offset bigint, fp {FP_TYPE}")
        divergent = self.materialize(
            diff.offset_divergence(src if src is not None else empty,
                                   tgt if tgt is not None else empty), "divergence")
        counts = {"source": self.counts(src_obs), "target": self.counts(tgt_obs)}
        sample = [
            {"topic": self.plan.topics[r["tix"]].source_topic, "partition": r["partition"],
             "offset": r["offset"],
             "source_fp": None if r["source_fp"] is None else digest_bytes(r["source_fp"]).hex(),
             "target_fp": None if r["target_fp"] is None else digest_bytes(r["target_fp"]).hex()}
            for r in divergent.orderBy(*diff.KEYS, "offset").limit(DIVERGENCE_SAMPLE).collect()]
        per_partition = {(r["tix"], r["partition"]): r["n"]
                         for r in divergent.groupBy(*diff.KEYS).agg(
                             F.count(F.lit(1)).alias("n")).collect()}
        counts["divergent"] = per_partition

        self.events.enter("payloads")
        gap_ranges = self.source_ranges(
            lambda t, p: (max(t.target_end[p], t.source_start[p]), t.source_end[p]))
        self.gap_rows = sum(max(0, end - start) for parts in gap_ranges.values()
                            for start, end in parts.values())
        gap_raw = self.read(self.plan.source_kafka, gap_ranges)
        if gap_raw is None:
            return self.empty_gap(), counts, sample
        return gap_raw.select(diff.topic_index(self.source_names()).alias("tix"), "topic",
                              "partition", "offset", "key", "value", "headers", "timestamp",
                              "timestampType"), counts, sample

    def check_order(self, gap: DataFrame) -> tuple[DataFrame, dict[tuple[int, int], int]]:
        ranges: Ranges = {}
        names: dict[str, int] = {}
        for i, t in enumerate(self.plan.topics):
            if t.failover_topic is None or t.post_start is None or t.post_end is None:
                continue
            names[t.failover_topic] = i
            ranges[t.failover_topic] = {p: (t.post_start[p], t.post_end[p])
                                        for p in t.post_start}
        raw = self.read(self.plan.target_kafka, ranges)
        if raw is None:
            return diff.classify(gap, self.spark.createDataFrame([], _WRITES)), {}
        writes = diff.post_failover_writes(raw, names)
        late = self.late_offsets()
        if late is not None:
            writes = writes.join(F.broadcast(late), [*diff.KEYS, "offset"], "left_anti")
        if self.small and _range_rows(ranges) <= SMALL_PLAN_ROWS:
            # A small plan's post-failover writes (a few, after a short outage) come back in
            # one query and go back as a local table, counted here: cached on a Spark
            # Connect server they cost two round trips more (the cache, then its release).
            rows = [(r["tix"], r["partition"], r["offset"], r["key"], r["timestamp_ms"])
                    for r in writes.collect()]
            per_partition = Counter((tix, partition) for tix, partition, *_ in rows)
            local = self.spark.createDataFrame(rows, _WRITES)
            return diff.classify(gap, local), dict(per_partition)
        # Counted per partition as it is materialized: no query of its own.
        observed, obs = self.counted(writes, "post-failover")
        assert observed is not None
        writes = self.materialize(observed, "post-failover")
        return diff.classify(gap, writes), {k: n for k, n in self.counts(obs).items() if n}

    def empty_gap(self) -> DataFrame:
        return self.spark.createDataFrame(
            [], "tix int, topic string, partition int, offset bigint, key binary, "
                "value binary, headers array<struct<key:string,value:binary>>, "
                "timestamp timestamp, timestampType int")

    def _by_topic(self, bounds: Mapping[tuple[int, int], tuple[int, int]]) -> Ranges:
        out: Ranges = {}
        for (i, p), r in bounds.items():
            out.setdefault(self.plan.topics[i].source_topic, {})[p] = r
        return out

    # -- the summary --------------------------------------------------------------------------

    def summarize(self, records_path: Path, counts: dict[str, dict[tuple[int, int], int]],
                  post_counts: dict[tuple[int, int], int],
                  divergence: list[dict[str, Any]]) -> dict[str, Any]:
        found = tally(records_path, self.plan.check_order)
        rows = []
        for i, t in enumerate(self.plan.topics):
            for p in t.partitions:
                k = (i, p)
                g = found.get((t.source_topic, p), {})
                row: dict[str, Any] = {
                    "topic": t.source_topic, "target_topic": t.target_topic, "partition": p,
                    "source_start": t.source_start[p], "source_end": t.source_end[p],
                    "target_start": t.target_start[p], "target_end": t.target_end[p],
                    "source_records": counts["source"].get(k, 0),
                    "target_records": counts["target"].get(k, 0),
                    "unreplicated": g.get("unreplicated", 0),
                    "superseded": counts.get("superseded", {}).get(k, 0),
                    "first_offset": g.get("first_offset"), "last_offset": g.get("last_offset"),
                    "first_timestamp_ms": g.get("first_timestamp_ms"),
                    "last_timestamp_ms": g.get("last_timestamp_ms"),
                    **scope_fields(t.alignment.get(p), t.source_start[p]),
                    "late_copies": sum(end - start for start, end in t.late_runs.get(p, [])),
                }
                if self.plan.kind == IDENTITY:
                    # The overlap was counted; the gap [F, end) is all source records too.
                    row["source_records"] += row["unreplicated"]
                    row["divergent"] = counts.get("divergent", {}).get(k, 0)
                if self.plan.check_order:
                    c = g.get("classes", {})
                    row.update({"safe": c.get(diff.SAFE, 0), "conflict": c.get(diff.CONFLICT, 0),
                                "unkeyed": c.get(diff.UNKEYED, 0),
                                "unkeyed_flagged": g.get("flagged", 0),
                                "post_failover_writes": post_counts.get(k, 0)})
                rows.append(row)
        return {"kind": self.plan.kind, "replication_kind": self.plan.replication_kind,
                "scope": self.plan.scope, "check_order": self.plan.check_order,
                "totals": totals(rows), "partitions": rows,
                "divergence_sample": divergence, "notes": list(self.plan.notes)}


def _connector_missing(exc: BaseException) -> bool:
    text = str(exc)
    return "Failed to find data source: kafka" in text or "DATA_SOURCE_NOT_FOUND" in text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="drctl.gap.job", description=__doc__.split("\n")[0])
    parser.add_argument("plan", nargs="?", help="plan file written by drctl gap-analysis")
    parser.add_argument("--events-fd", type=int, default=None,
                        help="file descriptor for JSON progress events (drctl sets it)")
    parser.add_argument("--record-classes", action="store_true",
                        help="record the driver's class archive (class_archive.py) with a "
                             "small local job, unless it exists, and exit")
    args = parser.parse_args(argv)
    if args.record_classes:
        return record_classes()
    stream = os.fdopen(args.events_fd, "w") if args.events_fd is not None else None
    if args.plan is None:
        parser.error("a plan file is required")
    spark: SparkSession | None = None

    def open_session(plan: GapPlan) -> SparkSession:
        nonlocal spark
        spark = build_session(plan)
        return spark

    try:
        return run_plan(Path(args.plan), JobEvents.to_stream(stream), open_session)
    finally:
        _stop_jvm(spark)


def record_classes() -> int:
    """Record the class archive with a small local job (a shuffle, a join, Parquet written
    and read) when there is none yet: what `make test` runs before its workers start, so
    that they do not each record it in a slow first gap job at once. The Kafka source's
    classes (from spark.jars) are never in an archive; the rest of what a gap job loads is."""
    from drctl.gap.class_archive import class_archive

    archive = class_archive()
    if archive is None or archive.recording is None:
        return 0
    home = Path(tempfile.mkdtemp(prefix="drctl-record-classes-"))
    log4j = home / "log4j2.properties"
    log4j.write_text(_LOG4J2.replace("{level}", "error"))
    spark: SparkSession | None = None
    try:
        spark = (SparkSession.builder.appName("drctl class archive").master("local[2]")
                 .config("spark.ui.enabled", "false")
                 .config("spark.ui.showConsoleProgress", "false")
                 .config("spark.local.dir", str(home / "spark-local"))
                 .config("spark.driver.extraJavaOptions", " ".join(
                     [f"-Dlog4j2.configurationFile=file:{log4j}", *archive.java_options()]))
                 .getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        rows = spark.range(10_000).select((F.col("id") % 97).alias("k"),
                                          F.sha2(F.col("id").cast("string"), 256).alias("v"))
        counted = rows.groupBy("k").count().join(rows, "k", "left_anti")
        counted.write.parquet(str(home / "out"))
        spark.read.parquet(str(home / "out")).count()
        _stop_jvm(spark)
        spark = None
        kept = archive.keep()
    finally:
        _stop_jvm(spark)
        archive.discard()
        shutil.rmtree(home, ignore_errors=True)
    print(f"class archive {'recorded' if kept else 'not recorded'}: {archive.path}")
    return 0


def run_plan(plan_file: Path, events: JobEvents,
             open_session: Callable[[GapPlan], SparkSession]) -> int:
    """One job: 0 when its summary is written (a "done" event), 1 with an "error" event."""
    try:
        summary_path = run_job(GapPlan.from_json(plan_file.read_text()), events, open_session)
        events.emit({"event": "done", "summary": str(summary_path)})
        if events.silent:
            print(f"summary: {summary_path}")
        return 0
    except Exception as exc:  # noqa: BLE001 - reported to the driver as an event
        traceback.print_exc(file=sys.stderr)
        events.emit(error_event(exc))
        return 1


def run_job(plan: GapPlan, events: JobEvents,
            open_session: Callable[[GapPlan], SparkSession]) -> Path:
    """One job on the session `open_session` gives: its summary written (the path), or the
    exception that ended it."""
    events.enter("starting")
    spark = open_session(plan)
    stop_progress = follow_progress(spark, events)
    job = GapJob(spark, plan, events)
    try:
        summary = job.run()
    finally:
        stop_progress()
        job.release()
    summary_path = Path(plan.out_dir) / SUMMARY_FILE
    summary_path.write_text(json.dumps(summary, indent=2))
    if plan.spark is None or not plan.spark.debug:
        work = Path(plan.out_dir) / _WORK
        for name in _INTERMEDIATE:
            shutil.rmtree(work / name, ignore_errors=True)
        if work.is_dir() and not any(work.iterdir()):
            work.rmdir()
    return summary_path


def error_event(exc: BaseException) -> dict[str, Any]:
    """The "error" event of a job that raised `exc`."""
    kind = "connector-missing" if _connector_missing(exc) else "failed"
    message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    # The first line of a Py4J error names only the Java call ("... o465.parquet"); the
    # cause (a Kafka timeout, a disconnect) is further down: the driver classifies it.
    return {"event": "error", "kind": kind, "message": message[:2000],
            "detail": str(exc)[:50_000]}


def _stop_jvm(spark: SparkSession | None) -> None:
    """Stop Spark and wait until its JVM has exited. Left alone, the JVM outlives this
    process by seconds, and a class archive it records (class_archive.py) is written as it
    exits: it must be whole before drctl keeps it."""
    if spark is None:
        return
    from pyspark import SparkContext  # not in a Spark Connect client (pyspark-client)

    try:
        spark.stop()
    except Exception:  # noqa: BLE001 - the JVM may be gone already
        pass
    proc = getattr(SparkContext._gateway, "proc", None)
    if proc is None or proc.stdin is None:
        return
    proc.stdin.close()  # the gateway exits when its stdin ends
    try:
        proc.wait(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()


if __name__ == "__main__":
    sys.exit(main())
