"""Issue 43: a sick cluster is the normal case. The target's broker is SIGKILLed and started
again while `translate-offsets --yes` places 2,000 groups, and while `check` reads them, ten
times each (both at once: ten restarts): drctl never dies (librdkafka#5040 killed it on a
coordinator's answers while it loaded); every run is exact or ends with exit 4 naming the
cluster; a run once the broker is back is exact. The data is set up once for all rounds.
Per commit three rounds, each a kill at another moment; the full matrix (`make test-matrix`)
runs all ten."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from drctl.kafka.groups import alter_offsets_many, committed_offsets
from drctl.lab.workload import create_topics
from tests.conftest import RunningLab
from tests.lab.support import keyed, produce, run_json, wait_replicated
from tests.lab.test_broker_restart import restore_worker
from tests.lab.test_failback import restore_lab

pytestmark = [pytest.mark.lab]
__all__ = ["restore_lab", "restore_worker"]  # the fixtures, used by name

GROUPS = 2000
PARTITIONS = 2
RECORDS = 400
ROUNDS, ROUNDS_PER_COMMIT = 10, 3


def _drctl(config: Path, *argv: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "drctl", "--config", str(config), "-o",
                             "json", *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True, env=os.environ.copy())


def _restart_meanwhile(lab: RunningLab, procs: list[subprocess.Popen[str]], after_s: float
                       ) -> list[tuple[int, dict[str, Any], str]]:
    """`procs` run while the secondary's broker is SIGKILLed after `after_s` and started
    again; each one's exit status, JSON document and stderr."""
    def restart() -> None:
        time.sleep(after_s)
        lab.lab.fail("secondary")
        time.sleep(1)
        lab.lab.heal("secondary")  # returns once the broker answers

    started = time.monotonic()
    restarter = threading.Thread(target=restart)
    restarter.start()
    outcomes = []
    try:
        for proc in procs:
            out, err = proc.communicate(timeout=600)
            outcomes.append((proc.returncode, json.loads(out) if out.strip() else {}, err))
            print(f"killed at {after_s:.1f} s; {proc.args[proc.args.index('json') + 1]} "
                  f"exit {proc.returncode} at {time.monotonic() - started:.1f} s")
    finally:
        for proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(30)
        restarter.join(300)
    assert not restarter.is_alive(), "the secondary did not come back"
    return outcomes


def _unreachable_names_the_secondary(status: int, doc: dict[str, Any], err: str,
                                     lab: RunningLab) -> None:
    assert status == 4, (status, err[-3000:])
    if "error" not in doc:
        # check reports a cluster that did not answer its first describe as a blind spot,
        # its verdict "unknown" (exit 4), not as an error: the finding names the cluster.
        assert doc["verdict"] == "unknown", doc
        blind = [f for f in doc["findings"] if f["severity"] == "blind"]
        assert any(f["object"] == "cluster secondary" for f in blind), blind
        return
    message = doc["error"]["message"]
    assert doc["error"]["kind"] == "Unreachable", doc
    assert "secondary" in message or lab.secondary.bootstrap in message, message


@pytest.fixture
def placed(lab: RunningLab, ns: str, restore_worker: None) -> Iterator[dict[str, Any]]:
    """2,000 groups committed on the primary on a topic both clusters hold alike; their
    exact positions on the secondary, from a run with every broker up."""
    topic = f"{ns}-sick"
    create_topics(lab.primary, (topic,), PARTITIONS)
    produce(lab.primary, topic, keyed("s", RECORDS, PARTITIONS))
    wait_replicated(lab, topic, RECORDS)
    rng = random.Random(43)
    groups = {f"{ns}-g{i:04d}": {(topic, p): rng.randrange(1, RECORDS // PARTITIONS)
                                 for p in range(PARTITIONS)} for i in range(GROUPS)}
    assert alter_offsets_many(lab.primary, groups) == {}
    status, doc = run_json("--config", str(lab.config_file), "translate-offsets", "--groups",
                           f"{ns}-g.*", "--method", "exact", "--yes")
    assert status == 0, doc
    exact = _positions(doc)
    assert len(exact) == GROUPS * PARTITIONS
    yield {"topic": topic, "groups": groups, "exact": exact}


def _positions(doc: dict[str, Any]) -> dict[tuple[str, str, int], int]:
    """Every applied, exact position of a translate-offsets document."""
    out = {}
    for group in doc["groups"]:
        assert group["applied"], group
        for p in group["partitions"]:
            assert p["confidence"] == "exact", p
            out[(group["group"], p["target_topic"], p["partition"])] = p["target_offset"]
    return out


def test_translate_and_check_survive_the_targets_broker_restarting(
        lab: RunningLab, ns: str, placed: dict[str, Any], full_matrix: bool) -> None:
    """Each round runs both commands at once and restarts the broker once under them."""
    check = ("check", "--groups", f"{ns}-g.*", "--topics", placed["topic"], "--deadline",
             "30s")
    status, whole = run_json("--config", str(lab.config_file), *check)
    assert status in (0, 3), whole
    rng = random.Random(4343)
    exits: dict[str, list[int]] = {"translate-offsets": [], "check": []}
    for _ in range(ROUNDS if full_matrix else ROUNDS_PER_COMMIT):
        translate = _drctl(lab.config_file, "translate-offsets", "--groups", f"{ns}-g.*",
                           "--method", "exact", "--yes", "--deadline", "30s")
        checking = _drctl(lab.config_file, *check)
        # Between the start (a process, the groups read on the source) and the commits.
        (t_status, t_doc, t_err), (c_status, c_doc, c_err) = _restart_meanwhile(
            lab, [translate, checking], rng.uniform(0.5, 5.0))
        assert t_status >= 0, f"translate-offsets died of signal {-t_status}: {t_err[-3000:]}"
        assert c_status >= 0, f"check died of signal {-c_status}: {c_err[-3000:]}"
        exits["translate-offsets"].append(t_status)
        exits["check"].append(c_status)
        if t_status == 0:
            assert _positions(t_doc) == placed["exact"]
        else:
            _unreachable_names_the_secondary(t_status, t_doc, t_err, lab)
        if c_status == 4:
            _unreachable_names_the_secondary(c_status, c_doc, c_err, lab)
        else:  # a whole reading: every position read, as with every broker up
            assert c_status in (0, 3), (c_status, c_err[-3000:])
            assert c_doc["checked"] == whole["checked"], c_doc["checked"]
    print("exits over the rounds:", exits)
    # Once the broker is back: exact, and every group's commit on the secondary is it.
    status, doc = run_json("--config", str(lab.config_file), "translate-offsets", "--groups",
                           f"{ns}-g.*", "--method", "exact", "--yes")
    assert status == 0, doc
    assert _positions(doc) == placed["exact"]
    # Through the session's clients, which lived through the ten restarts.
    on_target = committed_offsets(lab.secondary, placed["groups"])
    assert {(g, t, p): o for g, offs in on_target.items() for (t, p), o in offs.items()} \
        == placed["exact"]
    status, again = run_json("--config", str(lab.config_file), *check)
    assert status in (0, 3) and again["checked"] == whole["checked"], again
