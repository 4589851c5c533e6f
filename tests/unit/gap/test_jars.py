"""The Spark Kafka connector the gap job needs (drctl/gap/jars.py): candidates, from the
config, from spark.packages, and the cache of resolved jars."""

from __future__ import annotations

from pathlib import Path

import pytest

from drctl.config import SparkSettings
from drctl.gap import jars


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
