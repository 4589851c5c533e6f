"""The lab's Spark Connect server: one Spark driver (`local[2]`) from the installed PySpark
that every gap job of the lab's config runs on (`spark.remote`), warm from one failback to the
next. Spark's Kafka source comes from the jars drctl keeps for its own gap jobs
(gap/jars.py: resolved from Maven Central once). Loopback only, a small heap, no web UI.

The server jar is in the PySpark wheel; `spark-class` runs SparkSubmit with Spark Connect's
server class, as `sbin/start-connect-server.sh` does.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from drctl.config import SparkSettings
from drctl.errors import LabError
from drctl.gap.jars import Connector, first_resolution, keep_resolved, resolve_connector
from drctl.lab.processes import ManagedProcess, port_in_use, wait_until
from drctl.lab.spark_cluster import QUICK_JIT, start_spark
from drctl.progress import Notify

SERVER = "spark-connect"
SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
HEAP = os.environ.get("DRCTL_LAB_SPARK_CONNECT_HEAP", "768m")


def remote_url(port: int) -> str:
    return f"sc://127.0.0.1:{port}"


class SparkConnectServer:
    """The server of one lab (or of one test worker), known by its directory."""

    def __init__(self, directory: Path, port: int, quick_jit: bool = True) -> None:
        self.dir = directory
        self.port = port
        # C1 only, as the lab's Kafka JVMs: C2 pays for itself only over many jobs. A server
        # that runs a drill's few small jobs spends 0.6 of the CPU with C1 only, one that runs
        # some hundred about the same (bench/bench_spark_connect_jit.py). False: the full JIT,
        # for a server that runs jobs at production size.
        self.quick_jit = quick_jit

    @property
    def url(self) -> str:
        return remote_url(self.port)

    def process(self) -> ManagedProcess:
        workdir = self.dir / SERVER
        # The properties file is on the command line and unique to this directory.
        return ManagedProcess(SERVER, workdir, signature=str(workdir / "spark.properties"))

    def up(self, notify: Notify = lambda _: None) -> None:
        """Start it unless it runs, and wait until it answers with Spark's Kafka source. The
        first start on a machine has Spark resolve the connector from Maven Central (one
        process at a time: the jars are drctl's cache, gap/jars.py), and keeps it."""
        proc = self.process()
        if not proc.is_running() and port_in_use(self.port):
            raise LabError(f"Port {self.port} on 127.0.0.1 (for the lab's Spark Connect "
                           "server) is in use by another process.",
                           "Stop that process or choose another port with "
                           "--spark-connect-port.")
        if proc.is_running():
            self._wait()
            return
        notify(f"Starting a Spark Connect server on {self.url}")
        with first_resolution(resolve_connector(SparkSettings(), notify=notify)) as connector:
            self._start(connector)
            self._wait()
            keep_resolved(connector)

    def _start(self, connector: Connector) -> None:
        proc = self.process()
        conf = {"spark.master": "local[2]", "spark.ui.enabled": "false",
                "spark.connect.grpc.binding.address": "127.0.0.1",
                "spark.connect.grpc.binding.port": str(self.port),
                "spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1",
                "spark.local.dir": str(proc.workdir / "local"),
                **connector.spark_conf()}
        if connector.jars:
            conf["spark.jars"] = ",".join(connector.jars)
        if connector.packages:
            conf["spark.jars.packages"] = ",".join(connector.packages)
        args = ["--class", SERVER_CLASS, "--name", "drctl lab Spark Connect"]
        for key, value in conf.items():
            args += ["--conf", f"{key}={value}"]
        # Spark's launcher runs the server as a daemon: its heap and JVM options are the
        # daemon's.
        start_spark(proc, "org.apache.spark.deploy.SparkSubmit", args,
                    env={"SPARK_DAEMON_MEMORY": HEAP,
                         "SPARK_DAEMON_JAVA_OPTS": QUICK_JIT if self.quick_jit else ""})

    def _wait(self, deadline_s: float = 600) -> None:
        from drctl.gap import remote

        proc = self.process()
        settings = SparkSettings(remote=self.url)

        def ready() -> bool:
            if not port_in_use(self.port):
                return False
            with remote.connected(settings, 10) as spark:
                if not remote.server_facts(spark)["kafka_connector"]:
                    raise LabError("The lab's Spark Connect server has no Kafka source.",
                                   f"Read {proc.log_file}.")
            return True

        wait_until(ready, deadline_s=deadline_s, what="Spark Connect server",
                   log_file=proc.log_file, alive=proc.is_running)

    def row(self) -> dict[str, Any]:
        """Its `lab status` process row."""
        proc = self.process()
        running = proc.is_running()
        return {"name": SERVER, "pid": proc.pid() if running else None, "running": running,
                "port": self.port, "rss_bytes": proc.rss_bytes(), "log": str(proc.log_file)}

    def down(self, *, discard: bool = False) -> list[str]:
        """Stopped; with `discard` (nothing more is wanted of it: a test run's) killed."""
        proc = self.process()
        if not proc.is_running():
            proc.pid_file.unlink(missing_ok=True)
            return []
        if discard:
            proc.kill()
            proc.pid_file.unlink(missing_ok=True)
        else:
            proc.stop()
        return [SERVER]
