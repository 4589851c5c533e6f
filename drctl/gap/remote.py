"""The gap job on a Spark Connect server (`spark.remote: sc://HOST:PORT`).

Spark Connect keeps one Spark driver up that clients reach over gRPC: no JVM in drctl's
process (the failback host needs none: `pyspark-client` is enough), and the server's JIT stays
warm between jobs. Every gap job of the process runs there, each in a session of its own (its
SQL settings sized for its plan), and the results come back over the session (Arrow): no
storage shared with the server. The job itself is job.py's `GapJob`, run in this process.

This module knows the server: reaching it within --deadline (exit 4 naming it when it does
not answer), what it runs (its Spark version, whether Spark's Kafka source is on its
classpath: exit 2 naming the jars when not), and which failures mean it went away.
"""

from __future__ import annotations

import os
import sys
import threading
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, TypeVar

from drctl.config import SparkSettings
from drctl.errors import DrctlError, ExitStatus, Unreachable, UsageError
from drctl.gap.jars import CONNECTOR, SparkConnectorMissing
from drctl.secrets import mask_url_userinfo

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

T = TypeVar("T")
# How PySpark tells a Spark Connect process from one with a JVM (pyspark.sql.utils.is_remote).
_MODE_VARIABLES = ("SPARK_CONNECT_MODE_ENABLED", "SPARK_REMOTE", "SPARK_LOCAL_REMOTE")
# What a server that answers no more looks like to the client: gRPC's UNAVAILABLE (refused,
# reset, no route), or a deadline its own retries ran into.
_GONE = ("UNAVAILABLE", "DEADLINE_EXCEEDED")
_REFUSED = ("UNAUTHENTICATED", "PERMISSION_DENIED")


class SparkServerUnreachable(Unreachable):
    """The Spark Connect server did not answer within --deadline, or stopped answering."""

    # Its client retried it for the deadline already; no cluster to wait for.
    transient = False


class SparkServerRefused(UsageError):
    """The server answered and refused drctl (token, TLS): the configuration is wrong."""


class ServerLacksKafka(SparkConnectorMissing):
    """The server runs without Spark's Kafka source: the server's classpath is to fix (exit 2,
    like any other setting drctl cannot use)."""

    exit_status = ExitStatus.USAGE


class _Kept:
    """The sessions a command keeps open across its gap jobs (`sessions_kept`), one per
    server, and the process-wide switch to Spark Connect they need (saved to put back)."""

    def __init__(self) -> None:
        self.sessions: dict[str, SparkSession] = {}
        self.saved_mode: dict[str, str | None] | None = None


_KEPT: ContextVar[_Kept | None] = ContextVar("drctl_spark_sessions", default=None)


@contextmanager
def sessions_kept() -> Iterator[None]:
    """Within it, the gap jobs on one server share one session: a command's steps (a
    failback run again after a dropped cluster) pay the session's start and the server's
    questions once. The sessions close on the way out, with the command that opened them."""
    kept = _Kept()
    token = _KEPT.set(kept)
    try:
        yield
    finally:
        _KEPT.reset(token)
        for spark in kept.sessions.values():
            _stop(spark)
        if kept.saved_mode is not None:
            _restore_mode(kept.saved_mode)


def forget_session(settings: SparkSettings) -> None:
    """A kept session whose job failed is closed: the next job starts a fresh one (its
    server may have restarted, and a session it no longer knows fails every call)."""
    kept = _KEPT.get()
    if kept is not None and settings.remote in kept.sessions:
        _stop(kept.sessions.pop(settings.remote))


# The Spark Connect client's import under way in a thread of its own (`import_client_early`).
_client_import: threading.Thread | None = None


def import_client_early() -> None:
    """Start importing the Spark Connect client — pyspark's Connect session with pandas,
    pyarrow and grpc: about half a second of a core, seconds on a loaded machine — in a
    thread, so that it loads while the gap plan reads Kafka rather than after it. Once per
    process. Whatever imports pyspark next waits for it first (`client_imported`): two
    threads never import pyspark at once. An import that fails is said by `connected`, which
    imports the client again."""
    global _client_import
    if _client_import is None and "pyspark.sql.connect.session" not in sys.modules:
        _client_import = threading.Thread(target=_import_client, daemon=True,
                                          name="drctl-spark-client-import")
        _client_import.start()


def _import_client() -> None:
    try:
        import pyspark.sql.connect.session  # noqa: F401
    except Exception:  # noqa: BLE001 - `connected` imports it again and says what is missing
        pass


def client_imported() -> None:
    """Until `import_client_early`'s import (if one was started) has ended."""
    if _client_import is not None:
        _client_import.join()


@contextmanager
def connected(settings: SparkSettings, deadline_s: float | None) -> Iterator[SparkSession]:
    """A session on the server, which answered within `deadline_s` (None: 30 s): of its
    own, closed on the way out (the server drops what it cached for it) — or, within
    `sessions_kept`, the command's session for this server, opened on its first use. Its
    client retries a lost connection for about as long (not Spark Connect's 10 minutes). The
    config's spark.conf become the session's settings.

    PySpark chooses between Spark Connect and a JVM of this process by an environment
    variable, process-wide: it is set while a session is open and put back after, so that
    a job of its own started later (a child inherits the environment) gets a JVM."""
    assert settings.remote is not None
    kept = _KEPT.get()
    if kept is not None and settings.remote in kept.sessions:
        yield kept.sessions[settings.remote]
        return
    client_imported()
    try:
        from pyspark.sql import SparkSession
        from pyspark.sql.connect.client.retries import DefaultPolicy
    except ImportError as exc:
        raise UsageError(f"spark.remote needs the Spark Connect client, which is missing "
                         f"({exc}).",
                         "pip install 'pyspark[connect]' (or pyspark-client: no JVM "
                         "needed).") from exc
    deadline = 30.0 if deadline_s is None else deadline_s
    # The client warns on stderr when its retries run out; the error says it, once.
    warnings.filterwarnings("ignore", message=r"\[RETRIES_EXCEEDED\]")
    saved = {name: os.environ.get(name) for name in _MODE_VARIABLES}
    spark = SparkSession.builder.remote(settings.remote).create()
    os.environ["SPARK_CONNECT_MODE_ENABLED"] = "1"
    keep = False
    try:
        # Spark Connect's own retries (backoffs of at most 2 s) add up to about the deadline.
        retries = max(1, int(deadline / 2) + 2)
        spark.client.set_retry_policies([DefaultPolicy(
            max_retries=retries, initial_backoff=200, backoff_multiplier=2.0,
            max_backoff=2000, jitter=0, min_jitter_threshold=0)])
        _within(deadline, lambda: spark.version, settings)
        for key, value in settings.conf.items():
            spark.conf.set(key, value)
        if kept is not None:
            kept.sessions[settings.remote] = spark
            if kept.saved_mode is None:
                kept.saved_mode = saved
            keep = True
        yield spark
    finally:
        if not keep:
            _stop(spark)
            _restore_mode(saved)


def _stop(spark: SparkSession) -> None:
    try:
        spark.stop()
    except Exception:  # noqa: BLE001 - a server that is gone has nothing left to release
        pass


def _restore_mode(saved: dict[str, str | None]) -> None:
    for name, before in saved.items():
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before


def server_facts(spark: SparkSession) -> dict[str, Any]:
    """The server's Spark version and whether Spark's Kafka source is on its classpath: a
    read analysed, nothing run (Spark resolves the data source at analysis)."""
    reader = (spark.read.format("kafka").option("kafka.bootstrap.servers", "127.0.0.1:9")
              .option("subscribe", "drctl-probe"))
    try:
        kafka = bool(reader.load().schema)
    except Exception as exc:
        if not connector_missing(exc):
            raise
        kafka = False
    return {"version": spark.version, "kafka_connector": kafka}


def check(settings: SparkSettings, deadline_s: float) -> tuple[dict[str, Any], DrctlError | None]:
    """`config check`'s reading of the server: its Spark version and whether the Kafka
    source is on it, and the error to report (unreachable: exit 4; no Kafka source or
    refused: exit 2)."""
    reading: dict[str, Any] = {"remote": mask_url_userinfo(settings.remote or ""),
                               "reachable": False}
    try:
        with connected(settings, deadline_s) as spark:
            facts = server_facts(spark)
    except DrctlError as exc:
        return {**reading, "error": exc.message}, exc
    except Exception as exc:  # noqa: BLE001 - a reading, reported as one
        error = unreachable(settings, exc, deadline_s) if server_gone(exc) else \
            SparkServerRefused(f"The {settings.where} server could not analyse a Kafka "
                               f"read: {_cause(exc)}.", detail=str(exc))
        return {**reading, "error": error.message}, error
    reading = {**reading, "reachable": True, **facts}
    if not facts["kafka_connector"]:
        return reading, lacks_kafka(settings, facts["version"])
    return reading, None


def lacks_kafka_in(spark: SparkSession, settings: SparkSettings) -> ServerLacksKafka:
    """ServerLacksKafka (exit 2) for the server of `spark`, which failed a Kafka read for
    want of the source: the jars of its Spark version to add."""
    try:
        version = spark.version
    except Exception:  # noqa: BLE001 - the hint names the jars of the server's version
        version = "<the server's Spark version>"
    return lacks_kafka(settings, version)


def lacks_kafka(settings: SparkSettings, version: str) -> ServerLacksKafka:
    return ServerLacksKafka(
        f"The {settings.where} server (Spark {version}) has no Kafka source "
        "('Failed to find data source: kafka').",
        f"Start it with Spark's Kafka connector on its classpath: --packages "
        f"org.apache.spark:{CONNECTOR}:{version} (or --jars with {CONNECTOR}-{version}.jar, "
        f"spark-token-provider-kafka-0-10_2.13-{version}.jar, kafka-clients and "
        "commons-pool2).")


def connector_missing(exc: BaseException) -> bool:
    text = str(exc)
    return "Failed to find data source: kafka" in text or (
        "DATA_SOURCE_NOT_FOUND" in text and "kafka" in text)


def server_gone(exc: BaseException) -> bool:
    """Whether a failure says the server stopped answering (not that the job failed)."""
    return _status(exc) in _GONE


def unreachable(settings: SparkSettings, exc: BaseException | None,
                waited_s: float) -> SparkServerUnreachable:
    cause = _cause(exc) if exc is not None else f"no answer in {waited_s:g} s"
    return SparkServerUnreachable(
        f"The {settings.where} server did not answer: {cause}.",
        "Start it (or check spark.remote's host, port and use_ssl), then run the command "
        "again; without spark.remote the gap job runs as a local Spark job.",
        detail=str(exc) if exc is not None else None)


def _within(deadline_s: float, ask: Callable[[], T], settings: SparkSettings) -> T:
    """`ask()` (the client retrying a server that does not answer) in a thread, so that a
    channel that hangs (a TLS handshake with a plain server) ends at the deadline too."""
    done: dict[str, Any] = {}

    def attempt() -> None:
        try:
            done["value"] = ask()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
            done["error"] = exc

    worker = threading.Thread(target=attempt, name="drctl-spark-connect", daemon=True)
    worker.start()
    worker.join(deadline_s)
    if worker.is_alive():
        raise unreachable(settings, None, deadline_s)
    error = done.get("error")
    if error is None:
        return done["value"]
    if _status(error) in _REFUSED:
        raise SparkServerRefused(f"The {settings.where} server refused drctl: "
                                 f"{_cause(error)}.",
                                 "Check spark.remote's token and use_ssl.",
                                 detail=str(error)) from error
    if server_gone(error):
        raise unreachable(settings, error, deadline_s) from error
    raise error


def _status(exc: BaseException) -> str | None:
    """The gRPC status name a Spark Connect failure carries, if any."""
    for err in (exc, exc.__cause__):
        code = getattr(err, "getGrpcStatusCode", None)
        if callable(code):
            status = code()
            return str(getattr(status, "name", status)).removeprefix("StatusCode.")
        code = getattr(err, "code", None)
        if callable(code):
            return str(getattr(code(), "name", code()))
    return None


def _cause(exc: BaseException) -> str:
    text = str(exc)
    for line in text.splitlines():
        if "details" in line and "=" in line:
            return line.split("=", 1)[1].strip().strip('"')
    return text.splitlines()[0] if text else type(exc).__name__
