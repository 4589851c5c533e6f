"""The lab's Spark standalone cluster: a master and N one-core workers from the installed PySpark,
on loopback, so the gap job runs with executors in their own JVMs as it would on a real cluster.

The pip PySpark has no `sbin/start-master.sh`; its `bin/spark-class` starts the daemons from the
bundled jars (with the JVM module options Spark needs) when SPARK_HOME is the package directory.
Workers write executor logs under `spark-worker-N/work/`.
"""

from __future__ import annotations

import json
import os
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from drctl.errors import LabError
from drctl.gap.class_archive import QUICK_JIT
from drctl.lab.jars import require_java
from drctl.lab.processes import ManagedProcess, port_in_use, wait_until
from drctl.progress import Notify

MASTER = "spark-master"
WORKER_PREFIX = "spark-worker-"
DAEMON_HEAP = os.environ.get("DRCTL_LAB_SPARK_DAEMON_HEAP", "256m")
WORKER_MEMORY = "768m"  # what executors may take on one worker
EXECUTOR_MEMORY = "512m"
APP_NAME = "drctl gap-analysis"  # the job's SparkSession name, as the master lists it

_LOG4J2 = """status = error
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = info
rootLogger.appenderRef.file.ref = FILE
"""


@dataclass(frozen=True)
class SparkClusterPorts:
    """A master's RPC port, its web UI on the next port, worker i's web UI on the i-th after
    that (workers' RPC ports are left to the OS: nothing outside the cluster dials them)."""

    master: int

    @property
    def master_ui(self) -> int:
        return self.master + 1

    def worker_ui(self, index: int) -> int:
        return self.master + 1 + index

    def fixed(self, workers: int) -> list[int]:
        return [self.master, self.master_ui, *(self.worker_ui(i) for i in range(1, workers + 1))]


def master_url(ports: SparkClusterPorts) -> str:
    return f"spark://127.0.0.1:{ports.master}"


def spark_config(ports: SparkClusterPorts) -> dict[str, Any]:
    """The `spark` section of the lab's drctl.yaml for a running cluster."""
    return {"master": master_url(ports),
            "conf": {"spark.executor.memory": EXECUTOR_MEMORY,
                     # Executors dial the driver back: keep that on loopback too.
                     "spark.driver.host": "127.0.0.1",
                     "spark.driver.bindAddress": "127.0.0.1"}}


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def start_spark(proc: ManagedProcess, main_class: str, args: list[str],
                env: Mapping[str, str] | None = None) -> None:
    """`main_class` of the installed PySpark's jars as a lab process (`bin/spark-class`, its
    log in the process's directory); nothing when it runs already."""
    if proc.is_running():
        return
    workdir = proc.workdir
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "log4j2.properties").write_text(_LOG4J2.replace("{log}", str(proc.log_file)))
    properties = workdir / "spark.properties"
    properties.write_text("spark.ui.showConsoleProgress=false\n")
    home = spark_home()
    java_home = Path(require_java()).resolve().parent.parent
    proc.start([str(home / "bin" / "spark-class"), main_class, *args,
                "--properties-file", str(properties)],
               env={"SPARK_HOME": str(home), "JAVA_HOME": str(java_home),
                    # spark-class puts the conf dir on the classpath: our log4j2 file.
                    "SPARK_CONF_DIR": str(workdir), "SPARK_DAEMON_MEMORY": DAEMON_HEAP,
                    "SPARK_DAEMON_JAVA_OPTS": QUICK_JIT,  # as lab.py's JVMs
                    "SPARK_LOG_DIR": str(workdir), **(env or {})})


class SparkCluster:
    """The master and workers of one lab, known by their directories under the lab dir."""

    def __init__(self, lab_dir: Path, ports: SparkClusterPorts) -> None:
        self.dir = lab_dir
        self.ports = ports

    def process(self, name: str) -> ManagedProcess:
        workdir = self.dir / name
        # The properties file is on the command line and unique to this lab and daemon.
        return ManagedProcess(name, workdir, signature=str(workdir / "spark.properties"))

    def master(self) -> ManagedProcess:
        return self.process(MASTER)

    def worker(self, index: int) -> ManagedProcess:
        return self.process(f"{WORKER_PREFIX}{index}")

    def known_workers(self) -> list[int]:
        """Every worker that has a directory here, started by this `lab up` or an earlier one."""
        found = [p.name.removeprefix(WORKER_PREFIX) for p in self.dir.glob(f"{WORKER_PREFIX}*")]
        return sorted(int(n) for n in found if n.isdigit())

    def processes(self) -> list[ManagedProcess]:
        return [self.master(), *(self.worker(i) for i in self.known_workers())]

    # -- up ---------------------------------------------------------------------------------

    def up(self, workers: int, notify: Notify = lambda _: None) -> None:
        """Start (or keep) the master and workers 1..N, stop any beyond N, and wait until N
        workers are registered."""
        for index in self.known_workers():
            if index > workers:
                self.worker(index).stop()
        if workers == 0:
            self.master().stop()
            return
        self._check_ports(workers)
        notify(f"Starting a Spark master on {master_url(self.ports)} and {workers} worker(s)")
        start_spark(self.master(), "org.apache.spark.deploy.master.Master",
                    ["--host", "127.0.0.1", "--port", str(self.ports.master),
                     "--webui-port", str(self.ports.master_ui)])
        master = self.master()
        wait_until(lambda: self.status() is not None, deadline_s=90, what="Spark master",
                   log_file=master.log_file, alive=master.is_running)
        for index in range(1, workers + 1):
            worker = self.worker(index)
            start_spark(worker, "org.apache.spark.deploy.worker.Worker",
                        [master_url(self.ports), "--host", "127.0.0.1", "--cores", "1",
                         "--memory", WORKER_MEMORY, "--webui-port",
                         str(self.ports.worker_ui(index)),
                         "--work-dir", str(worker.workdir / "work")],
                        env={"SPARK_LOCAL_DIRS": str(worker.workdir / "local")})
        notify(f"Waiting for {workers} Spark worker(s) to register")
        last = self.worker(workers)

        def registered() -> bool:
            for index in range(1, workers + 1):
                worker = self.worker(index)
                if not worker.is_running():
                    raise LabError(f"Spark worker {index} exited.", f"Read {worker.log_file}.")
            return alive_workers(self.status() or {}) >= workers

        wait_until(registered, deadline_s=120, what=f"{workers} Spark worker(s) registering",
                   log_file=last.log_file, alive=master.is_running)

    def _check_ports(self, workers: int) -> None:
        if self.master().is_running():
            return
        for port in self.ports.fixed(workers):
            if port_in_use(port):
                raise LabError(f"Port {port} on 127.0.0.1 (for the lab's Spark cluster) is in use "
                               "by another process.",
                               "Stop that process or choose another port with --spark-port.")

    # -- status, down -----------------------------------------------------------------------

    def status(self) -> dict[str, Any] | None:
        """The master's JSON (workers, running and completed applications), or None when it
        does not answer."""
        url = f"http://127.0.0.1:{self.ports.master_ui}/json/"
        try:
            with urllib.request.urlopen(url, timeout=3) as response:
                data: dict[str, Any] = json.loads(response.read())
                return data
        except (OSError, ValueError):
            return None

    def rows(self, workers: int) -> list[dict[str, Any]]:
        """One `lab status` process row per daemon of a cluster with `workers` workers."""
        rows = []
        daemons = [(self.master(), self.ports.master),
                   *((self.worker(i), self.ports.worker_ui(i)) for i in range(1, workers + 1))]
        for proc, port in daemons:
            running = proc.is_running()
            rows.append({"name": proc.name, "pid": proc.pid() if running else None,
                         "running": running, "port": port, "rss_bytes": proc.rss_bytes(),
                         "log": str(proc.log_file)})
        return rows

    def down(self) -> list[str]:
        """Stop the workers, then the master."""
        stopped = []
        for proc in [*self.processes()[1:], self.master()]:
            if proc.is_running():
                proc.stop()
                stopped.append(proc.name)
            proc.pid_file.unlink(missing_ok=True)
        return stopped


def alive_workers(master_status: Mapping[str, Any]) -> int:
    return sum(1 for w in master_status.get("workers", []) if w.get("state") == "ALIVE")
