"""Shared fixtures. Lab-backed tests run against real Kafka brokers and a real MirrorMaker 2;
when the lab cannot start they fail (never skip)."""

from __future__ import annotations

import itertools
import os
import re
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from drctl.kafka.clients import ClusterClients
from drctl.lab.lab import Lab, LabPorts, LabState

# Helpers running test sessions side by side give each a different base.
# Below the ephemeral range (32768+), where a client socket could take a port first.
PORT_BASE = int(os.environ.get("DRCTL_TEST_PORT_BASE", "23100"))


class RunningLab:
    """A started lab plus the clients tests need."""

    def __init__(self, lab: Lab, state: LabState) -> None:
        self.lab = lab
        self.state = state
        self.primary: ClusterClients = lab.clients(state, "primary")
        self.secondary: ClusterClients = lab.clients(state, "secondary")

    @property
    def config_file(self) -> Path:
        return self.lab.config_file

    @property
    def names_kept(self) -> bool:
        return self.state.names_kept

    def mirror(self, topic: str) -> str:
        return topic if self.names_kept else f"primary.{topic}"

    def wait_mirror_topic(self, topic: str, deadline_s: float = 60) -> None:
        """Until MirrorMaker 2 has created `topic`'s mirror on the secondary."""
        end = time.monotonic() + deadline_s
        while self.mirror(topic) not in self.secondary.admin().list_topics(timeout=10).topics:
            if time.monotonic() > end:
                raise AssertionError(f"{self.mirror(topic)} was not created in time")
            time.sleep(0.5)


class _Labs:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.started: dict[str, RunningLab] = {}
        self.keep = bool(os.environ.get("DRCTL_KEEP_TEST_LABS"))

    def get(self, name: str, *, spark_workers: int = 0) -> RunningLab:
        if name not in self.started:
            index = len(self.started)
            base = PORT_BASE + 10 * index
            lab = Lab(self.root / f"lab-{name}")
            try:
                # Spark: master base+5, web UIs base+6 (master), base+7.. (workers).
                state = lab.up(ports=LabPorts(base, base + 2, base + 4, base + 5),
                               names_kept=name != "prefixed", spark_workers=spark_workers)
            except BaseException:
                lab.down()
                self.keep = True  # its logs explain the failure
                raise
            self.started[name] = RunningLab(lab, state)
        return self.started[name]

    def down(self) -> None:
        for running in self.started.values():
            running.lab.down()


@pytest.fixture(scope="session")
def _labs() -> Iterator[_Labs]:
    # Not under pytest's basetemp: pytest prunes old basetemps, and a second pytest run on
    # the machine could delete a running lab's files.
    root = Path(tempfile.mkdtemp(prefix="drctl-test-labs-"))
    labs = _Labs(root)
    try:
        yield labs
    finally:
        labs.down()
        if labs.keep:
            print(f"\nlab files kept in {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def lab(_labs: _Labs) -> RunningLab:
    """The session's lab with topic names kept (IdentityReplicationPolicy)."""
    return _labs.get("kept")


@pytest.fixture(scope="session")
def lab_prefixed(_labs: _Labs) -> RunningLab:
    """A second lab with MM2's default naming, primary.<topic>; started only when asked for."""
    return _labs.get("prefixed")


@pytest.fixture(scope="session")
def lab_spark(_labs: _Labs) -> RunningLab:
    """A lab (topic names kept) with a Spark standalone master and two workers; its config's
    spark.master points at them. Started only when asked for."""
    return _labs.get("spark", spark_workers=2)


@pytest.fixture(params=["kept", "prefixed"])
def any_lab(request: pytest.FixtureRequest, _labs: _Labs) -> RunningLab:
    return _labs.get(request.param)


_counter = itertools.count()


@pytest.fixture
def ns(request: pytest.FixtureRequest) -> str:
    """A per-test prefix for topics and groups, so tests share a lab without meeting."""
    name = re.sub(r"[^a-zA-Z0-9]+", "-", request.node.name)[:40].strip("-").lower()
    return f"t{next(_counter)}-{name}"
