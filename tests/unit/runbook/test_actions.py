"""Action parameters (drctl/runbook/actions.py): coercion, durations, the mode enums a
runbook is checked against, and old parameter names kept for a release."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from drctl.cli.app import main
from drctl.runbook.actions import Action, ActionContext, CoercionError, builtin_registry, coerce
from drctl.runbook.loader import load_runbook
from drctl.timeparse import Seconds


def test_coercion_of_action_parameters() -> None:
    assert coerce("3", int) == 3 and coerce(3.0, int) == 3 and coerce("yes", bool) is True
    assert coerce(None, int | None) is None and coerce(["1", 2], list[int]) == [1, 2]
    assert coerce(5, str) == "5"
    for value, annotation in (("x", int), (True, int), ("maybe", bool), ("a", list[str])):
        with pytest.raises(CoercionError):
            coerce(value, annotation)


def test_runbook_duration_parameters() -> None:
    assert coerce("15m", Seconds) == 900
    assert coerce(" 2h ", Seconds) == 7200
    assert coerce(30, Seconds) == 30.0
    assert coerce("45", Seconds | None) == 45.0
    assert coerce(None, Seconds | None) is None
    with pytest.raises(CoercionError, match="expected a duration such as 5s, 500ms or 2m"):
        coerce("soon", Seconds)
    failback = builtin_registry().get("failback")
    assert failback is not None
    lookback = failback.param("lookback")
    assert lookback is not None and lookback.type_name == "duration | None"
    assert failback.check_params({"lookback": "6h"}) == []
    [issue] = failback.check_params({"lookback": "soon"})
    assert issue.param == "lookback" and "expected a duration" in issue.message


def test_runbook_parameters_are_checked_against_the_enums() -> None:
    registry = builtin_registry()
    failback = registry.get("failback")
    assert failback is not None
    [issue] = failback.check_params({"reconcile": "copy-all"})
    assert issue.message == ("parameter 'reconcile': expected one of copy-safe, quarantine, "
                             "none, got 'copy-all'")
    assert failback.check_params({"reconcile": "quarantine"}) == []
    assert failback.check_params({"reconcile": "{{ vars.reconcile }}"}) == []
    translate = registry.get("translate-offsets")
    assert translate is not None
    assert translate.check_params({"method": "exact"}) == []
    assert "expected one of auto, exact" in translate.check_params({"method": "fast"})[0].message
    param = failback.param("reconcile")
    assert param is not None and param.default == "copy-safe"
    assert param.type_name == "copy-safe|quarantine|none"


def test_a_renamed_parameter_takes_its_old_name_for_a_release_with_a_warning(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Action parameters follow the CLI's options (`failover --deadline`, `translate-offsets
    --yes`, `lab load --commit`); a runbook written with the old names still validates and
    runs, and says what to write now."""
    registry = builtin_registry()
    failover = registry.get("failover")
    assert failover is not None and failover.param("deadline") is not None
    assert failover.param("source_deadline") is None
    assert failover.check_params({"source_deadline": "3"}) == []
    assert failover.old_names({"source_deadline": 3}) == {
        "source_deadline": "parameter 'source_deadline' is now 'deadline'; the old name goes "
                           "in the next release."}
    [both] = failover.check_params({"source_deadline": 3, "deadline": 3})
    assert both.message == "'source_deadline' is the old name of 'deadline': give 'deadline' only"
    [bad] = failover.check_params({"source_deadline": "soon"})
    assert bad.param == "deadline" and "expected a duration" in bad.message
    seen: dict[str, Any] = {}
    translate = registry.get("translate-offsets")
    yes = translate.param("yes") if translate is not None else None
    assert yes is not None and yes.default is False  # never a write unless asked
    called = Action("x", lambda ctx, *, yes=False: seen.update(yes=yes), (yes,),
                    renamed={"apply": "yes"})
    called.call(ActionContext(), {"apply": "true"})
    assert seen == {"yes": True}  # the old name reaches the new parameter, coerced

    rb = tmp_path / "old.yaml"
    rb.write_text("steps:\n"
                  "  - name: load\n"
                  "    action: lab.load\n"
                  "    with:\n"
                  "      dir: lab\n"
                  "      groups: [app=50%]\n"
                  "  - name: move\n"
                  "    action: translate-offsets\n"
                  "    with: {apply: true}\n")
    runbook = load_runbook(rb, registry)
    assert runbook.warnings == (
        f"{rb}:6: step 'load': action 'lab.load': parameter 'groups' is now 'commit'; the old "
        "name goes in the next release.",
        f"{rb}:9: step 'move': action 'translate-offsets': parameter 'apply' is now 'yes'; the "
        "old name goes in the next release.")
    assert main(["runbook", "validate", str(rb)]) == 0
    err = " ".join(capsys.readouterr().err.split())
    assert "parameter 'groups' is now 'commit'" in err and "parameter 'apply' is now 'yes'" in err


def test_a_renamed_parameter_must_name_a_parameter() -> None:
    with pytest.raises(ValueError, match="renamed to unknown parameters"):
        builtin_registry().register("test.x", lambda ctx, *, a=1: None, renamed={"b": "c"})


def _pair_config(separator: str) -> Any:
    """An active-active pair whose copies are named `<region><separator><topic>`."""
    from drctl.config import parse_config

    return parse_config({
        "clusters": {"primary": {"bootstrap.servers": "a:9092"},
                     "secondary": {"bootstrap.servers": "b:9092"}},
        "topology": {"kind": "active-active", "flows": [
            {"kind": "mirrormaker2", "source": s, "target": t,
             "rename": f"{s}{separator}{{topic}}", "source_alias": s, "target_alias": t}
            for s, t in (("primary", "secondary"), ("secondary", "primary"))]}})


def test_a_pairs_ledger_steps_name_a_region_and_one_of_its_clusters() -> None:
    """On an active-active pair the ledger's clusters are its regions, and a producer or a
    group belongs to a region: a step that does not say which is a usage error, before any
    record is written."""
    from drctl.errors import UsageError

    config = _pair_config(".")
    registry = builtin_registry()
    ctx = ActionContext(config_loader=lambda: config)
    for name in ("ledger.produce", "ledger.consume"):
        action = registry.get(name)
        assert action is not None and action.param("region") is not None
        params = {"ledger": "run1", "cluster": "primary", "group": "g"}
        params = {k: v for k, v in params.items() if action.param(k) is not None}
        with pytest.raises(UsageError, match="needs 'region'"):
            action.call(ctx, params)
        with pytest.raises(UsageError, match=r"none of the ledger's clusters \(primary, "):
            action.call(ctx, {**params, "cluster": "dc3", "region": "primary"})
    for name, param in (("failover", "allow_left_behind"), ("failback", "allow_waiting")):
        action = registry.get(name)
        assert action is not None and action.param("region") is not None
        allow = action.param(param)
        assert allow is not None and allow.default is False


def test_mm2_checkpointed_reads_the_checkpoints_of_the_flow_out_of_the_region(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The groups MirrorMaker 2 checkpointed, from the flow out of the region (its
    checkpoints topic on the other region, named with the flow's separator), within the
    regex: without guard, all a failover with the region down can see."""
    from drctl.kafka import checkpoints

    config = _pair_config("_")
    asked: list[str] = []

    def read(clients: Any, topic: str, **_: Any) -> dict[tuple[str, str, int], Any]:
        asked.append(topic)
        return {("aa-1-agg-primary", "primary_l", 0): 1, ("aa-1-local-primary", "primary_l", 0): 1,
                ("other", "primary_l", 0): 1}

    monkeypatch.setattr(checkpoints, "read_checkpoints", read)
    action = builtin_registry().get("mm2.checkpointed")
    assert action is not None and action.read_only
    ctx = ActionContext(config_loader=lambda: config)
    out = action.call(ctx, {"region": "primary", "groups": "aa-1-.*"})
    assert out == {"topic": "primary_checkpoints_internal",
                   "groups": ["aa-1-agg-primary", "aa-1-local-primary"]}
    assert asked == ["primary_checkpoints_internal"]
