"""A campaign: the drill run round after round, each under its own seeded faults, and one
scorecard for all (`drctl runbook run drill --faults N --seed S --rounds R`).

Round r runs the runbook with `faults=N` and `fault_seed=S+r-1` (its inputs; the drill
declares them), journaled in `<report dir>/rounds/round-NN.jsonl`. A step that fails under a
fault is run again as an operator would: whatever the faults left broken is healed (a stopped
process continued, a server a fault took down and did not see back started again), then the
runbook's resume continues from the failed step — up to `reruns` times. A check that did not
hold is a finding, never re-run. The campaign stops at the first round that does not pass and
names the seed that reproduces it (`--seed S+r-1 --rounds 1`).

Everything a round did is read back from its journal — faults landed and where (step, seconds
into it, the operation's phase), how each was healed, the re-runs and the time each failed step
took to recover, the RTO of failover, failback and reprotect by phase, the ledger's counts —
and kept in `<report dir>/campaign-state.json` after every round, so the same command run
again after a crash goes on with the round it was in. The scorecard is written as JSON, Markdown and
HTML (`templates/drill-campaign.md.j2`).
"""

from __future__ import annotations

import json
import os
import shlex
import statistics
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from drctl.errors import ExitStatus, UsageError
from drctl.progress import Notify
from drctl.runbook.executor import Executor
from drctl.runbook.journal import Journal, JournalState, journal_records, read_journal
from drctl.runbook.model import Runbook
from drctl.runbook.result import RunResult, RunStatus
from drctl.runbook.variables import Variables

# The inputs a runbook declares to take a campaign's faults.
FAULTS_VAR, SEED_VAR = "faults", "fault_seed"
# Operations whose step scorecards carry RTO by phase.
OPERATIONS = ("failover", "failback", "reprotect")
STATE_FILE = "campaign-state.json"
# A run that ends so is run again (after healing); any other end is the round's verdict.
_RERUN = frozenset({RunStatus.failed, RunStatus.unreachable})


@dataclass(frozen=True)
class CampaignSpec:
    runbook: str  # as given: a file or a shipped runbook's name
    rounds: int
    faults: int
    seed: int
    reruns: int
    report_dir: Path
    assignments: tuple[str, ...] = ()
    var_files: tuple[str, ...] = ()
    # The configuration the runbook ran with (--config, or where DRCTL_CONFIG or the default
    # pointed); None: the runbook needs none.
    config: str | None = None

    def key(self) -> dict[str, Any]:
        """What a campaign run again must share with the first to go on with it."""
        return {"runbook": self.runbook, "rounds": self.rounds, "faults": self.faults,
                "seed": self.seed, "assignments": list(self.assignments),
                "var_files": list(self.var_files)}

    def seed_of(self, round_no: int) -> int:
        return self.seed + round_no - 1

    def reproduce(self, round_no: int) -> str:
        """The command that runs round `round_no` alone: everything that decides its plan
        (the configuration, each --var and --vars-file as given, the faults and the seed)."""
        args = ["drctl", *(["--config", self.config] if self.config else []), "runbook", "run",
                self.runbook, *[a for v in self.assignments for a in ("--var", v)],
                *[a for f in self.var_files for a in ("--vars-file", f)],
                "--faults", str(self.faults), "--seed", str(self.seed_of(round_no)),
                "--rounds", "1"]
        return shlex.join(args)


@dataclass
class Campaign:
    """What the CLI hands the campaign: how to build a round's runbook and variables, an
    executor for them, and how to heal what faults left broken."""

    spec: CampaignSpec
    load: Callable[[Sequence[str]], tuple[Runbook, Variables]]
    executor: Callable[[Runbook, Variables, Journal], Executor]
    # What the faults left broken, healed before a failed run is resumed; what was healed.
    heal: Callable[[JournalState], list[str]]
    notify: Notify = lambda _: None
    # Each run of a round as it ends (its report, say).
    run_done: Callable[[int, RunResult], None] = lambda _round, _result: None
    # The scorecard so far, after every round (written where the campaign's reports go).
    scored: Callable[[dict[str, Any]], object] = lambda _card: None
    rounds: list[dict[str, Any]] = field(default_factory=list)

    @property
    def state_file(self) -> Path:
        return self.spec.report_dir / STATE_FILE

    def journal_of(self, round_no: int) -> Path:
        return self.spec.report_dir / "rounds" / f"round-{round_no:02d}.jsonl"

    # -- the campaign --------------------------------------------------------------------

    def run(self) -> dict[str, Any]:
        """Every round not done yet; the scorecard (plain data)."""
        self._load_state()
        for round_no in range(1, self.spec.rounds + 1):
            if any(r["round"] == round_no for r in self.rounds):
                continue
            summary = self._round(round_no)
            if summary["status"] == RunStatus.interrupted.value:
                # Not a round's verdict: the same command goes on with this round.
                return {**self.scorecard(), "interrupted": round_no}
            self.rounds.append(summary)
            self._save_state()
            self.scored(self.scorecard())
            if not summary["passed"]:
                self.notify(f"Round {round_no} did not pass ({summary['status']}: "
                            f"{summary['reason']}). Reproduce it: "
                            f"{self.spec.reproduce(round_no)}")
                break
        return self.scorecard()

    def _load_state(self) -> None:
        if not self.state_file.exists():
            return
        state = json.loads(self.state_file.read_text())
        if state.get("spec") != self.spec.key():
            raise UsageError(f"{self.spec.report_dir} holds another campaign "
                             f"({state.get('spec')}).",
                             "Give another --report-dir, or the same options as that one.")
        self.rounds = [r for r in state.get("rounds", []) if r.get("passed")]
        if self.rounds:
            self.notify(f"Going on with the campaign in {self.spec.report_dir}: "
                        f"{len(self.rounds)} round(s) done")

    def _save_state(self) -> None:
        self.spec.report_dir.mkdir(parents=True, exist_ok=True)
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps({"spec": self.spec.key(), "rounds": self.rounds},
                                  indent=2, default=str))
        os.replace(tmp, self.state_file)

    def _round(self, round_no: int) -> dict[str, Any]:
        spec = self.spec
        seed = spec.seed_of(round_no)
        journal_path = self.journal_of(round_no)
        runbook, variables = self.load([*spec.assignments, f"{FAULTS_VAR}={spec.faults}",
                                        f"{SEED_VAR}={seed}"])
        for name in (FAULTS_VAR, SEED_VAR):
            if name not in runbook.inputs:
                raise UsageError(f"The runbook {runbook.path} takes no '{name}' input: it has "
                                 "no faults for a campaign to draw.",
                                 "Declare `faults` and `fault_seed` inputs and a fault step "
                                 "that uses them (runbooks/drill.yaml does).")
        state = None
        if journal_path.exists():
            state = read_journal(journal_path)
            if state.finished is not None and state.finished.get("status") == "succeeded":
                return self._summary(round_no, seed, journal_path, [], RunStatus.succeeded,
                                     None)
            self.notify(f"Round {round_no}/{spec.rounds} (seed {seed}): going on with "
                        f"{journal_path}")
        else:
            self.notify(f"Round {round_no}/{spec.rounds} (seed {seed}): {spec.faults} "
                        f"fault(s); journal {journal_path}")
        results: list[RunResult] = []
        healed: list[str] = []
        while True:
            if state is not None:
                healed += self.heal(state)
            journal = Journal(journal_path, variables.redactor)
            try:
                result = self.executor(runbook, variables, journal).run(resume=state)
            finally:
                journal.close()
            results.append(result)
            self.run_done(round_no, result)
            if result.status not in _RERUN or len(results) > spec.reruns:
                break
            self.notify(f"Round {round_no}: {result.reason}; healing what the faults left "
                        f"broken and running it again from there (re-run {len(results)} of "
                        f"at most {spec.reruns})")
            state = read_journal(journal_path)
        last = results[-1]
        return self._summary(round_no, seed, journal_path, healed, last.status, last.reason)

    def _summary(self, round_no: int, seed: int, journal: Path, healed: list[str],
                 status: RunStatus, reason: str | None) -> dict[str, Any]:
        summary = round_summary(journal)
        ledger = summary.get("ledger") or {}
        if status == RunStatus.succeeded and ledger and not ledger.get("ok", True):
            # The runbook's checks passed a ledger that does not pass (a runbook that checks
            # less than the drill): the round is not passed on the records' word.
            status = RunStatus.check_failed
            reason = f"the ledger does not pass: {ledger.get('verdict') or 'not ok'}"
        summary.update({"round": round_no, "seed": seed, "status": status.value,
                        "passed": status == RunStatus.succeeded, "reason": reason,
                        "healed_between_runs": healed, "journal": str(journal),
                        "reproduce": self.spec.reproduce(round_no)})
        landed = [f for f in summary["faults"] if f.get("landed")]
        self.notify(
            f"Round {round_no}: {status.value} in {summary['duration_s']:.0f} s — "
            f"{len(landed)} fault(s) landed, {summary['reruns']} re-run(s); ledger: "
            f"{ledger.get('acked', '?')} acknowledged, lost {ledger.get('lost', '?')}, "
            f"twice {ledger.get('twice', '?')}, re-delivered beyond what drctl stated "
            f"{ledger.get('redelivered_over', '?')}")
        return summary

    def scorecard(self) -> dict[str, Any]:
        return campaign_scorecard(self.spec, self.rounds)


# -- reading a round back from its journal ---------------------------------------------------


def _ts(text: str | None) -> float | None:
    return datetime.fromisoformat(text).timestamp() if text else None


def round_summary(journal: Path) -> dict[str, Any]:
    """What one round's journal says: its runs, its faults (landed or missed, healed how),
    each failed step's recovery (time from its failure to its success in a later run), the
    operations' scorecards (RTO by phase), and the ledger's counts."""
    runs = 0
    started: float | None = None
    ended: float | None = None
    actions: dict[str, str] = {}
    faults: dict[str, dict[str, Any]] = {}
    failures: dict[str, list[dict[str, Any]]] = {}
    recoveries: list[dict[str, Any]] = []
    scorecards: dict[str, dict[str, Any]] = {}
    ledger: dict[str, Any] | None = None
    for rec in journal_records(journal):
        kind = rec.get("type")
        at = _ts(rec.get("time"))
        if kind in ("run", "resume"):
            runs += 1
            started = started if started is not None else at
        elif kind == "step-start":
            actions[rec["step"]] = str((rec.get("inputs") or {}).get("action")
                                       or rec.get("kind"))
        elif kind == "step-end":
            step = rec["step"]
            if rec.get("status") in ("ok", "skipped"):
                if step in failures:
                    first = failures.pop(step)
                    recoveries.append({
                        "step": step, "reruns": len(first),
                        "errors": [f["error"] for f in first],
                        "time_to_recover_s": round((at or 0) - (first[0]["at"] or 0), 1)})
                if rec.get("scorecard") and actions.get(step) in OPERATIONS:
                    card = rec["scorecard"]
                    # A later step running the operation again on the same incident (the
                    # drill's failover run again to confirm a pending stop) is the run that
                    # finished it: one operation per incident, not one per step.
                    for other in [s for s, c in scorecards.items()
                                  if actions.get(s) == actions[step]
                                  and c.get("incident") == card.get("incident")]:
                        del scorecards[other]
                    scorecards[step] = card
                if actions.get(step) == "ledger.verify" and \
                        isinstance((rec.get("outputs") or {}).get("sides"), list):
                    ledger = dict(rec["outputs"])
            elif rec.get("status") not in ("not-run", "planned"):
                failures.setdefault(step, []).append(
                    {"at": at, "error": rec.get("error"), "status": rec.get("status")})
        elif kind == "fault":
            faults[rec["fault"]] = {k: v for k, v in rec.items() if k not in ("type",)}
        elif kind == "fault-healed" and rec.get("fault") in faults:
            faults[rec["fault"]]["healed"] = {k: v for k, v in rec.items()
                                              if k not in ("type", "fault", "time")}
        elif kind == "run-end":
            ended = at
    unrecovered = [{"step": step, "reruns": len(f), "errors": [x["error"] for x in f]}
                   for step, f in failures.items()]
    return {"runs": runs, "reruns": max(0, runs - 1),
            "duration_s": round((ended or 0) - (started or 0), 1) if started else 0.0,
            "faults": sorted(faults.values(), key=lambda f: str(f.get("time", ""))),
            "recoveries": recoveries, "unrecovered": unrecovered,
            "operations": {step: _operation(actions[step], sc)
                           for step, sc in scorecards.items()},
            "ledger": ledger}


def _operation(action: str, scorecard: Mapping[str, Any]) -> dict[str, Any]:
    timing = scorecard.get("timing") or {}
    this = timing.get("this_run") or {}
    phases: dict[str, float] = {}
    for p in this.get("phases") or []:
        phases[p["phase"]] = round(phases.get(p["phase"], 0.0) + float(p["seconds"]), 3)
    return {"operation": action, "phases_s": phases, "this_run_s": this.get("total_s"),
            "elapsed_s": timing.get("elapsed_s"), "runs": timing.get("runs")}


# -- the scorecard ---------------------------------------------------------------------------


def _stats(values: Sequence[float]) -> dict[str, float | int]:
    if not values:
        return {"n": 0}
    return {"n": len(values), "median": round(statistics.median(values), 1),
            "max": round(max(values), 1), "min": round(min(values), 1)}


def campaign_scorecard(spec: CampaignSpec, rounds: Sequence[Mapping[str, Any]]
                       ) -> dict[str, Any]:
    """All rounds in one: faults by kind and by step (and where each landed), re-runs and
    the time to recover, RTO per phase, and the ledger's lost and twice."""
    faults = [{"round": r["round"], **f} for r in rounds for f in r["faults"]]
    landed = [f for f in faults if f.get("landed")]
    by_kind = Counter((f["signal"], f["target"]) for f in landed)
    by_step = Counter((f["step"], f["signal"]) for f in landed)
    recoveries = [{"round": r["round"], **x} for r in rounds for x in r["recoveries"]]
    per_step: dict[str, list[float]] = {}
    for x in recoveries:
        per_step.setdefault(x["step"], []).append(float(x["time_to_recover_s"]))
    rto: dict[str, dict[str, Any]] = {}
    for r in rounds:
        for op in r["operations"].values():
            row = rto.setdefault(op["operation"], {"phases": {}, "elapsed": [], "runs": []})
            for phase, seconds in op["phases_s"].items():
                row["phases"].setdefault(phase, []).append(seconds)
            if op.get("elapsed_s") is not None:
                row["elapsed"].append(float(op["elapsed_s"]))
            row["runs"].append(int(op.get("runs") or 1))
    ledgers = [r.get("ledger") or {} for r in rounds]
    failed = [r for r in rounds if not r["passed"]]
    counts = ("acked", "lost", "twice", "groups_lost", "redelivered", "redelivered_over",
              "recopied", "left_behind_unread")
    totals = {k: sum(int(ledger.get(k) or 0) for ledger in ledgers) for k in counts}
    return {
        "spec": spec.key(),
        "written": datetime.now(UTC).isoformat(timespec="seconds"),
        "rounds": len(rounds), "passed": len(rounds) - len(failed),
        "failed": [{"round": r["round"], "seed": r["seed"], "status": r["status"],
                    "reason": r["reason"], "reproduce": r["reproduce"]} for r in failed],
        "interrupted": None,
        # A round's ledger that does not pass fails the campaign, whatever its checks said:
        # nothing acknowledged, or re-deliveries beyond what drctl stated, count too.
        "ok": not failed and len(rounds) == spec.rounds and not totals["lost"]
        and not totals["twice"] and not totals["groups_lost"]
        and not totals["redelivered_over"]
        and all(ledger.get("ok", True) for ledger in ledgers if ledger),
        "faults": {
            "planned": len(faults), "landed": len(landed),
            "missed": len(faults) - len(landed),
            "by_kind": [{"signal": s, "target": t, "landed": n}
                        for (s, t), n in sorted(by_kind.items())],
            "by_step": [{"step": st, "signal": s, "landed": n}
                        for (st, s), n in sorted(by_step.items())],
            "list": faults,
        },
        "reruns": {"total": sum(r["reruns"] for r in rounds),
                   "by_step": [{"step": s, "reruns": len(v), "time_to_recover_s": _stats(v)}
                               for s, v in sorted(per_step.items())],
                   "list": recoveries},
        "rto": [{"operation": op,
                 "phases": [{"phase": p, **_stats(v)} for p, v in row["phases"].items()],
                 "elapsed_s": _stats(row["elapsed"]), "runs": _stats(row["runs"])}
                for op, row in sorted(rto.items(), key=lambda kv: OPERATIONS.index(kv[0])
                                      if kv[0] in OPERATIONS else 9)],
        "ledger": {**totals,
                   "rounds": [{"round": r["round"], "seed": r["seed"],
                               **{k: (r.get("ledger") or {}).get(k) for k in
                                  (*counts, "ok", "verdict")}}
                              for r in rounds]},
        "round_list": [{k: v for k, v in r.items() if k not in ("faults", "recoveries")}
                       for r in rounds],
    }


def exit_status(scorecard: Mapping[str, Any]) -> ExitStatus:
    """0 every round passed with nothing lost or twice, nothing re-delivered beyond what
    drctl stated; else what the failing round ended with (a check that did not hold, or a
    ledger that does not pass: 3)."""
    if scorecard.get("interrupted"):
        return ExitStatus.INTERRUPTED
    if scorecard["ok"]:
        return ExitStatus.SUCCESS
    for failed in scorecard["failed"]:
        return {"check-failed": ExitStatus.CHECK_FAILED, "unreachable": ExitStatus.UNREACHABLE,
                "aborted": ExitStatus.ABORTED,
                "interrupted": ExitStatus.INTERRUPTED}.get(failed["status"],
                                                           ExitStatus.FAILURE)
    return ExitStatus.CHECK_FAILED
