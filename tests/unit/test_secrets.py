"""Credentials in URLs never show: `config show`, reports, journals, logs and errors mask the
user-info password of every URL (issue 28), and Connect's client takes it as basic auth."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from drctl.cli.app import main
from drctl.kafka.connect_rest import ConnectClient
from drctl.secrets import Redactor, mask_mapping, mask_url_userinfo

CONFIG = """
clusters:
  primary: {bootstrap.servers: "127.0.0.1:9"}
  secondary: {bootstrap.servers: "127.0.0.1:9"}
replication:
  kind: mirrormaker2
  source: primary
  target: secondary
  connect: {url: "http://operator:hunter2-in-url@connect.example:8083/"}
"""


def test_the_password_of_a_url_is_masked_the_user_kept() -> None:
    text = "GET http://operator:hunter2@connect:8083/connectors failed; https://a@b/ is fine"
    assert mask_url_userinfo(text) == ("GET http://operator:****@connect:8083/connectors "
                                       "failed; https://a@b/ is fine")
    assert Redactor().redact(text).count("hunter2") == 0
    assert mask_mapping({"connect": {"url": "http://u:pw-x@h/"}}) == {
        "connect": {"url": "http://u:****@h/"}}


def test_config_show_never_prints_a_password_inside_a_url(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "drctl.yaml"
    path.write_text(CONFIG)
    for argv in (["--config", str(path), "config", "show"],
                 ["--config", str(path), "-o", "json", "config", "show"]):
        assert main(argv) == 0
        out, err = capsys.readouterr()
        assert "hunter2-in-url" not in out + err
        assert "http://operator:****@connect.example:8083/" in out
    assert json.loads(out)["replication"]["connect"]["url"].startswith("http://operator:****@")


def test_connect_takes_url_credentials_as_basic_auth_and_names_the_bare_url() -> None:
    client = ConnectClient("https://operator:p%40ss@connect.example:8083/")
    assert client.url == "https://connect.example:8083"
    assert client._auth == "Basic b3BlcmF0b3I6cEBzcw=="  # operator:p@ss
