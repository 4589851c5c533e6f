"""The versions drctl runs with, for `drctl --version` and bug reports: drctl, Python,
confluent-kafka and the librdkafka inside it (and whether it has Kerberos: `sasl_gssapi` in
its builtin.features), PySpark and Java. What is missing is said, never an error: a host that
only fails over needs neither Spark nor Java."""

from __future__ import annotations

import platform
import subprocess
from importlib import metadata

import confluent_kafka

from drctl import __version__
from drctl.kafka.librdkafka import kerberos_support
from drctl.lab.jars import find_java, java_version


def runtime_versions() -> dict[str, str]:
    """Component name to version, or to why there is none."""
    java = find_java()
    return {
        "drctl": __version__,
        "python": platform.python_version(),
        "confluent-kafka": metadata.version("confluent-kafka"),
        "librdkafka": confluent_kafka.libversion()[0],
        "sasl_gssapi": kerberos_support(),
        "pyspark": _pyspark(),
        "java": _java(java) if java else "not found (JAVA_HOME or PATH)",
    }


def _package_version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


def _pyspark() -> str:
    """PySpark's version; the thin Spark Connect client (pyspark-client) says so: it runs gap
    jobs on a server only (spark.remote)."""
    version = _package_version("pyspark")
    if version == "not installed" and _package_version("pyspark-client") != "not installed":
        return f"pyspark-client {_package_version('pyspark-client')} (Spark Connect only)"
    return version


def _java(java: str) -> str:
    try:
        version = java_version(java, timeout_s=10)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{java} did not answer `java -version` ({type(exc).__name__})"
    return f"{version or 'unknown version'} ({java})"
