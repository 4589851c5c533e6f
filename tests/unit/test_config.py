from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from drctl.cli.app import main
from drctl.config import config_as_data, load_config, parse_config
from drctl.errors import ConfigError, ExitStatus
from drctl.gap.kafka_options import java_settings_for

GOOD = """
clusters:
  primary:
    bootstrap.servers: 127.0.0.1:19092
    sasl.jaas.config: ${env:DRCTL_TEST_JAAS}
    sasl.password: ${file:SECRET_FILE}
  secondary:
    bootstrap.servers: 127.0.0.1:29092
replication:
  kind: mirrormaker2
  source: primary
  target: secondary
  rename: "primary.{topic}"
  topics: {include: ["orders.*"], exclude: ["orders-tmp"]}
  connect: {url: "http://127.0.0.1:18083", source_connector: src}
groups: {exclude: ["console-.*"]}
state: {dir: state}
retry: {initial_s: 0.5, attempts: 3}
"""


def write(tmp_path: Path, text: str, secret: str = "hunter2-file-secret") -> Path:
    secret_file = tmp_path / "secret.txt"
    secret_file.write_text(secret + "\n")
    path = tmp_path / "drctl.yaml"
    path.write_text(text.replace("SECRET_FILE", str(secret_file)))
    return path


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DRCTL_TEST_JAAS", "org.apache.kafka.Plain username=u password=s3cr3t-env")


def test_good_config_resolves_references_and_relative_paths(tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path, GOOD))
    assert cfg.clusters["primary"]["sasl.password"] == "hunter2-file-secret"
    assert "s3cr3t-env" in cfg.clusters["primary"]["sasl.jaas.config"]
    assert cfg.state.dir == tmp_path / "state"
    assert cfg.retry.initial_s == 0.5 and cfg.retry.attempts == 3
    assert cfg.retry.max_s == 120.0  # Debezium's cap by default
    rep = cfg.require_replication()
    assert rep.mirror_topic("orders") == "primary.orders"
    assert rep.failover_topic("orders") == "orders"
    assert rep.source_topic_of("primary.orders") == "orders"
    assert rep.source_topic_of("orders") is None
    assert rep.topics.matches("orders-eu") and not rep.topics.matches("orders-tmp")
    assert not rep.topics.matches("payments")
    assert cfg.groups.matches("app") and not cfg.groups.matches("console-1")


def test_names_kept_maps_topics_to_themselves() -> None:
    cfg = parse_config({"clusters": {"a": {"bootstrap.servers": "x"},
                                     "b": {"bootstrap.servers": "y"}},
                        "replication": {"kind": "identity", "source": "a", "target": "b"}})
    rep = cfg.require_replication()
    assert rep.names_kept and rep.mirror_topic("t") == "t" == rep.failover_topic("t")


def test_the_reverse_flows_copies_are_never_source_topics_with_prefixed_names() -> None:
    # MirrorMaker 2's default policy, the flow's filter matching everything ('.*').
    cfg = parse_config({"clusters": {"primary": {"bootstrap.servers": "x"},
                                     "secondary": {"bootstrap.servers": "y"}},
                        "replication": {"kind": "mirrormaker2", "source": "primary",
                                        "target": "secondary", "rename": "primary.{topic}",
                                        "source_alias": "primary",
                                        "target_alias": "secondary"}})
    rep = cfg.require_replication()
    assert rep.reverse_topic("orders") == "secondary.orders"
    assert rep.reverse_copy_origin("secondary.orders") == "orders"
    assert rep.topics.matches("secondary.orders") and not rep.replicates("secondary.orders")
    assert rep.replicates("orders") and rep.reverse_copy_origin("orders") is None
    assert rep.replicates("other.orders")  # another cluster's copies are source topics
    assert rep.reverse_copy_origin("secondary.") is None
    # Names kept: the reverse flow writes into the source topic itself; nothing is a copy.
    kept = parse_config({"clusters": {"a": {"bootstrap.servers": "x"},
                                      "b": {"bootstrap.servers": "y"}},
                         "replication": {"kind": "mirrormaker2", "source": "a", "target": "b",
                                         "target_alias": "b"}}).require_replication()
    assert kept.reverse_topic("orders") == "orders"
    assert kept.replicates("b.orders") and kept.reverse_copy_origin("b.orders") is None


def test_replication_principal_is_optional_and_kept_as_written() -> None:
    base = {"clusters": {"a": {"bootstrap.servers": "x"}, "b": {"bootstrap.servers": "y"}},
            "replication": {"kind": "mirrormaker2", "source": "a", "target": "b"}}
    assert parse_config(base).require_replication().principal is None
    base["replication"]["principal"] = "User:CN=mm2,OU=dr"  # TLS principals contain '=' and ','
    cfg = parse_config(base)
    assert cfg.require_replication().principal == "User:CN=mm2,OU=dr"
    assert config_as_data(cfg)["replication"]["principal"] == "User:CN=mm2,OU=dr"


def test_show_masks_every_secret(tmp_path: Path) -> None:
    data = json.dumps(config_as_data(load_config(write(tmp_path, GOOD))))
    assert "s3cr3t-env" not in data and "hunter2-file-secret" not in data
    assert "${env:DRCTL_TEST_JAAS}" in data and "127.0.0.1:19092" in data  # references shown
    written = GOOD.replace("${env:DRCTL_TEST_JAAS}", "'a-literal-s3cr3t'")
    data = json.dumps(config_as_data(load_config(write(tmp_path, written))))
    assert "a-literal-s3cr3t" not in data and '"sasl.jaas.config": "****"' in data


@pytest.mark.parametrize(
    ("text", "key", "reason"),
    [
        ("clusters:\n  a: {bootstrap.servers: x}\nreplicaton: {}\n", "replicaton",
         "Did you mean 'replication'"),
        ("clusters:\n  a: {bootstrap.servers: x}\nretry: {attempts: many}\n",
         "retry.attempts", "expected an integer"),
        ("clusters:\n  a: {bootstrap.servers: '${env:DRCTL_NOT_SET_ANYWHERE}'}\n",
         "clusters.a.bootstrap.servers", "DRCTL_NOT_SET_ANYWHERE is not set"),
        ("clusters:\n  a: {bootstrap.servers: x}\nreplication: {kind: mirrormaker2, "
         "source: a, target: secondry}\n", "replication.target", "unknown cluster 'secondry'"),
        ("clusters:\n  a: {bootstrap.servers: x}\n  b: {bootstrap.servers: y}\n"
         "replication: {kind: mirormaker2, source: a, target: b}\n", "replication.kind",
         "Did you mean 'mirrormaker2'"),
        ("clusters:\n  a: {port: 1}\n", "clusters.a", "missing 'bootstrap.servers'"),
        ("clusters: [a, b]\n", "clusters", "expected a mapping"),
        ("clusters:\n  a: {bootstrap.servers: x}\n  b: {bootstrap.servers: y}\n"
         "replication: {kind: identity, source: a, target: b, rename: 'x.{topic}'}\n",
         "replication.rename", "identity mirrors keep topic names"),
        ("clusters:\n  a: {bootstrap.servers: x}\ngroups: {include: ['(']}\n",
         "groups.include[0]", "not a valid regex"),
        ("clusters:\n  a: {bootstrap.servers: x}\n  b: {bootstrap.servers: y}\n"
         "replication: {kind: mirrormaker2, source: a, target: b, principal: mirrormaker}\n",
         "replication.principal", "'mirrormaker' is not a Kafka principal"),
        ("clusters:\n  a: {bootstrap.servers: x}\n  b: {bootstrap.servers: y}\n"
         "replication: {kind: mirrormaker2, source: a, target: b, principal: 'User:'}\n",
         "replication.principal", "'User:' is not a Kafka principal"),
    ],
)
def test_bad_config_names_file_key_and_reason(tmp_path: Path, text: str, key: str,
                                              reason: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    message = str(info.value)
    assert str(path) in message and f"{key}:" in message and reason in message
    assert info.value.exit_status == ExitStatus.USAGE


def test_invalid_yaml_gives_line(tmp_path: Path) -> None:
    path = write(tmp_path, "clusters:\n  a: [unclosed\n")
    with pytest.raises(ConfigError, match="line"):
        load_config(path)


def test_cli_bad_config_exit_2_without_traceback(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "clusters:\n  a: {bootstrap.servers: x}\nretri: {}\n")
    assert main(["--config", str(path), "config", "show"]) == ExitStatus.USAGE
    err = capsys.readouterr().err
    assert "retri: unknown key" in err and "Did you mean 'retry'" in err
    assert "Traceback" not in err


def test_cli_missing_config_says_what_to_do(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--config", str(tmp_path / "nope.yaml"), "config", "show"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "Write one with `drctl config init`" in err
    assert "To try drctl without clusters of your own: `drctl lab up`" in err


def test_cli_config_show_json_masks(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, GOOD)
    assert main(["--config", str(path), "--output", "json", "config", "show"]) == 0
    out, err = capsys.readouterr()
    data = json.loads(out)
    # Written as references: shown as those, never as the secrets they name.
    assert data["clusters"]["primary"]["sasl.password"] == \
        f"${{file:{tmp_path / 'secret.txt'}}}"
    assert data["clusters"]["primary"]["sasl.jaas.config"] == "${env:DRCTL_TEST_JAAS}"
    assert "hunter2-file-secret" not in out + err and "s3cr3t-env" not in out + err


def test_config_env_var_is_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("DRCTL_CONFIG", str(write(tmp_path, GOOD)))
    assert main(["-o", "json", "config", "show"]) == 0
    assert json.loads(capsys.readouterr().out)["replication"]["rename"] == "primary.{topic}"


CLIENT_PROPERTIES = r"""
# Kafka's client.properties, as a Java client would read it
bootstrap.servers = broker-1.example.com:9093,\
                    broker-2.example.com:9093
security.protocol=SASL_SSL
sasl.mechanism: SCRAM-SHA-512
sasl.username=dr-operator
sasl.password=pw-from-properties
ssl.ca.location=/etc/kafka/ca\u002Epem
"""


def test_client_properties_lie_under_the_clusters_own_keys(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "client.properties").write_text(CLIENT_PROPERTIES)
    path = write(tmp_path, """
        clusters:
          primary:
            client_properties: conf/client.properties   # beside drctl.yaml
            sasl.mechanism: SCRAM-SHA-256               # the YAML wins
    """.replace("\n        ", "\n"))
    primary = load_config(path).clusters["primary"]
    assert primary == {
        "bootstrap.servers": "broker-1.example.com:9093,broker-2.example.com:9093",
        "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": "dr-operator", "sasl.password": "pw-from-properties",
        "ssl.ca.location": "/etc/kafka/ca.pem"}
    assert main(["--config", str(path), "config", "show"]) == 0
    captured = capsys.readouterr()
    shown = yaml.safe_load(captured.out)["clusters"]["primary"]
    assert shown["sasl.password"] == "****" and shown["sasl.username"] == "dr-operator"
    assert "client_properties" not in shown  # drctl's key never reaches a client
    assert "pw-from-properties" not in captured.out + captured.err


@pytest.mark.parametrize("properties, message", [
    (None, "cannot read {dir}/client.properties: No such file or directory"),
    ("sasl.password=${env:DRCTL_TEST_UNSET}\n",
     "{dir}/client.properties: property 'sasl.password': unresolved reference: environment "
     "variable DRCTL_TEST_UNSET is not set"),
])
def test_client_properties_errors_name_the_file_and_key(
        tmp_path: Path, properties: str | None, message: str) -> None:
    if properties is not None:
        (tmp_path / "client.properties").write_text(properties)
    path = write(tmp_path, "clusters:\n  primary:\n    client_properties: client.properties\n"
                 "    bootstrap.servers: b:9092\n")
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert err.value.key == "clusters.primary.client_properties"
    assert err.value.message == (f"{path}: clusters.primary.client_properties: "
                                 + message.format(dir=tmp_path))
    assert err.value.exit_status == ExitStatus.USAGE


def test_file_references_read_a_key_of_a_properties_file(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    secrets = tmp_path / "secrets.properties"
    secrets.write_text("# FileConfigProvider's file\nscram.password=pw-by-key\n"
                       "scram.user = dr-operator\n")
    path = write(tmp_path, f"""
clusters:
  primary:
    bootstrap.servers: b:9092
    sasl.username: ${{file:{secrets}:scram.user}}
    sasl.password: ${{file:{secrets}:scram.password}}
""")
    primary = load_config(path).clusters["primary"]
    assert (primary["sasl.username"], primary["sasl.password"]) == ("dr-operator", "pw-by-key")
    assert main(["--config", str(path), "config", "show"]) == 0
    captured = capsys.readouterr()
    assert yaml.safe_load(captured.out)["clusters"]["primary"]["sasl.password"] == \
        f"${{file:{secrets}:scram.password}}"
    assert "pw-by-key" not in captured.out + captured.err

    path.write_text(path.read_text().replace("scram.password}", "scram.pasword}"))
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert err.value.key == "clusters.primary.sasl.password"
    assert (f"unresolved reference: {secrets} has no property 'scram.pasword' (did you mean "
            "'scram.password'?)") in err.value.message


def test_every_problem_of_a_file_is_reported_at_once(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, """
clusters:
  a: {bootstrap.servers: x, sasl.password: '${env:DRCTL_NOT_SET_ANYWHERE}'}
  b: {port: 1}
replication: {kind: mirormaker2, source: a, target: b, rename: 'x'}
retry: {attempts: many, initial_s: -1}
retri: {}
""")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    keys = [p.key for p in info.value.problems]
    assert keys == ["retri", "clusters.a.sasl.password", "clusters.b", "replication.kind",
                    "replication.rename", "retry.initial_s", "retry.attempts"]
    message = info.value.message
    assert message.startswith(f"{path}: 7 problems:")
    assert "Did you mean 'retry'" in message and "Did you mean 'mirrormaker2'" in message
    assert main(["--config", str(path), "config", "check"]) == ExitStatus.USAGE
    err = capsys.readouterr().err
    assert "retry.attempts: expected an integer" in err and "Did you mean 'retry'" in err


@pytest.mark.parametrize("command", [["config", "show"], ["status"]])
def test_misspelt_client_property_is_a_config_error_with_a_suggestion(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], command: list[str]) -> None:
    # A typo in a security property must not look like an unreachable cluster (exit 4).
    path = write(tmp_path, GOOD.replace("sasl.password:", "sasl.pasword:"))
    assert main(["--config", str(path), *command]) == ExitStatus.USAGE
    err = capsys.readouterr().err
    assert "clusters.primary.sasl.pasword" in err
    assert "Did you mean 'sasl.password'" in err
    assert "Traceback" not in err and "hunter2-file-secret" not in err


def test_unknown_kind_message_is_unchanged() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config({"clusters": {"a": {"bootstrap.servers": "x"},
                                   "b": {"bootstrap.servers": "y"}},
                      "replication": {"kind": "mirormaker2", "source": "a", "target": "b"}})
    assert info.value.message == ("replication.kind: must be one of replicator, mirrormaker2, "
                                  "identity, got 'mirormaker2'")
    assert info.value.hint == "Did you mean 'mirrormaker2'?"


@pytest.mark.parametrize("kind,renamed_ok", [("replicator", True), ("mirrormaker2", True),
                                             ("identity", False)])
def test_rename_rule_per_kind(kind: str, renamed_ok: bool) -> None:
    raw = {"clusters": {"a": {"bootstrap.servers": "x"}, "b": {"bootstrap.servers": "y"}},
           "replication": {"kind": kind, "source": "a", "target": "b",
                           "rename": "a.{topic}"}}
    if renamed_ok:
        assert parse_config(raw).require_replication().rename == "a.{topic}"
    else:
        with pytest.raises(ConfigError) as info:
            parse_config(raw)
        assert info.value.message == "replication.rename: identity mirrors keep topic names"


def test_config_java_map_is_kept_from_librdkafka_and_masked(tmp_path: Path) -> None:
    from drctl.config import config_as_data

    config = parse_config({
        "clusters": {
            "primary": {"bootstrap.servers": "p:1", "java": {
                "sasl.jaas.config": "org.X required password=\"hunter22\";",
                "ssl.engine.location": None, "client.rack": "r1", "metadata.max.age.ms": 500}},
            "secondary": {"bootstrap.servers": "s:1"}},
        "replication": {"kind": "mirrormaker2", "source": "primary", "target": "secondary"}})
    assert config.cluster("primary") == {"bootstrap.servers": "p:1"}
    assert config.java_properties("primary") == {
        "sasl.jaas.config": 'org.X required password="hunter22";', "ssl.engine.location": None,
        "client.rack": "r1", "metadata.max.age.ms": "500"}
    assert config.java_properties("secondary") == {}
    shown = config_as_data(config)
    assert shown["clusters"]["primary"]["java"]["sasl.jaas.config"] == "****"
    assert shown["clusters"]["primary"]["java"]["client.rack"] == "r1"
    assert "java" not in shown["clusters"]["secondary"]
    assert "hunter22" not in str(shown)
    assert config.redactor.redact("pw hunter22") == "pw ****"
    assert java_settings_for(config, "primary").properties == {
        "bootstrap.servers": "p:1", "sasl.jaas.config": 'org.X required password="hunter22";',
        "client.rack": "r1", "metadata.max.age.ms": "500"}


def test_java_map_problems_have_key_paths() -> None:
    with pytest.raises(ConfigError) as err:
        parse_config({"clusters": {"p": {"bootstrap.servers": "p:1", "java": ["x"]}}})
    assert err.value.key == "clusters.p.java" and "expected a mapping" in err.value.reason


def test_objectives_are_optional_durations() -> None:
    base = {"clusters": {"a": {"bootstrap.servers": "x"}}}
    assert parse_config(base).objectives.rpo_s is None
    cfg = parse_config({**base, "objectives": {"rpo": "60s", "rto": "15m"}})
    assert (cfg.objectives.rpo_s, cfg.objectives.rto_s) == (60.0, 900.0)
    assert parse_config({**base, "objectives": {"rpo": 0}}).objectives.rpo_s == 0.0
    assert config_as_data(cfg)["objectives"] == {"rpo": "60s", "rto": "900s"}


def test_a_bad_objective_is_a_config_error_with_its_key_path() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config({"clusters": {"a": {"bootstrap.servers": "x"}},
                      "objectives": {"rpo": "a minute", "rto": -5, "rtt": "1s"}})
    assert [p.key for p in info.value.problems] == ["objectives.rtt", "objectives.rpo",
                                                     "objectives.rto"]
    assert "expected a duration such as 5s, 500ms or 2m, got 'a minute'" in info.value.message
    assert "a duration cannot be negative" in info.value.message
    assert "Did you mean 'rto'" in info.value.message


def test_config_show_output_is_a_config_drctl_reads_back(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """What `config show` prints (YAML or JSON), saved elsewhere, is the same configuration:
    its own keys, references as written, relative paths resolved. Only a secret written in
    clear cannot come back: it is masked."""
    monkeypatch.setenv("DRCTL_TEST_JAAS", "s3cr3t-env")
    (tmp_path / "client.properties").write_text(
        f"security.protocol=SASL_SSL\nsasl.password=${{file:{tmp_path / 'secret.txt'}}}\n"
        "sasl.username=from-file\n")
    path = write(tmp_path, """
clusters:
  primary:
    bootstrap.servers: 127.0.0.1:19092
    sasl.jaas.config: ${env:DRCTL_TEST_JAAS}
  secondary:
    client_properties: client.properties
    bootstrap.servers: 127.0.0.1:29092
    sasl.username: from-yaml
    java: {ssl.truststore.password: literal-pw}
replication:
  kind: mirrormaker2
  source: primary
  target: secondary
  rename: "primary.{topic}"
  topics: {include: ["orders.*"], exclude: ["orders-tmp"]}
  principal: User:mirrormaker
  connect: {url: "http://127.0.0.1:18083", source_connector: src, ca_file: ca.pem}
groups: {exclude: ["console-.*"]}
state: {dir: state}
retry: {initial_s: 0.5, attempts: 3}
objectives: {rpo: 90s, rto: 15m}
spark: {master: "local[2]", jars: [jars/kafka.jar], conf: {spark.ui.enabled: "false"}}
""")
    config = load_config(path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for output in ("text", "json"):
        assert main(["--config", str(path), "-o", output, "config", "show"]) == 0
        shown = capsys.readouterr().out
        assert "s3cr3t-env" not in shown and "hunter2-file-secret" not in shown
        assert "literal-pw" not in shown
        copy = elsewhere / f"shown-{output}.yaml"
        copy.write_text(shown)
        again = load_config(copy)
        assert again.java_clusters["secondary"]["ssl.truststore.password"] == "****"
        assert again.clusters["secondary"]["sasl.username"] == "from-yaml"
        assert again.clusters["secondary"]["sasl.password"] == "hunter2-file-secret"
        assert again.state.dir == tmp_path / "state"
        assert again.spark.jars == (str(tmp_path / "jars" / "kafka.jar"),)
        assert again.objectives == config.objectives
        same = {**config.java_clusters, "secondary": {"ssl.truststore.password": "****"}}
        assert replace(again, path=None, java_clusters=same) == \
            replace(config, path=None, java_clusters=same)


def test_spark_remote_is_where_every_gap_job_runs_its_token_never_shown(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPARK_TOKEN", "s3cret-token")
    clusters = {"a": {"bootstrap.servers": "x"}}
    config = parse_config({"clusters": clusters, "spark": {
        "remote": "sc://spark:15002/;use_ssl=true;token=${env:SPARK_TOKEN}",
        "conf": {"spark.sql.shuffle.partitions": "8"}}})
    assert config.spark.remote == "sc://spark:15002/;use_ssl=true;token=s3cret-token"
    assert config.spark.where == "Spark Connect sc://spark:15002/;use_ssl=true;token=****"
    shown = config_as_data(config)["spark"]
    assert shown == {"remote": "sc://spark:15002/;use_ssl=true;token=${env:SPARK_TOKEN}",
                     "conf": {"spark.sql.shuffle.partitions": "8"}}
    written = parse_config({"clusters": clusters,
                            "spark": {"remote": "sc://spark:15002/;token=literal-token"}})
    assert config_as_data(written)["spark"]["remote"] == "sc://spark:15002/;token=****"
    assert written.redactor.redact("failed with literal-token") == "failed with ****"


@pytest.mark.parametrize(("spark", "said"), [
    ({"remote": "http://spark:15002"}, "is not a Spark Connect URL"),
    ({"remote": "sc://spark:15002", "master": "local[2]"}, "set together with spark.master"),
    ({"remote": "sc://spark:15002", "jars": ["x.jar"]}, "set together with spark.jars"),
])
def test_spark_remote_alone_and_well_formed(spark: dict[str, object], said: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config({"clusters": {"a": {"bootstrap.servers": "x"}}, "spark": spark})
    assert info.value.key == "spark.remote" and said in info.value.message
    assert info.value.exit_status == ExitStatus.USAGE


# A replication section with every key set, as the checks below start from.
FULL_REPLICATION = {
    "kind": "mirrormaker2", "source": "a", "target": "b",
    "topics": {"include": [".*"], "exclude": ["tmp"]}, "rename": "{topic}",
    "source_alias": "a", "target_alias": "b", "replicator_group": "g",
    "principal": "User:mm2",
    "connect": {"url": "http://c:8083", "username": "u", "password": "p",
                "ca_file": "/etc/ca.pem", "timeout_s": 5, "source_connector": "s",
                "checkpoint_connector": "c", "heartbeat_connector": "h"}}
CLUSTERS = {"a": {"bootstrap.servers": "x"}, "b": {"bootstrap.servers": "y"}}


def _every_key(section: dict[str, object], parents: tuple[str, ...] = ()
               ) -> list[tuple[str, ...]]:
    keys: list[tuple[str, ...]] = []
    for name, value in section.items():
        keys.append((*parents, name))
        if isinstance(value, dict):
            keys += _every_key(value, (*parents, name))
    return keys


@pytest.mark.parametrize("key", ["kind", "source", "target"])
def test_a_missing_required_replication_key_is_exit_2_naming_it(
        key: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`config check` on a config without `replication.source` ended 'unexpected KeyError'
    (exit 1): each missing key is a config error naming it."""
    replication = {k: v for k, v in FULL_REPLICATION.items() if k != key}
    path = tmp_path / "drctl.yaml"
    path.write_text(yaml.safe_dump({"clusters": CLUSTERS, "replication": replication}))
    assert main(["--config", str(path), "config", "check"]) == ExitStatus.USAGE
    err = capsys.readouterr().err
    assert f"replication.{key}: required key is missing" in err, err
    assert "unexpected" not in err and "Traceback" not in err


_MISSING = "<missing>"


@pytest.mark.parametrize("key", [".".join(k) for k in _every_key(FULL_REPLICATION)])
@pytest.mark.parametrize("value", [_MISSING, None, [["x"]], {"x": 1}, True, 1.5])
def test_a_mistyped_or_missing_replication_key_is_a_config_error_naming_it(
        key: str, value: object) -> None:
    """Every key of the replication section, missing or of the wrong type: a ConfigError
    (exit 2) naming that key, or a config that reads it as valid — never another error."""
    raw = yaml.safe_load(yaml.safe_dump({"clusters": CLUSTERS,
                                         "replication": FULL_REPLICATION}))
    *parents, last = key.split(".")
    section = raw["replication"]
    for name in parents:
        section = section[name]
    if value == _MISSING:
        del section[last]
    else:
        section[last] = value
    try:
        parse_config(raw)
    except ConfigError as exc:
        assert exc.exit_status == ExitStatus.USAGE
        assert f"replication.{key}" in str(exc), str(exc)
