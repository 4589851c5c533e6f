"""gap-analysis pieces that need neither Spark nor Kafka: option parsing, connector resolution
rules, the plan file (the Java client settings: test_java_client_settings.py)."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from drctl.config import ReplicationSettings, SparkSettings
from drctl.errors import UsageError
from drctl.gap import jars
from drctl.gap.plan import GapPlan, TopicPlan
from drctl.gap.planner import Window, parse_offsets, rekey, window_from
from drctl.gap.result import totals


def test_offsets_in_every_accepted_form() -> None:
    assert parse_offsets('{"a": {"0": 5, "1": 7}, "b": {"0": 1}}', [], "--x") == {
        "a": {0: 5, 1: 7}, "b": {0: 1}}
    assert parse_offsets('{"0": 5, "2": 9}', ["a"], "--x") == {"a": {0: 5, 2: 9}}
    assert parse_offsets("0:5, 2:9", ["a"], "--x") == {"a": {0: 5, 2: 9}}


@pytest.mark.parametrize("text,topics", [("0:5", ["a", "b"]), ("0=5", ["a"]),
                                         ('{"0": "x"}', ["a"]), ("{nope", ["a"])])
def test_offsets_that_cannot_be_read(text: str, topics: list[str]) -> None:
    with pytest.raises(UsageError):
        parse_offsets(text, topics, "--target-end")


def test_window_start() -> None:
    assert window_from(None, None, None) == Window(None)
    assert window_from(5, None, 100) == Window(5)
    assert window_from(None, 60_000, 1_000_000) == Window(940_000)  # before the failover
    assert window_from(None, 1_000, None, now_ms=5_000) == Window(4_000)
    with pytest.raises(UsageError):
        window_from(1, 1, None)


def test_rekey_names_option_offsets_by_mirror_or_failover_topic() -> None:
    rep = ReplicationSettings("mirrormaker2", "p", "s", rename="primary.{topic}")
    offsets = {"orders": {0: 1}, "primary.pay": {0: 2}}
    assert rekey(offsets, ["orders", "pay"], rep, "mirror") == {
        "primary.orders": {0: 1}, "primary.pay": {0: 2}}
    assert rekey(offsets, ["orders"], rep, "failover") == {"orders": {0: 1},
                                                          "primary.pay": {0: 2}}
    assert rekey(None, ["orders"], rep, "mirror") is None


def test_connector_candidates_exact_version_first() -> None:
    assert list(jars._candidates("4.3.0")) == ["4.3.0", "4.2.0", "4.1.0", "4.0.0"]
    assert list(jars._candidates("3.5.2")) == ["3.5.2", "3.5.0", "3.4.0", "3.3.0", "3.2.0",
                                               "3.1.0", "3.0.0"]
    assert list(jars._candidates("4.1.0.dev0")) == ["4.1.0.dev0"]


def test_connector_from_the_config(tmp_path: Path) -> None:
    jar = tmp_path / "spark-sql-kafka.jar"
    jar.write_bytes(b"")
    got = jars.resolve_connector(SparkSettings(jars=(str(jar),), packages=("g:a:1",)))
    assert (got.jars, got.packages, got.source) == ((str(jar),), ("g:a:1",), "config")
    with pytest.raises(jars.SparkConnectorMissing, match="do not exist"):
        jars.resolve_connector(SparkSettings(jars=(str(tmp_path / "missing.jar"),)))


def test_connector_missing_says_what_to_do(tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DRCTL_CACHE_DIR", str(tmp_path))
    with pytest.raises(jars.SparkConnectorMissing) as err:
        jars.resolve_connector(SparkSettings(), download=False)
    assert "spark.jars" in str(err.value.hint) and "spark.packages" in str(err.value.hint)


def _repository(tmp_path: Path, versions: list[str]) -> str:
    """A Maven repository on disk holding only the connector's metadata."""
    meta = tmp_path / "repo" / "org" / "apache" / "spark" / jars.CONNECTOR
    meta.mkdir(parents=True)
    listed = "".join(f"<version>{v}</version>" for v in versions)
    (meta / "maven-metadata.xml").write_text(
        f"<metadata><versioning><latest>9.9.9-preview1</latest><versions>{listed}"
        "</versions></versioning></metadata>")
    return (tmp_path / "repo").as_uri()


def test_connector_from_spark_packages_picks_the_newest_published_release(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DRCTL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(jars, "pyspark_version", lambda: "4.3.1")
    repo = _repository(tmp_path, ["4.1.0", "4.2.0", "4.2.0-preview5"])
    told: list[str] = []
    got = jars.resolve_connector(
        SparkSettings(conf={"spark.jars.repositories": f"{repo}/, https://other"}),
        notify=told.append)
    assert got.packages == (f"org.apache.spark:{jars.CONNECTOR}:4.2.0",)
    assert (got.source, got.jars) == ("spark-packages", ())
    assert got.spark_conf() == {"spark.jars.ivy": str(tmp_path / "cache" / "spark-kafka" /
                                                      "ivy-4.3.1")}
    assert any("not in" in t and "4.2.0" in t for t in told)

    repo_without = _repository(tmp_path / "b", ["3.5.0"])
    with pytest.raises(jars.SparkConnectorMissing, match="has no"):
        jars.resolve_connector(SparkSettings(conf={"spark.jars.repositories": repo_without}))
    with pytest.raises(jars.SparkConnectorMissing, match="could not be read"):
        jars.resolve_connector(SparkSettings(
            conf={"spark.jars.repositories": (tmp_path / "nowhere").as_uri()}))


def test_resolved_jars_are_kept_without_what_pyspark_ships(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DRCTL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(jars, "pyspark_version", lambda: "4.3.1")
    shipped = tmp_path / "pyspark-jars"
    shipped.mkdir()
    (shipped / "slf4j-api-2.0.16.jar").write_bytes(b"")
    monkeypatch.setattr(jars, "pyspark_jars_dir", lambda: shipped)
    connector = jars.Connector((), ("g:a:1",), "spark-packages",
                               ((jars.CONNECTOR, "4.2.0"),), str(tmp_path / "ivy"))
    resolved = tmp_path / "ivy" / "jars"
    resolved.mkdir(parents=True)
    for name in (f"org.apache.spark_{jars.CONNECTOR}-4.2.0.jar",
                 "org.apache.kafka_kafka-clients-3.9.1.jar", "org.slf4j_slf4j-api-2.0.7.jar"):
        (resolved / name).write_bytes(b"")
    assert jars._cached("4.3.1") is None
    jars.keep_resolved(connector)
    kept = jars._cached("4.3.1")
    assert kept is not None and kept.source == "cache"
    assert sorted(Path(j).name for j in kept.jars) == [
        "kafka-clients-3.9.1.jar", f"{jars.CONNECTOR}-4.2.0.jar"]
    assert kept.versions == ((jars.CONNECTOR, "4.2.0"),)
    # A connector from the config or the cache leaves the cache alone.
    jars.keep_resolved(jars.Connector((), ("g:a:1",), "config"))
    assert jars._cached("4.3.1") == kept


def test_jar_names() -> None:
    names = {n: m.group("artifact") for n in ("spark-sql-kafka-0-10_2.13-4.2.0.jar",
                                              "zstd-jni-1.5.7-7.jar", "scala-library-2.13.15.jar")
             if (m := jars._JAR.match(n))}
    assert names == {"spark-sql-kafka-0-10_2.13-4.2.0.jar": "spark-sql-kafka-0-10_2.13",
                     "zstd-jni-1.5.7-7.jar": "zstd-jni",
                     "scala-library-2.13.15.jar": "scala-library"}


def test_plan_file_round_trip_and_secrets(tmp_path: Path) -> None:
    topic = TopicPlan("orders", "primary.orders", [0, 1], {0: 0, 1: 3}, {0: 9, 1: 9},
                      {0: 0, 1: 0}, {0: 7, 1: 8}, True, "orders", {0: 2, 1: 2}, {0: 4, 1: 2})
    plan = GapPlan("diff", "mirrormaker2", "primary", "secondary",
                   {"kafka.bootstrap.servers": "a:1", "kafka.sasl.jaas.config": "secret"},
                   {"kafka.bootstrap.servers": "b:1"}, [topic], str(tmp_path / "out"),
                   check_order=True)
    path = plan.write(tmp_path / "plan.json")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    again = GapPlan.from_json(path.read_text())
    assert again == plan
    assert again.topics[0].target_end == {0: 7, 1: 8}
    assert "secret" not in str(plan.public())


def test_totals_add_up_partitions() -> None:
    rows = [{"unreplicated": 2, "conflict": 1, "source_records": 10},
            {"unreplicated": 3, "safe": 3, "source_records": 5, "divergent": None}]
    got = totals(rows)
    assert (got["unreplicated"], got["conflict"], got["safe"], got["source_records"],
            got["divergent"]) == (5, 1, 3, 15, 0)
