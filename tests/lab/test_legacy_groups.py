"""Consumer groups as old estates have them, on the real lab: the group "" that consumers of
Kafka's first clients committed under (brokers still keep and list it; librdkafka refuses to
name it) is named and skipped, never the end of a command; and the group requests' child
processes a command starts end with it, in the CLI and in a runbook action alike."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from drctl.config import load_config
from drctl.kafka.groups import UNNAMEABLE, group_listing
from drctl.runbook.actions import ActionContext, builtin_registry
from tests.conftest import RunningLab
from tests.lab.support import (
    checkpointed_topic,
    commit_as_legacy_consumer,
    delete_as_legacy_admin,
    fresh_clients,
    run_json,
)
from tests.lab.test_check import own_config

pytestmark = pytest.mark.lab


def coordinator_children() -> set[int]:
    """This process's group-request children (kafka/coordinator.py) that are running."""
    found = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            command = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        state, parent = stat.rsplit(")", 1)[1].split()[:2]
        if int(parent) == os.getpid() and state not in ("Z", "X") \
                and b"drctl.kafka.coordinator" in command:
            found.add(int(entry))
    return found


def test_the_group_with_no_name_is_named_and_skipped_and_no_child_outlives_its_command(
        lab: RunningLab, ns: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """ListGroups answers the group ""; a read of it made the child's lane stop for good,
    and every translate and check ended exit 4 after the deadline on a healthy cluster."""
    topic, group = checkpointed_topic(lab, ns, "legacy")
    # This test's groups, and the group "" as an estate that filters no group has it in
    # scope (a config without a groups filter, no --groups): a regex "" matches too.
    config, groups = own_config(lab, ns, tmp_path), f"({ns}-.*)?"
    raw = yaml.safe_load(config.read_text())
    raw["groups"] = {"include": [groups]}
    config.write_text(yaml.safe_dump(raw))
    commit_as_legacy_consumer(lab.primary.bootstrap, "", topic, {0: 4, 1: 4})
    try:
        before = coordinator_children()
        said = f'primary: {UNNAMEABLE[""]}; skipped'

        status, report = run_json("--config", str(config), "translate-offsets", "--groups",
                                  groups, "--yes")
        assert status == 0, capsys.readouterr().err
        assert [(g["group"], g["applied"]) for g in report["groups"]] == [(group, True)]
        assert said in report["notes"]

        status, out = run_json("--config", str(config), "check", "--topics", topic,
                               "--groups", groups)
        assert status == 0, out["findings"]
        [note] = [f for f in out["findings"] if f["object"] == 'group ""']
        assert note["severity"] == "note" and UNNAMEABLE[""] in note["difference"]

        # The same in a runbook step's action, in this process.
        check = builtin_registry().get("check")
        assert check is not None
        result = check.call(ActionContext(lambda: load_config(config)),
                            {"topics": topic, "groups": groups})
        assert result["verdict"] == "ready"
        # Each command's children ended with it.
        assert coordinator_children() <= before
        # The broker lists it: drctl leaves it out, and says why.
        with fresh_clients(lab, "primary") as clients:
            listing = group_listing(clients)
        assert listing.skipped == {"": UNNAMEABLE[""]} and group in listing.groups
    finally:
        for cluster in (lab.primary, lab.secondary):  # MirrorMaker 2 may have synced it
            delete_as_legacy_admin(cluster.bootstrap, "")
