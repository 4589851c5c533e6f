"""`drctl dump-consumer-timestamps` (drctl/cli/dump_cmd.py): usage errors, raised before
any cluster is contacted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from drctl.cli import dump_cmd
from drctl.cli.state import CURRENT
from drctl.errors import UsageError
from tests.unit.dump.support import CONFIG


def _app() -> typer.Typer:
    app = typer.Typer()
    app.command("dump-consumer-timestamps")(dump_cmd.dump_consumer_timestamps)

    @app.callback()
    def root() -> None:
        """A root, so the command is a subcommand as in drctl."""
    return app


@pytest.mark.parametrize(("args", "message"), [
    (["--kind", "heartbeats", "--group", "g"], "--group does not apply"),
    (["--since", "soon"], "neither an ISO time"),
    (["--group", "("], "not a valid regex"),
])
def test_cli_usage_errors_before_any_connection(tmp_path: Path, args: list[str],
                                                message: str) -> None:
    config = tmp_path / "drctl.yaml"
    config.write_text(json.dumps(CONFIG))
    CURRENT.reset()
    CURRENT.config_option = str(config)
    result = CliRunner().invoke(_app(), ["dump-consumer-timestamps", *args])
    assert isinstance(result.exception, UsageError)
    assert message in result.exception.message
