"""Kerberos as the docs promise it (drctl/kafka/librdkafka.py): whether the loaded librdkafka
has GSSAPI (`builtin.features` has sasl_gssapi) as `drctl --version` says it, and the error a
Kerberos cluster gets when it has not — what to install, not librdkafka's "recompile"."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer

from drctl.cli.app import main
from drctl.errors import ConfigError, ExitStatus
from drctl.kafka import librdkafka
from drctl.kafka.clients import ClusterClients
from drctl.kafka.librdkafka import KERBEROS_FEATURE, has_feature

KERBEROS = {"bootstrap.servers": "127.0.0.1:9", "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "GSSAPI", "sasl.kerberos.service.name": "kafka",
            "sasl.kerberos.principal": "drctl@EXAMPLE.COM"}
# What librdkafka 2.x says when it has no GSSAPI provider (the PyPI wheel's).
NO_PROVIDER = ("Failed to create producer: No provider for SASL mechanism GSSAPI: recompile "
               "librdkafka with libsasl2 or openssl support. Current build options: PLAIN "
               "SASL_SCRAM OAUTHBEARER")


def _librdkafka_makes_a_kerberos_client() -> bool:
    """The truth the probe must tell, from librdkafka itself: does it build a GSSAPI client?"""
    try:
        producer = Producer(KERBEROS)
    except KafkaException as exc:
        assert "No provider for SASL mechanism GSSAPI" in exc.args[0].str(), exc
        return False
    producer.flush(0)
    return True


def test_the_probe_tells_what_the_loaded_librdkafka_was_built_with() -> None:
    assert has_feature("sasl_plain") is True  # built into every librdkafka 1.x and 2.x
    assert has_feature("no_such_feature") is False
    assert has_feature(KERBEROS_FEATURE) is _librdkafka_makes_a_kerberos_client()


@pytest.mark.parametrize(("has", "line"), [
    (True, "sasl_gssapi yes (Kerberos: sasl.mechanism GSSAPI works)"),
    (False, "sasl_gssapi no (builtin.features lacks it: no Kerberos with this confluent-kafka; "
            "docs/security.md, 'GSSAPI (Kerberos)')"),
    (None, "sasl_gssapi unknown (librdkafka did not say whether builtin.features has it)")])
def test_version_says_whether_librdkafka_has_kerberos(
        has: bool | None, line: str, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(librdkafka, "has_feature", lambda feature: has)
    assert main(["--version"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert line in out, out
    assert out.index(line) == next(i for i, o in enumerate(out)
                                   if o.startswith("librdkafka ")) + 1


def test_version_of_the_loaded_librdkafka(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    out = capsys.readouterr().out.splitlines()
    said = next(o for o in out if o.startswith("sasl_gssapi "))
    assert said.split()[1] == ("yes" if _librdkafka_makes_a_kerberos_client() else "no"), said


def _refusing(*_args: object) -> Producer:
    raise KafkaException(KafkaError(KafkaError._INVALID_ARG, NO_PROVIDER))


def test_a_kerberos_cluster_without_gssapi_says_what_to_install() -> None:
    clients = ClusterClients("payments", KERBEROS)
    with pytest.raises(ConfigError) as info:
        clients._create(_refusing, {})
    error = info.value
    assert error.key == "clusters.payments.sasl.mechanism"
    assert error.exit_status == ExitStatus.USAGE
    assert "cluster 'payments' logs in with Kerberos (GSSAPI)" in error.message
    assert "No provider for SASL mechanism GSSAPI" in error.message  # librdkafka's words
    hint = error.hint or ""
    for needed in ("Cyrus SASL", "librdkafka-dev", "libsasl2-modules-gssapi-mit",
                   "pip install --force-reinstall --no-binary confluent-kafka confluent-kafka",
                   "`drctl --version`", "docs/security.md"):
        assert needed in hint, (needed, hint)


def test_config_check_on_this_librdkafka(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    """`config check` of a Kerberos cluster with the librdkafka loaded here: exit 2 with what
    to install when it lacks GSSAPI (the PyPI wheel); past the client otherwise."""
    keytab = tmp_path / "drctl.keytab"
    keytab.write_bytes(b"\x05\x02")
    cfg = tmp_path / "drctl.yaml"
    cfg.write_text("clusters:\n  payments:\n" + "".join(
        f"    {k}: '{v}'\n" for k, v in {**KERBEROS, "sasl.kerberos.keytab": keytab}.items())
        + "retry: {initial_s: 0.2}\n")
    status = main(["--config", str(cfg), "config", "check", "--deadline", "1s"])
    err = " ".join(capsys.readouterr().err.split())
    if _librdkafka_makes_a_kerberos_client():
        assert "logs in with Kerberos" not in err and status != ExitStatus.USAGE, err
    else:
        assert status == ExitStatus.USAGE, err
        assert "clusters.payments.sasl.mechanism: cluster 'payments' logs in with Kerberos" \
            in err and "--no-binary confluent-kafka" in err, err
