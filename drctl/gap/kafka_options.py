"""Cluster settings (librdkafka property names, as the config takes them) as `kafka.*` options
of Spark's Kafka source, which runs the Java client.

What librdkafka reads from a file and Java wants in another shape is read here and passed
inline: a PEM client certificate and key become `ssl.keystore.certificate.chain` and
`ssl.keystore.key` (Java's PEM keystore takes one file holding both, librdkafka two files), so
Spark executors need no copy of the files either. A cluster's `java:` map (Config.
java_properties) is applied last: its values override the mapped ones, and a null leaves a
property out, whichever client's name it is; a librdkafka property the map names is not mapped
(the map says what Java gets instead).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from drctl.config import JAVA_PROPERTIES_KEY, Config
from drctl.errors import ConfigError

# Same name and meaning in both clients.
_SHARED = (
    "bootstrap.servers", "client.id", "client.rack", "ssl.key.password",
    "request.timeout.ms", "metadata.max.age.ms", "socket.connection.setup.timeout.ms",
    "reconnect.backoff.ms", "reconnect.backoff.max.ms", "client.dns.lookup",
    "sasl.kerberos.min.time.before.relogin",
)
# librdkafka-only settings that change nothing a Java reader needs.
_IGNORED = ("api.version.request", "broker.address.family", "log_level", "debug",
            "statistics.interval.ms", "enable.sasl.oauthbearer.unsecure.jwt",
            # Java logs in to Kerberos itself (Krb5LoginModule) instead of running kinit.
            "sasl.kerberos.kinit.cmd")

_PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
_SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
_OAUTH_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
# In this package since kafka-clients 3.4 (the `.secured.` one was removed in 4.0); the
# connector drctl fetches for PySpark 4 brings kafka-clients 3.9.
OAUTH_LOGIN_HANDLER = ("org.apache.kafka.common.security.oauthbearer."
                       "OAuthBearerLoginCallbackHandler")
_KERBEROS_MODULE = "com.sun.security.auth.module.Krb5LoginModule"
_USERNAME_MODULES = {"PLAIN": _PLAIN_MODULE, "SCRAM-SHA-256": _SCRAM_MODULE,
                     "SCRAM-SHA-512": _SCRAM_MODULE}
# Set by Spark's Kafka source itself: refused under `java:`, left out as librdkafka settings.
_SPARK_OWNED = ("key.deserializer", "value.deserializer", "auto.offset.reset",
                "enable.auto.commit", "interceptor.classes")
# PKCS#1 and SEC1 keys, which librdkafka (OpenSSL) reads and Java's PEM keystore does not.
_NOT_PKCS8 = ("BEGIN RSA PRIVATE KEY", "BEGIN EC PRIVATE KEY", "BEGIN DSA PRIVATE KEY")


@dataclass(frozen=True)
class JavaClientSettings:
    """A cluster's Java client properties and what the operator must hear about them."""

    properties: dict[str, str]
    warnings: tuple[str, ...] = ()

    def spark_options(self) -> dict[str, str]:
        return {f"kafka.{k}": v for k, v in self.properties.items()}


# However short --deadline, a Kafka request of the job waits at least this long: a healthy
# cluster on a loaded machine answers within it, and one that is gone waits no longer.
MIN_WAIT_S = 15.0


def deadline_options(deadline_s: float) -> dict[str, str]:
    """Spark Kafka source options that bound the job's waits for a cluster that is gone by
    `deadline_s` (--deadline). Left to their defaults, a broker lost mid-job is noticed after
    minutes (216 s measured at --deadline 30s): an executor polls for Spark's network timeout
    (`kafkaConsumer.pollTimeoutMs`, 120 s) and then asks the partition's offsets, each for
    the client's `default.api.timeout.ms` (60 s), and the driver reads offsets in
    `fetchOffset.numRetries` attempts (3) of as long. One attempt is enough: each Kafka call
    retries within its own timeout."""
    wait_ms = int(max(deadline_s, MIN_WAIT_S) * 1000)
    return {
        "kafkaConsumer.pollTimeoutMs": str(wait_ms),
        "fetchOffset.numRetries": "1",
        "kafka.request.timeout.ms": str(wait_ms),
        "kafka.default.api.timeout.ms": str(wait_ms),
        "kafka.socket.connection.setup.timeout.max.ms": str(min(wait_ms, 30_000)),
    }


def java_settings_for(config: Config, name: str) -> JavaClientSettings:
    return java_client_settings(config.cluster(name), name, config.java_properties(name),
                                config_path=str(config.path) if config.path else None)


def gap_job_settings(config: Config) -> tuple[dict[str, JavaClientSettings], list[ConfigError]]:
    """The Java settings of the replication's clusters (the two the gap job reads), and every
    problem that keeps one from being built."""
    rep = config.require_replication()
    settings: dict[str, JavaClientSettings] = {}
    problems: list[ConfigError] = []
    for name in dict.fromkeys((rep.source, rep.target)):
        try:
            settings[name] = java_settings_for(config, name)
        except ConfigError as exc:
            problems.extend(exc.problems or (exc,))
    return settings, problems


def java_client_settings(props: Mapping[str, str], cluster: str,
                         java: Mapping[str, str | None] | None = None, *,
                         config_path: str | None = None) -> JavaClientSettings:
    """Java client properties for a cluster's librdkafka properties, with `java` (the
    cluster's `java:` map) on top. A setting with no Java equivalent is an error naming it and
    what to add (silently dropping, say, a CA file would fail later inside Spark, less
    clearly); every such problem of the cluster is in the one ConfigError raised."""
    java = dict(java or {})
    # A name the `java:` map sets (or nulls) is the map's to decide, not the mapping's.
    mapping = _Mapping({k: v for k, v in props.items() if k not in java}, cluster, java,
                       config_path)
    mapping.sasl()
    mapping.tls()
    mapping.the_rest()
    for name in sorted(set(java) & set(_SPARK_OWNED)):
        mapping.problems.append(ConfigError(
            "Spark's Kafka source sets this itself and refuses it.", path=config_path,
            key=f"clusters.{cluster}.{JAVA_PROPERTIES_KEY}.{name}", hint="Remove it."))
    if mapping.problems:
        raise ConfigError.of(mapping.problems, config_path)
    out = mapping.out
    for name, value in java.items():
        if value is None:
            out.pop(name, None)
        else:
            out[name] = value
    return JavaClientSettings(out, tuple(mapping.warnings))


def _jaas_quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _jaas(module: str, options: Mapping[str, str | None]) -> str:
    given = " ".join(f"{k}={_jaas_quote(v)}" for k, v in options.items() if v is not None)
    return f"{module} required{' ' if given else ''}{given};"


class _Mapping:
    """One cluster's translation: takes librdkafka properties out of `rest` as it maps them;
    whatever is left at the end has no mapping."""

    def __init__(self, props: Mapping[str, str], cluster: str,
                 java: Mapping[str, str | None], config_path: str | None) -> None:
        self.rest = dict(props)
        self.cluster = cluster
        self.java = java
        self.config_path = config_path
        self.out: dict[str, str] = {}
        self.warnings: list[str] = []
        self.problems: list[ConfigError] = []

    def take(self, name: str) -> str | None:
        return self.rest.pop(name, None)

    def problem(self, prop: str, message: str, hint: str) -> None:
        self.problems.append(ConfigError(message, path=self.config_path,
                                         key=f"clusters.{self.cluster}.{prop}", hint=hint))

    def java_hint(self, *props: str) -> str:
        return (f"Set {', '.join(props)} for the gap job under "
                f"clusters.{self.cluster}.{JAVA_PROPERTIES_KEY}.")

    # SASL ------------------------------------------------------------------------------------

    def sasl(self) -> None:
        protocol = (self.take("security.protocol") or "").upper()  # librdkafka takes sasl_ssl
        mechanism = (self.take("sasl.mechanisms") or self.take("sasl.mechanism") or "").upper()
        username = self.take("sasl.username")
        password = self.take("sasl.password")
        service = self.take("sasl.kerberos.service.name")
        if protocol:
            self.out["security.protocol"] = protocol
        if not protocol.startswith("SASL"):
            return  # no SASL: neither client reads the rest
        mechanism = mechanism or "GSSAPI"  # the default of both clients
        self.out["sasl.mechanism"] = mechanism
        if mechanism == "GSSAPI":
            self.gssapi(service or "kafka")  # librdkafka's default; Java has none
            return
        if service is not None:
            self.out["sasl.kerberos.service.name"] = service
        if mechanism == "OAUTHBEARER":
            self.oauthbearer()
        elif mechanism in _USERNAME_MODULES:
            if username is not None:
                self.out["sasl.jaas.config"] = _jaas(
                    _USERNAME_MODULES[mechanism],
                    {"username": username, "password": password or ""})
        elif "sasl.jaas.config" not in self.java:
            self.problem("sasl.mechanism",
                         f"SASL mechanism {mechanism} has no Java login drctl can build.",
                         self.java_hint("sasl.jaas.config") + " For AWS_MSK_IAM: sasl.jaas."
                         "config: software.amazon.msk.auth.iam.IAMLoginModule required; and "
                         "sasl.client.callback.handler.class: software.amazon.msk.auth.iam."
                         "IAMClientCallbackHandler, with aws-msk-iam-auth in spark.jars.")

    def oauthbearer(self) -> None:
        method = (self.take("sasl.oauthbearer.method") or "default").lower()
        oidc = {name: self.take(f"sasl.oauthbearer.{name}")
                for name in ("client.id", "client.secret", "token.endpoint.url", "scope",
                             "extensions")}
        unsecured = self.take("sasl.oauthbearer.config")
        if method == "oidc":
            missing = [f"sasl.oauthbearer.{n}" for n in ("client.id", "client.secret",
                                                         "token.endpoint.url")
                       if not oidc[n]]
            if missing:
                self.problem(missing[0], f"OAUTHBEARER with method oidc needs "
                             f"{', '.join(missing)}.", "Set them as librdkafka needs them too.")
                return
            self.out["sasl.login.callback.handler.class"] = OAUTH_LOGIN_HANDLER
            self.out["sasl.oauthbearer.token.endpoint.url"] = oidc["token.endpoint.url"] or ""
            extensions = dict(pair.partition("=")[::2]
                              for pair in (oidc["extensions"] or "").split(",") if pair)
            self.out["sasl.jaas.config"] = _jaas(_OAUTH_MODULE, {
                "clientId": oidc["client.id"], "clientSecret": oidc["client.secret"],
                "scope": oidc["scope"],
                **{f"extension_{k.strip()}": v.strip() for k, v in extensions.items()}})
        elif method == "default":
            self.unsecured_jwt(unsecured or "")
        else:
            self.problem("sasl.oauthbearer.method", f"OAUTHBEARER method '{method}' has no "
                         "Java login drctl can build.",
                         self.java_hint("sasl.jaas.config", "sasl.login.callback.handler.class"))

    def unsecured_jwt(self, text: str) -> None:
        """librdkafka's unsecured-token settings (`principal=... scope=a,b lifeSeconds=...`)
        as the options of Java's default (unsecured) OAUTHBEARER login."""
        given = dict(item.partition("=")[::2] for item in text.split() if item)
        if not given.get("principal"):
            self.problem("sasl.oauthbearer.config", "OAUTHBEARER without method oidc needs "
                         "principal=NAME in sasl.oauthbearer.config (an unsecured token).",
                         "Set it as librdkafka needs it too, or set sasl.oauthbearer.method: "
                         "oidc with a client id, secret and token endpoint.")
            return
        principal_claim = given.get("principalClaimName", "sub")
        scope_claim = given.get("scopeClaimName", "scope")
        options: dict[str, str | None] = {
            f"unsecuredLoginStringClaim_{principal_claim}": given["principal"],
            "unsecuredLoginPrincipalClaimName": given.get("principalClaimName"),
            "unsecuredLoginScopeClaimName": given.get("scopeClaimName"),
            "unsecuredLoginLifetimeSeconds": given.get("lifeSeconds"),
            # A list claim's first character is its separator.
            f"unsecuredLoginListClaim_{scope_claim}":
                "," + given["scope"] if given.get("scope") else None,
            **{k: v for k, v in given.items() if k.startswith("extension_")},
        }
        self.out["sasl.jaas.config"] = _jaas(_OAUTH_MODULE, options)

    def gssapi(self, service: str) -> None:
        principal = self.take("sasl.kerberos.principal")
        keytab = self.take("sasl.kerberos.keytab")
        self.out["sasl.kerberos.service.name"] = service
        # Krb5LoginModule's flags are unquoted booleans; the keytab and principal are quoted.
        if keytab is not None:
            login = (f"useKeyTab=true storeKey=true keyTab={_jaas_quote(keytab)} "
                     f"principal={_jaas_quote(principal or 'kafkaclient')}")  # librdkafka's
        else:
            login = "useTicketCache=true" + (
                f" principal={_jaas_quote(principal)}" if principal else "")
        self.out["sasl.jaas.config"] = f"{_KERBEROS_MODULE} required {login};"

    # TLS -------------------------------------------------------------------------------------

    def tls(self) -> None:
        self.truststore()
        self.keystore()
        verify = self.take("enable.ssl.certificate.verification")
        identification = self.take("ssl.endpoint.identification.algorithm")
        if identification is not None:
            self.out["ssl.endpoint.identification.algorithm"] = (
                "" if identification.lower() == "none" else identification)
        if verify is not None and verify.lower() in ("false", "0", "no", "off"):
            self.out.setdefault("ssl.endpoint.identification.algorithm", "")
            self.warnings.append(
                f"{self.cluster}: enable.ssl.certificate.verification is false. The gap job's "
                "Java client skips only the host name check: it still verifies the broker's "
                "certificate chain, so it fails unless ssl.ca.location (or a truststore under "
                f"clusters.{self.cluster}.{JAVA_PROPERTIES_KEY}) holds the CA that signed it. "
                "Without verification anyone on the path can read and change the data.")

    def truststore(self) -> None:
        location = self.take("ssl.ca.location")
        inline = self.take("ssl.ca.pem")
        if location == "probe":
            location = None  # the system's CAs: the JVM's default truststore plays that part
        if location is not None and os.path.isdir(location):
            self.problem("ssl.ca.location", f"{location} is a directory: Java reads CA "
                         "certificates from one PEM file.",
                         "Concatenate the CA certificates into one file and point "
                         "ssl.ca.location at it, or " + self.java_hint(
                             "ssl.truststore.location", "ssl.truststore.type").lower())
            return
        if location is None and inline is None:
            return
        self.out["ssl.truststore.type"] = "PEM"
        if inline is None:
            self.out["ssl.truststore.location"] = location or ""
            return
        if location is not None:
            # Java takes a file or inline certificates, not both: both go inline.
            from_file = self.read_pem("ssl.ca.location", location)
            inline = from_file.strip() + "\n" + inline.strip()
        self.out["ssl.truststore.certificates"] = inline

    def keystore(self) -> None:
        cert_file = self.take("ssl.certificate.location")
        key_file = self.take("ssl.key.location")
        cert = self.take("ssl.certificate.pem")
        key = self.take("ssl.key.pem")
        pkcs12 = self.take("ssl.keystore.location")
        pkcs12_password = self.take("ssl.keystore.password")
        if pkcs12 is not None:
            self.out.update({"ssl.keystore.type": "PKCS12", "ssl.keystore.location": pkcs12})
            if pkcs12_password is not None:
                self.out["ssl.keystore.password"] = pkcs12_password
        if cert is None and cert_file is not None:
            cert = self.read_pem("ssl.certificate.location", cert_file)
        if key is None and key_file is not None:
            key = self.read_pem("ssl.key.location", key_file)
        if cert is None and key is None:
            return
        if pkcs12 is not None:
            self.problem("ssl.keystore.location", "a PKCS#12 keystore and a PEM certificate "
                         "and key are two client identities.", "Keep one of them.")
            return
        if cert is None:
            self.problem("ssl.key.location" if key_file else "ssl.key.pem",
                         "a client key without its certificate.",
                         "Set ssl.certificate.location (a file) or ssl.certificate.pem.")
            return
        if key is None:
            self.problem("ssl.certificate.location" if cert_file else "ssl.certificate.pem",
                         "a client certificate without its key.",
                         "Set ssl.key.location (a file) or ssl.key.pem.")
            return
        if any(marker in key for marker in _NOT_PKCS8):
            self.problem("ssl.key.location" if key_file else "ssl.key.pem",
                         "the client key is a PKCS#1 or SEC1 PEM key; Java's PEM keystore "
                         "reads only PKCS#8 keys (BEGIN PRIVATE KEY or BEGIN ENCRYPTED "
                         "PRIVATE KEY).",
                         "Convert it once, for both clients: `openssl pkcs8 -topk8 -nocrypt "
                         "-in KEY -out KEY.pk8` (or -v2 aes256 instead of -nocrypt to keep a "
                         "password, then set ssl.key.password).")
            return
        self.out.update({"ssl.keystore.type": "PEM", "ssl.keystore.certificate.chain": cert,
                         "ssl.keystore.key": key})

    def read_pem(self, prop: str, path: str) -> str:
        try:
            return Path(path).expanduser().read_text(encoding="ascii")
        except OSError as exc:
            self.problem(prop, f"cannot read {path}: {exc.strerror}",
                         "Point it at a readable PEM file on this machine.")
        except UnicodeDecodeError:
            self.problem(prop, f"{path} is not a PEM file (PEM is ASCII text).",
                         "Convert it to PEM, e.g. with `openssl x509 -inform der` or "
                         "`openssl pkcs8 -inform der`.")
        return ""

    # Everything else -------------------------------------------------------------------------

    def the_rest(self) -> None:
        for name, value in self.rest.items():
            if name in _SHARED:
                self.out[name] = value
            elif name not in _IGNORED and name not in _SPARK_OWNED:
                self.problem(name, f"'{name}' has no equivalent drctl knows for the Java "
                             "client that Spark's Kafka source runs.",
                             f"Under clusters.{self.cluster}.{JAVA_PROPERTIES_KEY}, set "
                             f"{name} to the value Java takes (null leaves it out of the gap "
                             "job), or set its Java equivalent there.")
