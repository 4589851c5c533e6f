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
    (["--kind", "heartbeats", "--groups", "g"], "--groups does not apply"),
    (["--since", "soon"], "neither an ISO time"),
    (["--groups", "("], "not a valid regex"),
    (["--group", "a", "--groups", "b"], "--group is the old name of --groups"),
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


def test_the_old_option_names_still_work_and_say_the_new_ones(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--group/--topic became --groups/--topics (regexes, as everywhere): the old spellings
    are hidden aliases for one release, with a warning."""
    config = tmp_path / "drctl.yaml"
    config.write_text(json.dumps(CONFIG))
    CURRENT.reset()
    CURRENT.config_option = str(config)
    result = CliRunner().invoke(_app(), ["dump-consumer-timestamps", "--kind", "heartbeats",
                                         "--group", "g"])
    # The old name reaches the same check as the new one.
    assert isinstance(result.exception, UsageError)
    assert "--groups does not apply" in result.exception.message
    assert "--group is now --groups" in capsys.readouterr().err + (result.stderr or "")
    help_text = CliRunner().invoke(_app(), ["dump-consumer-timestamps", "--help"]).stdout
    assert "--groups" in help_text and "--group " not in help_text
