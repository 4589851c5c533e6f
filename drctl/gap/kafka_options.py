"""Cluster settings (librdkafka property names, as the config takes them) as `kafka.*` options
of Spark's Kafka source, which runs the Java client."""

from __future__ import annotations

from collections.abc import Mapping

from drctl.errors import ConfigError

# Same name and meaning in both clients.
_SHARED = (
    "bootstrap.servers", "client.id", "security.protocol", "sasl.kerberos.service.name",
    "ssl.endpoint.identification.algorithm", "ssl.keystore.location", "ssl.keystore.password",
    "ssl.key.password", "ssl.truststore.location", "ssl.truststore.password",
    "ssl.cipher.suites", "sasl.jaas.config", "sasl.login.callback.handler.class",
    "sasl.client.callback.handler.class", "request.timeout.ms", "metadata.max.age.ms",
    "socket.connection.setup.timeout.ms", "reconnect.backoff.ms", "reconnect.backoff.max.ms",
    "client.dns.lookup",
)
# librdkafka-only settings that change nothing a Java reader needs.
_IGNORED = ("api.version.request", "broker.address.family", "log_level", "debug",
            "statistics.interval.ms")

_LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}


def _jaas_quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def java_client_properties(props: Mapping[str, str], cluster: str) -> dict[str, str]:
    """Java client properties for a cluster; a setting with no Java equivalent is an error
    naming it (silently dropping, say, a CA file would fail later and less clearly)."""
    out: dict[str, str] = {}
    rest = dict(props)
    mechanism = rest.pop("sasl.mechanisms", None) or rest.pop("sasl.mechanism", None)
    username = rest.pop("sasl.username", None)
    password = rest.pop("sasl.password", None)
    if mechanism:
        out["sasl.mechanism"] = mechanism
    if username is not None and "sasl.jaas.config" not in rest:
        module = _LOGIN_MODULES.get((mechanism or "PLAIN").upper())
        if module is None:
            raise ConfigError(f"sasl.username with sasl.mechanism {mechanism} has no Java "
                              "equivalent drctl can build.", key=f"clusters.{cluster}",
                              hint="Set sasl.jaas.config for the Spark job.")
        out["sasl.jaas.config"] = (f"{module} required username={_jaas_quote(username)} "
                                   f"password={_jaas_quote(password or '')};")
    ca = rest.pop("ssl.ca.location", None)
    if ca is not None and "ssl.truststore.location" not in rest:
        out["ssl.truststore.type"] = "PEM"
        out["ssl.truststore.location"] = ca
    for name, value in rest.items():
        if name in _SHARED:
            out[name] = value
        elif name in _IGNORED:
            continue
        else:
            raise ConfigError(f"'{name}' has no equivalent drctl knows for the Java client "
                              "that Spark's Kafka source runs.", key=f"clusters.{cluster}",
                              hint="Use the Java name of the setting if both clients accept "
                                   "it, or ask for it to be mapped.")
    return out


def spark_kafka_options(props: Mapping[str, str], cluster: str) -> dict[str, str]:
    return {f"kafka.{k}": v for k, v in java_client_properties(props, cluster).items()}
