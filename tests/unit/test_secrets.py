"""Secrets never show: secret properties are masked, and so are credentials in URLs —
`config show`, reports, journals, logs and errors mask the user-info password of every
URL (issue 28)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from drctl.cli.app import main
from drctl.secrets import Redactor, mask_mapping, mask_url_userinfo


def test_masking_and_redaction() -> None:
    props = {"bootstrap.servers": "b:9092", "sasl.password": "pw-123456",
             "ssl.key.pem": "-----BEGIN", "nested": {"api.key": "k-99999"}}
    masked = mask_mapping(props)
    assert masked["bootstrap.servers"] == "b:9092"
    assert masked["sasl.password"] == masked["ssl.key.pem"] == masked["nested"]["api.key"]
    assert masked["sasl.password"] == "****"
    assert Redactor(["pw-123456"]).redact("login with pw-123456 failed") == \
        "login with **** failed"


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


def test_plain_data_is_to_jsonable_then_redact_data_in_one_walk() -> None:
    """Every output of data goes through Redactor.plain_data (issue 43: one walk of a large
    result, not two); it must mask exactly as the two did."""
    from datetime import datetime
    from enum import IntEnum, StrEnum
    from pathlib import Path

    from drctl.jsonable import to_jsonable
    from drctl.secrets import Redactor

    class Name(StrEnum):
        LEAKED = "hunter22"

    class Code(IntEnum):
        THREE = 3

    redactor = Redactor(["hunter22", "s3cr3t!"])
    data = {"password": "abc", "token": "${env:X}", "sasl.password": Path("/x/hunter22"),
            "k": [1, 2.5, None, True, b"\x01", {"secret": Name.LEAKED}],
            "url": "http://u:pw@h/", "when": datetime(2020, 1, 1), "e": Code.THREE,
            "s": {1, 2}, 3: "s3cr3t!x", "nested": ({"api_key": 5},)}
    assert redactor.plain_data(data) == redactor.redact_data(to_jsonable(data))
    assert redactor.plain_data(data)["password"] == "****"
    assert "hunter22" not in str(redactor.plain_data(data))
