"""The README's first screen, run verbatim against the lab: `config init` from the lab's
bootstrap servers and Connect URL writes a config equal in meaning to the lab's own (both
topic namings), and every next command on that screen exits 0 with no traceback."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from drctl.config import Config, load_config
from tests.conftest import RunningLab
from tests.lab.support import checkpointed_topic

pytestmark = pytest.mark.lab
README = Path(__file__).resolve().parents[2] / "README.md"
# The README's example addresses, and what stands for each in the lab.
PRIMARY, SECONDARY, CONNECT = "broker-a:9092", "broker-b:9092", "http://connect:8083"


def first_screen() -> list[list[str]]:
    """The commands of the README's first screen as a shell reads them: continued lines
    joined, comments dropped."""
    text = README.read_text()
    section = text[text.index("## Getting started"):text.index("## The incident cycle")]
    [block] = re.findall(r"```sh\n(.*?)```", section, re.S)
    lines = block.replace("\\\n", " ").splitlines()
    return [shlex.split(line, comments=True) for line in lines if line.strip()]


def same_meaning(written: Config, lab: Config, running: RunningLab, ns: str) -> None:
    """What the lab's MirrorMaker 2 does, both configs say: the clusters, the flow, its
    naming, its connectors, the groups; topics as MirrorMaker 2 filters them (the lab's own
    config leaves out the exclude list drctl's rules for internal topics cover)."""
    assert written.clusters == lab.clusters
    rep, lab_rep = written.require_replication(), lab.require_replication()
    for field in ("kind", "source", "target", "rename", "source_alias", "target_alias",
                  "replicator_group", "principal"):
        assert getattr(rep, field) == getattr(lab_rep, field), field
    assert rep.connect == lab_rep.connect
    assert written.groups == lab.groups
    flow = running.lab.flow(running.state)
    for topic in (f"{ns}-orders", "orders", "payments.eu", "a-b_c", "__consumer_offsets",
                  "_drctl_state", "connect-offsets", "mm2-offset-syncs.secondary.internal",
                  "primary.checkpoints.internal", "heartbeats"):
        assert rep.topics.matches(topic) == flow.replicates(topic), topic
        if flow.replicates(topic):
            assert lab_rep.topics.matches(topic), topic
    assert rep.mirror_topic(f"{ns}-orders") == running.mirror(f"{ns}-orders")


def test_the_readmes_first_screen_runs_verbatim_against_the_lab(
        any_lab: RunningLab, ns: str, tmp_path: Path) -> None:
    commands = first_screen()
    install, *drctl = commands
    assert "pip install" in " ".join(install)
    assert [c[:3] for c in drctl] == [
        ["drctl", "config", "init"], ["drctl", "config", "check"], ["drctl", "status"],
        ["drctl", "check"], ["drctl", "failover", "--dry-run"]], drctl
    lab = any_lab.lab
    stand_in = {PRIMARY: lab.bootstrap(any_lab.state, "primary"),
                SECONDARY: lab.bootstrap(any_lab.state, "secondary"),
                CONNECT: lab.connect_url(any_lab.state)}
    assert set(stand_in) <= set(drctl[0]), "the README's example addresses changed"
    executable = str(Path(sys.executable).with_name("drctl"))
    env = {k: v for k, v in os.environ.items() if k != "DRCTL_CONFIG"}
    env["PYTHONPATH"] = str(README.parent)

    def run(argv: list[str]) -> None:
        done = subprocess.run([executable, *[stand_in.get(a, a) for a in argv[1:]]],
                              cwd=tmp_path, env=env, stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, (argv, done.stdout[-2000:], done.stderr[-3000:])
        assert "Traceback" not in done.stderr, (argv, done.stderr)

    # A flow with a group for the failover to move: a mirrored topic, a checkpointed group.
    checkpointed_topic(any_lab, ns, "orders")
    run(drctl[0])  # config init, then its own check of what it wrote
    written = tmp_path / "drctl.yaml"
    same_meaning(load_config(written), load_config(any_lab.config_file), any_lab, ns)
    # Scoped to this test's topics, groups and marker store: the lab is shared, and other
    # tests' topics and incidents are not what the next commands are asked about.
    raw = yaml.safe_load(written.read_text())
    raw["replication"]["topics"]["include"] = [f"{ns}-.*"]
    raw["groups"]["include"] = [f"{ns}-.*"]
    raw["state"] = {"dir": "state", "topic": f"_drctl_state_{ns}",
                    "snapshots_topic": f"_drctl_snapshots_{ns}"}
    written.write_text(yaml.safe_dump(raw))
    for argv in drctl[1:]:
        run(argv)
