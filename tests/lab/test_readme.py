"""The README's five-minute operator path, run verbatim against the lab: a newcomer who
copies its commands gets exit 0 and no traceback."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import RunningLab
from tests.lab.support import checkpointed_topic
from tests.lab.test_failover import scoped_config

pytestmark = pytest.mark.lab
README = Path(__file__).resolve().parents[2] / "README.md"


def operator_path() -> tuple[str, list[str]]:
    """The path's config (YAML) and its commands, as the README shows them."""
    text = README.read_text()
    section = text[text.index("## A five-minute operator path"):
                   text.index("**The real incident cycle**")]
    [config] = re.findall(r"```yaml\n(.*?)```", section, re.S)
    commands = [line.split("#")[0].strip()
                for block in re.findall(r"```sh\n(.*?)```", section, re.S)
                for line in block.splitlines() if line.strip()]
    return config, commands


def test_the_readmes_operator_path_runs_verbatim_against_the_lab(lab: RunningLab, ns: str,
                                                                 tmp_path: Path) -> None:
    config_text, commands = operator_path()
    assert commands == ["drctl config check", "drctl status", "drctl check",
                        "drctl failover --dry-run"]
    drctl = str(Path(sys.executable).with_name("drctl"))
    env = {**os.environ, "PYTHONPATH": str(README.parent)}
    # Step 1: the README's config is a valid one (for clusters this machine does not have).
    example = tmp_path / "example" / "drctl.yaml"
    example.parent.mkdir()
    example.write_text(config_text)
    shown = subprocess.run([drctl, "config", "show"], cwd=example.parent, env=env,
                           capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0, shown.stderr
    assert yaml.safe_load(shown.stdout)["replication"]["kind"] == "mirrormaker2"
    # Steps 2-5 against the lab, with the lab's config as ./drctl.yaml (scoped to this test's
    # topics and groups, so other tests' leftovers are not what it reads).
    checkpointed_topic(lab, ns, "orders")
    config = scoped_config(lab, ns, tmp_path / "lab")
    raw = yaml.safe_load(config.read_text())
    raw["groups"] = {"include": [f"{ns}-.*"]}
    raw["state"]["snapshots_topic"] = f"_drctl_snapshots_{ns}"  # no other test's guard
    (tmp_path / "lab" / "drctl.yaml").write_text(yaml.safe_dump(raw))
    for command in commands:
        done = subprocess.run([drctl, *shlex.split(command)[1:]], cwd=tmp_path / "lab",
                              env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, (command, done.stdout[-2000:], done.stderr[-3000:])
        assert "Traceback" not in done.stderr, (command, done.stderr)
