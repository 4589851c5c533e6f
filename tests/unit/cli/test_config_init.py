"""`drctl config init` (drctl/cli/config_cmd.py) against a local HTTP server that answers as
Kafka Connect does: flags for CI, questions on a terminal only, no overwrite without
--force, and no secret written."""

from __future__ import annotations

import base64
import io
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from drctl.cli.app import main
from drctl.errors import ExitStatus
from drctl.kafka.mm2_connectors import MirrorFlow

A, B = "kafka-a:9092", "kafka-b:9092"


@dataclass
class Worker:
    url: str = ""
    connectors: dict[str, dict[str, str]] = field(default_factory=dict)
    expand: bool = True  # Kafka Connect 2.3+ answers ?expand=info
    basic_auth: str | None = None  # "user:password" the worker requires
    calls: list[str] = field(default_factory=list)


@pytest.fixture
def worker() -> Iterator[Worker]:
    state = Worker(connectors={n: {**c, "name": n} for n, c in MirrorFlow(
        "primary", "secondary", A, B, names_kept=False).connectors().items()})

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            state.calls.append(self.path)
            if state.basic_auth and self.headers.get("Authorization") != \
                    "Basic " + base64.b64encode(state.basic_auth.encode()).decode():
                return self.reply(401, {"message": "Unauthorized"})
            if self.path == "/connectors?expand=info" and state.expand:
                return self.reply(200, {n: {"info": {"name": n, "config": c, "tasks": [],
                                                     "type": "source"}}
                                        for n, c in state.connectors.items()})
            if self.path.startswith("/connectors?") or self.path == "/connectors":
                return self.reply(200, sorted(state.connectors))
            if self.path == "/":  # the worker's version, as Kafka Connect answers it
                return self.reply(200, {"version": "3.9.1", "commit": "f745dfdcee2b9851",
                                        "kafka_cluster_id": "test"})
            name = self.path.removeprefix("/connectors/").removesuffix("/config")
            if name in state.connectors:
                return self.reply(200, state.connectors[name])
            return self.reply(404, {"error_code": 404, "message": f"Connector {name} not found"})

        def reply(self, code: int, body: object) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield state
    server.shutdown()
    server.server_close()


class Terminal(io.StringIO):
    """Answers typed at a terminal."""

    def isatty(self) -> bool:
        return True


@pytest.fixture
def no_tty(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    monkeypatch.delenv("CI", raising=False)


def typed(monkeypatch: pytest.MonkeyPatch, *answers: str) -> None:
    monkeypatch.setattr("sys.stdin", Terminal("".join(f"{a}\n" for a in answers)))
    monkeypatch.delenv("CI", raising=False)


def flags(worker: Worker, out: Path) -> list[str]:
    return ["config", "init", "--primary-bootstrap", A, "--secondary-bootstrap", B,
            "--connect-url", worker.url, "--out", str(out), "--no-check"]


def test_written_from_flags_alone(worker: Worker, tmp_path: Path, no_tty: None,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "conf" / "drctl.yaml"
    assert main(flags(worker, out)) == 0
    raw = yaml.safe_load(out.read_text())
    assert raw["clusters"] == {"primary": {"bootstrap.servers": A},
                               "secondary": {"bootstrap.servers": B}}
    assert raw["replication"]["rename"] == "primary.{topic}"
    assert raw["replication"]["connect"]["url"] == worker.url
    # One call for every config (repeated only if the worker was too slow to answer).
    assert set(worker.calls) == {"/connectors?expand=info"}
    captured = capsys.readouterr()
    assert captured.out == ""  # nothing checked: no data
    err = " ".join(captured.err.split())
    assert "Wrote " in err and ": mirrormaker2 primary -> secondary" in err


def test_json_names_what_was_written(worker: Worker, tmp_path: Path, no_tty: None,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "drctl.yaml"
    assert main(["-o", "json", *flags(worker, out)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["path"] == str(out) and doc["check"] is None
    assert doc["flow"]["connectors"]["checkpoint"] == "mm2-primary-secondary-checkpoint"


def test_a_worker_before_kafka_2_3_is_asked_connector_by_connector(
        worker: Worker, tmp_path: Path, no_tty: None) -> None:
    worker.expand = False
    assert main(flags(worker, tmp_path / "drctl.yaml")) == 0
    assert worker.calls[0] == "/connectors?expand=info"
    assert sorted(worker.calls[1:]) == [f"/connectors/{n}/config"
                                        for n in sorted(worker.connectors)]


def test_connect_credentials_are_used_and_never_written(
        worker: Worker, tmp_path: Path, no_tty: None,
        capsys: pytest.CaptureFixture[str]) -> None:
    worker.basic_auth = "drctl:hunter2-connect"
    out = tmp_path / "drctl.yaml"
    argv = flags(worker, out)
    argv[argv.index(worker.url)] = worker.url.replace("http://", "http://drctl:hunter2-connect@")
    assert main(argv) == 0
    text = out.read_text()
    assert "hunter2" not in text and "hunter2" not in capsys.readouterr().err
    connect = yaml.safe_load(text)["replication"]["connect"]
    assert (connect["url"], connect["username"], connect["password"]) == (
        worker.url, "drctl", "${env:DRCTL_CONNECT_PASSWORD}")


@pytest.mark.parametrize("missing", ["--primary-bootstrap", "--secondary-bootstrap",
                                     "--connect-url"])
def test_never_asks_without_a_terminal_names_the_missing_flag(
        missing: str, worker: Worker, tmp_path: Path, no_tty: None,
        capsys: pytest.CaptureFixture[str]) -> None:
    argv = flags(worker, tmp_path / "drctl.yaml")
    at = argv.index(missing)
    del argv[at:at + 2]
    assert main(argv) == ExitStatus.USAGE
    err = capsys.readouterr().err
    assert f"{missing} is missing" in err and f"Pass {missing}" in err
    assert not (tmp_path / "drctl.yaml").exists() and worker.calls == []


def test_ci_set_means_no_question_even_on_a_terminal(
        worker: Worker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    typed(monkeypatch, A)
    monkeypatch.setenv("CI", "true")
    argv = flags(worker, tmp_path / "drctl.yaml")
    del argv[argv.index("--primary-bootstrap"):argv.index("--primary-bootstrap") + 2]
    assert main(argv) == ExitStatus.USAGE


def test_asks_for_what_is_missing_on_a_terminal(
        worker: Worker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    typed(monkeypatch, A, B, worker.url)
    out = tmp_path / "drctl.yaml"
    assert main(["config", "init", "--out", str(out), "--no-check"]) == 0
    err = capsys.readouterr().err
    assert "Bootstrap servers of the primary cluster" in err
    assert "Kafka Connect REST URL" in err
    assert yaml.safe_load(out.read_text())["clusters"]["secondary"] == {"bootstrap.servers": B}


def test_several_flows_ci_names_them_a_terminal_picks_one(
        worker: Worker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    worker.connectors.update({n: {**c, "name": n} for n, c in MirrorFlow(
        "primary", "dr", A, "kafka-dr:9092").connectors().items()})
    out = tmp_path / "drctl.yaml"
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    assert main(flags(worker, out)) == ExitStatus.USAGE
    err = " ".join(capsys.readouterr().err.split())
    assert "Several flows copy from primary to secondary" in err
    assert "mm2-primary-dr-source" in err and "--source-connector" in err
    assert not out.exists()
    # --source-connector, or a number on a terminal (after one that is out of range).
    assert main([*flags(worker, out), "--source-connector", "mm2-primary-dr-source"]) == 0
    assert yaml.safe_load(out.read_text())["replication"]["target_alias"] == "dr"
    typed(monkeypatch, "7", "2")
    assert main([*flags(worker, out), "--force"]) == 0
    assert "A number from 1 to 2" in capsys.readouterr().err
    assert yaml.safe_load(out.read_text())["replication"]["target_alias"] == "secondary"


def test_an_existing_file_is_kept_without_force(
        worker: Worker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "drctl.yaml"
    out.write_text("mine\n")
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    assert main(flags(worker, out)) == ExitStatus.USAGE
    assert "--force" in capsys.readouterr().err and out.read_text() == "mine\n"
    typed(monkeypatch, "n")  # on a terminal it asks; no is no
    assert main(flags(worker, out)) == ExitStatus.ABORTED
    assert out.read_text() == "mine\n"
    assert main([*flags(worker, out), "--force"]) == 0
    assert "mm2-primary-secondary-source" in out.read_text()


def test_a_custom_policy_is_asked_on_a_terminal_or_needs_rename(
        worker: Worker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    for cfg in worker.connectors.values():
        cfg["replication.policy.class"] = "com.example.OurPolicy"
    out = tmp_path / "drctl.yaml"
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    assert main(flags(worker, out)) == ExitStatus.USAGE
    assert "--rename" in capsys.readouterr().err and not out.exists()
    typed(monkeypatch, "dc1-{topic}")
    assert main(flags(worker, out)) == 0
    assert yaml.safe_load(out.read_text())["replication"]["rename"] == "dc1-{topic}"


def test_unreachable_connect_is_exit_4_and_nothing_is_written(
        tmp_path: Path, no_tty: None, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "drctl.yaml"
    argv = flags(Worker(url="http://127.0.0.1:9"), out)
    assert main([*argv, "--deadline", "1"]) == ExitStatus.UNREACHABLE
    assert "Kafka Connect at http://127.0.0.1:9" in capsys.readouterr().err
    assert not out.exists()


def test_what_was_written_is_checked_as_config_check_does(
        worker: Worker, tmp_path: Path, no_tty: None,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Clusters that do not answer: written, then checked, exit 4 naming them."""
    for cfg in worker.connectors.values():
        cfg["source.cluster.bootstrap.servers"] = "127.0.0.1:9"
    out = tmp_path / "drctl.yaml"
    argv = [a for a in flags(worker, out) if a != "--no-check"]
    argv[argv.index(A)], argv[argv.index(B)] = "127.0.0.1:9", "localhost:9"
    assert main([*argv, "--deadline", "1"]) == ExitStatus.UNREACHABLE
    err = capsys.readouterr().err
    assert out.exists() and "cluster 'primary' at 127.0.0.1:9 did not answer" in err


def test_an_offset_preserving_mirror_needs_no_connect(tmp_path: Path, no_tty: None) -> None:
    out = tmp_path / "drctl.yaml"
    assert main(["config", "init", "--kind", "identity", "--primary-bootstrap", A,
                 "--secondary-bootstrap", B, "--out", str(out), "--no-check"]) == 0
    rep = yaml.safe_load(out.read_text())["replication"]
    assert (rep["kind"], rep["rename"], "connect" in rep) == ("identity", "{topic}", False)
    assert main(["config", "init", "--kind", "mirrormaker", "--out", str(tmp_path / "x"),
                 "--no-check"]) == ExitStatus.USAGE


def test_one_mirrormaker2_flow_each_way_is_an_active_active_pair(
        worker: Worker, tmp_path: Path, no_tty: None,
        capsys: pytest.CaptureFixture[str]) -> None:
    from drctl.config import load_config
    from drctl.ops.active_active.pair import Pair

    back = {n: {**c, "name": n} for n, c in MirrorFlow(
        "secondary", "primary", B, A, names_kept=False).connectors().items()}
    worker.connectors.update(back)
    out = tmp_path / "drctl.yaml"
    assert main(flags(worker, out)) == 0
    config = load_config(out)
    assert config.replication is None and config.topology is not None
    pair = Pair(config)
    assert [(f.source, f.target, f.rename, f.connect.source_connector)
            for f in config.topology.flows] == [
        ("primary", "secondary", "primary.{topic}", "mm2-primary-secondary-source"),
        ("secondary", "primary", "secondary.{topic}", "mm2-secondary-primary-source")]
    assert pair.naming_problem() is None
    assert "active-active, mirrormaker2 primary -> secondary" in \
        " ".join(capsys.readouterr().err.split())
    # drctl's own reverse flow of an incident is no second flow of a pair: one flow.
    for cfg in worker.connectors.values():
        if cfg["name"] in back:
            cfg["drctl.incident"] = "fo-1"
    assert main([*flags(worker, out), "--force"]) == 0
    assert load_config(out).replication is not None
