"""The lab's Spark Connect server's command (drctl/lab/spark_connect.py): its JVM runs C1 only
unless asked for the full JIT (bench/bench_spark_connect_jit.py measured why)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from drctl.gap.jars import Connector
from drctl.lab import spark_connect
from drctl.lab.spark_cluster import QUICK_JIT


@pytest.mark.parametrize(("quick", "options"), [(None, QUICK_JIT), (True, QUICK_JIT),
                                                 (False, "")])
def test_the_servers_jit(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, quick: bool | None,
                         options: str) -> None:
    started: list[tuple[str, list[str], Mapping[str, str]]] = []

    def start_spark(proc: Any, main_class: str, args: list[str],
                    env: Mapping[str, str] | None = None) -> None:
        started.append((main_class, args, env or {}))

    monkeypatch.setattr(spark_connect, "start_spark", start_spark)
    server = (spark_connect.SparkConnectServer(tmp_path, 15002) if quick is None
              else spark_connect.SparkConnectServer(tmp_path, 15002, quick_jit=quick))
    server._start(Connector(jars=("/j/kafka.jar",)))
    [(main_class, args, env)] = started
    assert main_class == "org.apache.spark.deploy.SparkSubmit"
    assert env["SPARK_DAEMON_JAVA_OPTS"] == options
    assert "spark.connect.grpc.binding.port=15002" in args
    assert "spark.jars=/j/kafka.jar" in args
