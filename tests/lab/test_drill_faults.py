"""Issue 53: the shipped drill under faults at moments nobody chose, on a lab of each naming
(its own Spark Connect server, a target too): a campaign of two rounds with fixed seeds —
failover with the primary killed, failback, the return — each round under three faults
(SIGKILL, SIGSTOP for 1-4 s, SIGTERM) of a broker, the Connect worker, the Spark Connect
server or the drctl step itself, landing inside a step (per commit one round a naming, the
two rounds' faults together every target; the full matrix, `make test-matrix`, two rounds
a naming). The ledger's verdict: every
acknowledged record on each cluster once, every group read every one (0 lost, 0 twice); a
step a fault failed was run again by the runbook's resume, counted with its time to recover;
the scorecard says where each fault landed."""

from __future__ import annotations

import json
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from drctl.cli.app import main
from drctl.lab.lab import ACTIVE_ACTIVE, NO_SERVER, OWN_SERVER, Lab, LabPorts
from tests.conftest import PORT_BASE

pytestmark = [pytest.mark.lab, pytest.mark.spark]

# The active-active drill's seed: its first round lands a SIGKILL of the surviving region's
# broker in failover, a SIGTERM of the failover step and a SIGSTOP of the Connect worker; its
# second a SIGKILL of the survivor's broker in failback, a SIGSTOP of the returning region's
# and a SIGTERM of the Connect worker: every target of an active-active lab (no Spark Connect
# server) in the two rounds run per commit (issue 58: two rounds per fixed seed with guard,
# one without); the full matrix runs four. The round without guard: the next seed.
AA_SEED = 18
AA_TARGETS = {"primary", "secondary", "connect", "step"}
AA_ROUNDS, AA_MATRIX_ROUNDS = 2, 4

# Per naming: its ports (base .. base + 5, clear of tests/conftest.py's labs and
# test_legacy_keys.py's + 120), the first of its two rounds' seeds in the full matrix —
# chosen so that each round's three faults take each signal once and the two rounds' six
# faults every target at least once (the plan is the seed's: runbook/faults.py plan_faults)
# — and the one round's seed per commit, with the targets its plan hits: the two namings'
# rounds together hit every target.
LABS = {"kept": (PORT_BASE + 130, 16), "prefixed": (PORT_BASE + 140, 14),
        ACTIVE_ACTIVE: (PORT_BASE + 150, AA_SEED)}
PER_COMMIT = {"kept": (16, {"secondary", "primary", "spark-connect"}),
              "prefixed": (15, {"secondary", "step", "connect"})}
FAULTS, ROUNDS = 3, 2
SIGNALS = {"kill", "stop", "term"}
TARGETS = {"primary", "secondary", "connect", "spark-connect", "step"}
# Smaller than the drill's defaults: the cycle, not the volume, is what is under test.
DRILL_VARS = ["records=500", "gap_records=30", "ledger_records=150"]


def _fault_lab(naming: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    base, _ = LABS[naming]
    lab = Lab(tmp_path_factory.mktemp(f"faults-{naming}") / "lab")
    try:
        if naming == ACTIVE_ACTIVE:
            # No gap job in an active-active cycle: no Spark Connect server to fault. MirrorMaker
            # 2's default separator ('.'): the suite's other active-active lab runs '_'.
            lab.up(ports=LabPorts(base, base + 2, base + 4), names_kept=False,
                   topology=ACTIVE_ACTIVE, spark_connect=NO_SERVER)
        else:
            lab.up(ports=LabPorts(base, base + 2, base + 4, spark_connect=base + 5),
                   names_kept=naming == "kept", spark_connect=OWN_SERVER)
        yield lab
    finally:
        lab.down(discard=True)  # a test's lab, done with: killed, not shut down


# A lab per naming, each with its own Spark Connect server (a fault target); the tests on
# one lab run on one worker (tests/conftest.py `xdist_group`), the two labs side by side.
@pytest.fixture(scope="module")
def kept_fault_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    yield from _fault_lab("kept", tmp_path_factory)


@pytest.fixture(scope="module")
def prefixed_fault_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    yield from _fault_lab("prefixed", tmp_path_factory)


def test_rounds_under_faults_with_names_kept(kept_fault_lab: Lab, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str],
                                             full_matrix: bool) -> None:
    _rounds(kept_fault_lab, tmp_path, capsys, full_matrix)


def test_rounds_under_faults_with_prefixed_names(
        prefixed_fault_lab: Lab, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        full_matrix: bool) -> None:
    _rounds(prefixed_fault_lab, tmp_path, capsys, full_matrix)


def test_the_rounds_per_commit_hit_every_target_together() -> None:
    assert set().union(*(targets for _, targets in PER_COMMIT.values())) == TARGETS


def test_comeback_drill_passes_every_check(kept_fault_lab: Lab, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    """The second-fault drill (runbooks/drill-comeback.yaml) on the kept lab after its
    rounds: the failed datacenter's replicator comes back after an unconfirmed stop."""
    junit = tmp_path / "comeback.xml"
    status = main(["--config", str(kept_fault_lab.config_file), "runbook", "run",
                   "drill-comeback", "--yes", "--junit", str(junit)])
    assert status == 0, capsys.readouterr().err[-4000:]
    names = {c.get("name"): c for c in ET.parse(junit).getroot().iter("testcase")}
    for check in ("stop_is_pending", "stop_confirmed", "every_gap_record_came_late",
                  "nothing_copied_twice", "primary_holds_every_record_once",
                  "incident_closed"):
        assert check in names and names[check].find("failure") is None, check


def _rounds(fault_lab: Lab, tmp_path: Path, capsys: pytest.CaptureFixture[str],
            full_matrix: bool) -> None:
    naming = fault_lab.load_state().topic_naming
    if full_matrix:
        (_, seed), rounds_run, targets = LABS[naming], ROUNDS, TARGETS
    else:
        (seed, targets), rounds_run = PER_COMMIT[naming], 1
    report_dir = tmp_path / "campaign"
    started = time.monotonic()
    status = main(["--config", str(fault_lab.config_file), "runbook", "run", "drill", "--yes",
                   "--faults", str(FAULTS), "--seed", str(seed), "--rounds", str(rounds_run),
                   "--report-dir", str(report_dir),
                   *[a for v in DRILL_VARS for a in ("--var", v)]])
    err = capsys.readouterr().err
    print(f"{naming}: the campaign took {time.monotonic() - started:.0f} s")
    card: dict[str, Any] = json.loads((report_dir / "campaign.json").read_text())["card"]
    assert status == 0, err[-6000:]
    assert card["ok"] and card["rounds"] == rounds_run == card["passed"], card["failed"]
    assert (card["ledger"]["lost"], card["ledger"]["twice"], card["ledger"]["groups_lost"]) \
        == (0, 0, 0), card["ledger"]
    assert (report_dir / "campaign.md").exists() and (report_dir / "campaign.html").exists()

    rounds = {r["round"]: r for r in card["round_list"]}
    faults = card["faults"]["list"]
    for number in range(1, rounds_run + 1):
        mine = [f for f in faults if f["round"] == number]
        landed = [f for f in mine if f["landed"]]
        print(f"round {number}:", [(f["signal"], f["target"], f.get("step"),
                                    f.get("at_s"), f.get("phase")) for f in mine])
        # Every signal landed inside a step, and the scorecard says where in it.
        assert {f["signal"] for f in landed} == SIGNALS, mine
        for f in landed:
            assert f["step"] in ("failover", "failback", "return_to_protection"), f
            assert f["at_s"] > 0 and "progress" in f and "marker_step" in f, f
            assert f["healed"]["how"], f
        ledger = rounds[number]["ledger"]
        assert ledger["acked"] > 0 and ledger["ok"], ledger
        assert all(s["lost"] == 0 == s["twice"] for s in ledger["sides"]), ledger["sides"]
        assert {g["group"] for g in ledger["groups"]} == {"drill-ledger-half",
                                                          "drill-ledger-all"}
        assert all(g["lost"] == 0 for g in ledger["groups"]), ledger["groups"]
        # A step a fault failed was run again and recovered; its time is counted.
        # (A round's recoveries are in the scorecard's re-runs, not in its round_list.)
        recovered = [x for x in card["reruns"]["list"] if x["round"] == number]
        failed_steps = {x["step"] for x in recovered}
        assert rounds[number]["reruns"] == sum(x["reruns"] for x in recovered)
        assert not rounds[number]["unrecovered"], rounds[number]
        if any(f["target"] == "step" and f["signal"] != "stop" for f in landed):
            assert failed_steps, rounds[number]
        # A broker or the Connect worker killed, stopped or terminated inside a step (and
        # started again) is ridden out by that step: only a fault of the step's own process
        # or of the Spark Connect server its gap job runs on fails a step.
        for step in failed_steps:
            assert {f["target"] for f in landed if f["step"] == step} \
                & {"step", "spark-connect"}, (step, mine)
        # RTO by phase of each operation.
        operations = {op["operation"] for op in rounds[number]["operations"].values()}
        assert operations == {"failover", "failback", "reprotect"}, operations
    assert {f["target"] for f in faults if f["landed"]} == targets, faults
    assert {op["operation"] for op in card["rto"]} == {"failover", "failback", "reprotect"}
    assert all(p["n"] == rounds_run for op in card["rto"] for p in op["phases"]
               if p["phase"] in ("preflight",)), card["rto"]
    if naming == "kept":
        _audit_is_in_the_report(report_dir)


def _audit_is_in_the_report(report_dir: Path) -> None:
    """The audit of the failover's positions (from guard's snapshots), one row per group,
    in the report of the run that passed the failback (as the healthy drill's report had)."""
    reports = sorted((report_dir / "rounds").glob("round-01-*.md"))
    text = next(r.read_text() for r in reversed(reports)
                if "Output `audit_groups`:" in r.read_text())
    table = text.split("Output `audit_groups`:\n\n", 1)[1].split("\n\n", 1)[0].splitlines()

    def cells(line: str) -> list[str]:
        return [c.strip() for c in line.strip().strip("|").split("|")]
    header = cells(table[0])
    assert header == ["group", "positions", "audited", "redelivered", "skipped",
                      "stated_bound", "from"], table
    rows = {r["group"]: r for r in (dict(zip(header, cells(line), strict=True))
                                    for line in table[2:])}
    assert {"drill-app-a", "drill-app-b", "drill-app-c"} <= set(rows), table
    assert all(r["skipped"] == "0" and r["audited"] == r["positions"] != "0"
               for r in rows.values()), table
    assert any("snapshot" in r["from"] for r in rows.values()), table


# -- the active-active drill (issue 58, item 5) ------------------------------------------------

AA_VARS = ["ledger_records=90"]


@pytest.fixture(scope="module")
def aa_fault_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    yield from _fault_lab(ACTIVE_ACTIVE, tmp_path_factory)


def _aa_campaign(lab: Lab, report_dir: Path, capsys: pytest.CaptureFixture[str], seed: int,
                 rounds: int, *more: str) -> dict[str, Any]:
    started = time.monotonic()
    status = main(["--config", str(lab.config_file), "runbook", "run", "drill-active-active",
                   "--yes", "--faults", str(FAULTS), "--seed", str(seed), "--rounds",
                   str(rounds), "--report-dir", str(report_dir),
                   *[a for v in (*AA_VARS, *more) for a in ("--var", v)]])
    err = capsys.readouterr().err
    print(f"active-active: the campaign took {time.monotonic() - started:.0f} s")
    card: dict[str, Any] = json.loads((report_dir / "campaign.json").read_text())["card"]
    assert status == 0, err[-6000:]
    assert card["ok"] and card["rounds"] == rounds == card["passed"], card["failed"]
    for f in card["faults"]["list"]:
        print(f"round {f['round']}:", f["signal"], f["target"], f.get("step"), f.get("at_s"),
              f.get("why"))
    return card


def _step_outputs(report_dir: Path, round_no: int, step: str) -> dict[str, Any]:
    """The outputs of `step`'s last successful run in a round's journal."""
    found: dict[str, Any] | None = None
    for line in (report_dir / "rounds" / f"round-{round_no:02d}.jsonl").read_text().splitlines():
        rec = json.loads(line)
        if rec.get("type") == "step-end" and rec.get("step") == step \
                and rec.get("status") == "ok":
            found = rec.get("outputs") or {}
    assert found is not None, f"{step} never ran to the end in round {round_no}"
    return found


def _aa_groups(ledger: dict[str, Any]) -> dict[str, str]:
    """The round's groups by role (agg-primary, local-secondary, ...)."""
    return {g["group"].rsplit("-", 2)[-2] + "-" + g["group"].rsplit("-", 1)[-1]: g["group"]
            for g in ledger["groups"]}


def test_active_active_rounds_under_faults(aa_fault_lab: Lab, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str],
                                           full_matrix: bool) -> None:
    """runbooks/drill-active-active.yaml on an active-active lab, with guard, under three
    faults a round (per commit two rounds, the full matrix four: every target): the primary
    region SIGKILLed, failover --region, writes and reads on the survivor, failback --region
    (its local-only group reads on first, as failback asks), the return. The ledger: every
    acknowledged record once in each region's view, every group read every record it must,
    its re-deliveries within what failover stated; no group left behind. Then the verifier
    made to fail: a group's position lost, what lay between never read."""
    report_dir = tmp_path / "campaign"
    rounds = AA_MATRIX_ROUNDS if full_matrix else AA_ROUNDS
    card = _aa_campaign(aa_fault_lab, report_dir, capsys, AA_SEED, rounds)
    assert (card["ledger"]["lost"], card["ledger"]["twice"], card["ledger"]["groups_lost"],
            card["ledger"]["redelivered_over"]) == (0, 0, 0, 0), card["ledger"]
    faults = card["faults"]["list"]
    landed = [f for f in faults if f["landed"]]
    by_round = {r["round"]: r for r in card["round_list"]}
    for number in range(1, rounds + 1):
        mine = [f for f in landed if f["round"] == number]
        assert {f["signal"] for f in mine} == SIGNALS, mine
        assert all(f["step"] in ("failover", "failback", "failback_again") and f["at_s"] > 0
                   and f["healed"]["how"] for f in mine), mine
        assert not by_round[number]["unrecovered"], by_round[number]
        ledger = by_round[number]["ledger"]
        assert ledger["ok"] and ledger["acked"] > 0 and ledger["left_behind"] == [], ledger
        groups = _aa_groups(ledger)
        assert set(groups) == {"agg-primary", "agg-secondary", "local-primary",
                               "local-secondary"}, groups
        assert all(g["lost"] == 0 for g in ledger["groups"]), ledger["groups"]
        # Both regions' views hold every record once.
        assert {s["cluster"] for s in ledger["sides"]} == {"primary", "secondary"}
        assert all(s["lost"] == 0 == s["twice"] for s in ledger["sides"]), ledger["sides"]
        # Each local-only group read the other region's records on the shared topic while
        # it ran there (counted apart), never held to them.
        assert sum(g["other_region"] for g in ledger["groups"]
                   if g["group"] == groups["local-secondary"]) > 0, ledger["groups"]
        # Failover moved every group of the region, each with its re-delivery stated.
        failover = _step_outputs(report_dir, number, "failover")
        assert failover["left_behind_groups"] == [] and failover["refused"] == [], failover
        assert set(failover["groups_moved"]) == {groups["agg-primary"],
                                                 groups["local-primary"]}, failover
        assert all(failover["redelivery_bound"][g] is not None
                   for g in failover["groups_moved"]), failover["redelivery_bound"]
        # Failback's first run named the local-only group that had to read on, and the
        # second moved it.
        first = _step_outputs(report_dir, number, "failback")
        assert not first["done"] and set(first["waiting"]) == {groups["local-primary"]}, first
        assert "alone" in first["waiting"][groups["local-primary"]], first["waiting"]
        again = _step_outputs(report_dir, number, "failback_again")
        assert again["done"] and set(again["moved"]) == {groups["agg-primary"],
                                                         groups["local-primary"]}, again
    # The survivor's broker SIGKILLed while its region's applications moved onto it.
    assert any(f["signal"] == "kill" and f["target"] == "secondary" for f in landed), faults
    assert {f["target"] for f in landed} == AA_TARGETS, faults
    # RTO by phase of the region's failover and failback, each round.
    assert {op["operation"] for op in card["rto"]} == {"failover", "failback"}, card["rto"]
    assert all(p["n"] == rounds for op in card["rto"] for p in op["phases"]
               if p["phase"] == "preflight"), card["rto"]
    _the_verifier_fails_on_a_lost_position(aa_fault_lab, card["round_list"][-1]["ledger"])


def _the_verifier_fails_on_a_lost_position(lab: Lab, ledger: dict[str, Any]) -> None:
    """On purpose: the primary's aggregate group loses its position (its group deleted)
    while the primary's producer writes on; it reads from the end, as Kafka's default
    auto.offset.reset=latest starts it, and the tally names what lay between as lost."""
    from drctl.config import load_config
    from drctl.kafka.groups import delete_groups
    from drctl.runbook.actions import ActionContext, builtin_registry

    registry = builtin_registry()
    ctx = ActionContext(config_loader=lambda: load_config(lab.config_file))
    name, group = ledger["ledger"], _aa_groups(ledger)["agg-primary"]

    def call(action: str, **params: Any) -> Any:
        found = registry.get(action)
        assert found is not None
        return found.call(ctx, params)

    with lab.clients(lab.load_state(), "primary") as primary:
        delete_groups(primary, [group])
    topic = f"aa-ledger-{name}"  # the drill's, one per run
    call("ledger.produce", ledger=name, topic=topic, region="primary", cluster="primary",
         records=12)
    read = call("ledger.consume", ledger=name, topic=topic, group=group, region="primary",
                cluster="primary")
    assert read["positions_lost"] and read["read"] == 0, read
    tally = call("ledger.verify", ledger=name, topic=topic, deadline=30)
    # (The other groups have not read the 12 yet either: lost to them too, so far.)
    assert not tally["ok"] and "never read by a group" in tally["verdict"], tally
    assert sum(g["lost"] for g in tally["groups"] if g["group"] == group) == 12, tally


def test_active_active_round_without_guard_leaves_groups_behind_named(
        aa_fault_lab: Lab, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """One round without guard (under the next seed's faults): nobody kept the positions
    of the primary's groups on the copies they read, nor what they read. Failover leaves both
    behind and names each with why (`drctl failover --region` exits 3), commits neither
    anywhere; the drill runs them nowhere until the primary is back. The ledger names them:
    the aggregate group, back home, still read every record; what the local-only group never
    read (its producer's records written on the secondary meanwhile) is counted apart, not
    as lost — and counted as lost when the tally is not told they were left behind."""
    from drctl.config import load_config
    from drctl.runbook.ledger import Ledger, tally

    report_dir = tmp_path / "campaign"
    card = _aa_campaign(aa_fault_lab, report_dir, capsys, AA_SEED + 1, 1, "guard=false")
    ledger = card["round_list"][0]["ledger"]
    groups = _aa_groups(ledger)
    named = [groups["agg-primary"], groups["local-primary"]]
    assert ledger["ok"] and ledger["left_behind"] == sorted(named), ledger
    failover = _step_outputs(report_dir, 1, "failover")
    assert failover["left_behind_groups"] == sorted(named), failover
    refused = {line.partition(":")[0]: line for line in failover["refused"]}
    assert set(refused) == set(named), failover["refused"]
    assert all("nothing tells what it read there" in line for line in refused.values()), \
        refused
    assert failover["groups_moved"] == [] and failover["redelivery_bound"] == {}, failover
    rows = {g: [r for r in ledger["groups"] if r["group"] == g] for g in named}
    assert sum(r["lost"] for r in rows[groups["agg-primary"]]) == 0, rows
    unread = sum(r["lost"] for r in rows[groups["local-primary"]])
    assert unread > 0 and ledger["left_behind_unread"] == unread, ledger
    assert ledger["groups_lost"] == 0, ledger
    # Not told they were left behind, the same count fails: those records are lost to it.
    config = load_config(aa_fault_lab.config_file)
    blind = tally(Ledger(config.state.dir, ledger["ledger"]), config,
                  f"aa-ledger-{ledger['ledger']}", deadline_s=10)
    assert not blind.ok and blind.groups_lost == unread, blind.as_dict()["verdict"]
