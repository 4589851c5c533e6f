"""What the loaded librdkafka was built with (its `builtin.features`), and what a Kerberos
estate needs when it lacks GSSAPI.

confluent-kafka's wheels on PyPI bundle a librdkafka without Cyrus SASL: no `sasl_gssapi`,
so a cluster with `sasl.mechanism: GSSAPI` cannot be reached. librdkafka answers whether it
has a feature when `builtin.features` is set to it (an unsupported one is refused by name);
the probe below asks that without making a client.
"""

from __future__ import annotations

from confluent_kafka import KafkaError, KafkaException, Producer

KERBEROS_FEATURE = "sasl_gssapi"
# A property no librdkafka knows: set after `builtin.features` (a dict keeps its order, and
# confluent-kafka sets properties in that order), its refusal means the feature was accepted.
_NO_SUCH_PROPERTY = "drctl.probe.no.such.property"

KERBEROS_NEEDS = (
    "Kerberos (GSSAPI) needs confluent-kafka built against a librdkafka with Cyrus SASL; "
    "the PyPI wheel's has none (`drctl --version` shows sasl_gssapi no). In drctl's Python "
    "environment: install librdkafka-dev from Confluent's APT/YUM repository (built with "
    "Cyrus SASL; or build librdkafka from source with libsasl2-dev installed), the Kerberos "
    "SASL plugin (libsasl2-modules-gssapi-mit or cyrus-sasl-gssapi) and kinit (krb5-user or "
    "krb5-workstation), then `pip install --force-reinstall --no-binary confluent-kafka "
    "confluent-kafka`. docs/security.md, 'GSSAPI (Kerberos)'.")


def has_feature(feature: str) -> bool | None:
    """Whether the loaded librdkafka was built with `feature` (a name of its
    `builtin.features`: sasl_gssapi, ssl, zstd, …); None when its answer says neither."""
    try:
        Producer({"builtin.features": feature, _NO_SUCH_PROPERTY: "x"})
    except KafkaException as exc:
        err = exc.args[0] if exc.args else None
        text = err.str() if isinstance(err, KafkaError) else str(exc)
        if "builtin.features" in text:
            return False
        if _NO_SUCH_PROPERTY in text:
            return True
    return None  # not reached: librdkafka refuses the made-up property


def kerberos_support() -> str:
    """`drctl --version`'s line on Kerberos: whether this librdkafka has sasl_gssapi."""
    has = has_feature(KERBEROS_FEATURE)
    if has is None:
        return "unknown (librdkafka did not say whether builtin.features has it)"
    if has:
        return "yes (Kerberos: sasl.mechanism GSSAPI works)"
    return ("no (builtin.features lacks it: no Kerberos with this confluent-kafka; "
            "docs/security.md, 'GSSAPI (Kerberos)')")


def lacks_kerberos(reason: str) -> bool:
    """Whether librdkafka refused a client because it has no GSSAPI provider."""
    return "No provider for SASL mechanism GSSAPI" in reason
