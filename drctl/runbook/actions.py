"""The action registry: step names (`lab.status`, `config.check`, ...) mapped to core functions.

An action is a plain function `fn(ctx: ActionContext, *, param: type = default, ...)` returning
JSON-like data (its *result*, which step outputs read). Parameters are typed by the function's
annotations: the loader checks names, required ones and literal values before a run, and the
executor coerces rendered values (`"3"` -> 3 for an `int`) when it calls the action.

Read-only actions (`read_only=True`) change nothing; only they may fetch a check's value,
because checks also run in plans. Actions are called in-process; Kafka and lab modules are
imported inside the functions so loading a runbook stays fast. The mode enums parameters are
typed with (`ReconcileMode`, `TranslateMethod`) are imported here: the loader checks literal
values against them before a run.

To add one:

    registry.register("failover", failover_action, help="...", needs_config=True)

A parameter renamed to match the CLI's option keeps its old name for a release:
`register(..., renamed={"source_deadline": "deadline"})`; a runbook that uses the old name
runs, and the loader warns (`Runbook.warnings`).
"""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Union

from drctl.config import Config
from drctl.gap.plan import GapScope
from drctl.ops.one_way.reconcile import ReconcileMode
from drctl.progress import Notify
from drctl.secrets import Redactor
from drctl.suggest import renamed_note
from drctl.timeparse import Seconds, parse_duration
from drctl.translate.model import TranslateMethod
from drctl.yesno import bool_from_text

if TYPE_CHECKING:
    from drctl.ops.steps.failover_point import FailoverOptions


@dataclass
class ActionContext:
    """What an action may use besides its parameters."""

    config_loader: Callable[[], Config] | None = None
    notify: Notify = lambda _: None
    redactor: Redactor = field(default_factory=Redactor)

    @property
    def config(self) -> Config:
        if self.config_loader is None:
            from drctl.errors import ConfigError

            raise ConfigError("this action needs drctl's configuration and none was given",
                              hint="Pass --config PATH or set DRCTL_CONFIG.")
        return self.config_loader()


@dataclass(frozen=True)
class Param:
    name: str
    annotation: Any
    required: bool
    default: Any = None

    @property
    def type_name(self) -> str:
        return _type_name(self.annotation)


@dataclass(frozen=True)
class ParamIssue:
    param: str | None
    message: str


class CoercionError(ValueError):
    pass


@dataclass(frozen=True)
class Action:
    name: str
    func: Callable[..., Any]
    params: tuple[Param, ...]
    help: str = ""
    read_only: bool = False
    needs_config: bool = False
    # Old parameter names still taken, for a release: old name -> its parameter's name now.
    renamed: Mapping[str, str] = field(default_factory=dict)

    def param(self, name: str) -> Param | None:
        return next((p for p in self.params if p.name == name), None)

    def old_names(self, given: Mapping[str, Any]) -> dict[str, str]:
        """The old parameter names `given` uses, each with the warning it earns."""
        return {old: renamed_note(f"parameter '{old}'", f"'{self.renamed[old]}'")
                for old in given if old in self.renamed}

    def _current(self, given: Mapping[str, Any]) -> dict[str, Any]:
        """`given` with old parameter names read as their new ones."""
        return {self.renamed.get(name, name): value for name, value in given.items()}

    def check_params(self, given: Mapping[str, Any]) -> list[ParamIssue]:
        """Problems visible before rendering: unknown or missing names, wrong literal types."""
        from drctl.runbook.templating import is_template

        issues = [ParamIssue(old, f"'{old}' is the old name of '{new}': give '{new}' only")
                  for old, new in self.renamed.items() if old in given and new in given]
        given = self._current(given)
        for name, value in given.items():
            param = self.param(name)
            if param is None:
                known = ", ".join(p.name for p in self.params) or "none"
                issues.append(ParamIssue(name, f"unknown parameter '{name}' (parameters: "
                                         f"{known})"))
                continue
            if any(is_template(v) for v in _leaves(value)):
                continue
            try:
                coerce(value, param.annotation)
            except CoercionError as exc:
                issues.append(ParamIssue(name, f"parameter '{name}': {exc}"))
        for param in self.params:
            if param.required and param.name not in given:
                issues.append(ParamIssue(None, f"missing required parameter '{param.name}' "
                                         f"({param.type_name})"))
        return issues

    def call(self, ctx: ActionContext, given: Mapping[str, Any]) -> Any:
        kwargs = {}
        for name, value in self._current(given).items():
            param = self.param(name)
            if param is None:
                raise CoercionError(f"unknown parameter '{name}'")
            try:
                kwargs[name] = coerce(value, param.annotation)
            except CoercionError as exc:
                raise CoercionError(f"parameter '{name}': {exc}") from exc
        return self.func(ctx, **kwargs)


def _leaves(value: Any) -> list[Any]:
    if isinstance(value, Mapping):
        return [leaf for v in value.values() for leaf in _leaves(v)]
    if isinstance(value, (list, tuple)):
        return [leaf for v in value for leaf in _leaves(v)]
    return [value]


def _type_name(annotation: Any) -> str:
    if annotation is Seconds:
        return "duration"
    if typing.get_origin(annotation) in (Union, types.UnionType):
        return " | ".join("None" if arg is type(None) else _type_name(arg)
                          for arg in typing.get_args(annotation))
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return "|".join(str(m.value) for m in annotation)  # the choices, as Typer lists them
    if typing.get_origin(annotation) is None and isinstance(annotation, type):
        return annotation.__name__
    return str(annotation).replace("typing.", "")


def coerce(value: Any, annotation: Any) -> Any:
    """`value` as `annotation` (str, int, float, Seconds, bool, Path, list[...], X | None, Any,
    dict)."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if annotation is Any or annotation is inspect.Parameter.empty:
        return value
    if origin in (Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return coerce(value, arg)
            except CoercionError as exc:
                errors.append(str(exc))
        raise CoercionError("; ".join(errors))
    if origin in (list, tuple) or annotation in (list, tuple):
        if not isinstance(value, (list, tuple)):
            raise CoercionError(f"expected a list, got {value!r}")
        item = args[0] if args else Any
        items = [coerce(v, item) for v in value]
        return tuple(items) if (origin or annotation) is tuple else items
    if origin in (dict, Mapping) or annotation in (dict, Mapping):
        if not isinstance(value, Mapping):
            raise CoercionError(f"expected a mapping, got {value!r}")
        return dict(value)
    if annotation is bool:
        if isinstance(value, bool):
            return value
        parsed = bool_from_text(value) if isinstance(value, str) else None
        if parsed is not None:
            return parsed
        raise CoercionError(f"expected true or false, got {value!r}")
    if annotation is int:
        if isinstance(value, bool):
            raise CoercionError(f"expected an integer, got {value!r}")
        if isinstance(value, int):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str):
            try:
                return int(value.strip())
            except ValueError:
                pass
        raise CoercionError(f"expected an integer, got {value!r}")
    if annotation is Seconds:
        try:
            return parse_duration(value.strip() if isinstance(value, str) else value)
        except ValueError as exc:
            raise CoercionError(str(exc)) from None
    if annotation is float:
        if isinstance(value, bool):
            raise CoercionError(f"expected a number, got {value!r}")
        if isinstance(value, (int, float)):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value.strip())
            except ValueError:
                pass
        raise CoercionError(f"expected a number, got {value!r}")
    if annotation is str:
        if isinstance(value, (str, int, float)) and not isinstance(value, bool):
            return str(value)
        raise CoercionError(f"expected text, got {value!r}")
    if annotation is Path:
        if isinstance(value, (str, Path)):
            return Path(value)
        raise CoercionError(f"expected a path, got {value!r}")
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        try:
            return annotation(value)
        except (ValueError, TypeError):
            choices = ", ".join(str(m.value) for m in annotation)
            raise CoercionError(f"expected one of {choices}, got {value!r}") from None
    raise CoercionError(f"cannot pass a value to a parameter of type {_type_name(annotation)}")


class Registry:
    def __init__(self, factory: str | None = None) -> None:
        self._actions: dict[str, Action] = {}
        # "module:function" that builds this registry again, in a child process that runs a
        # step of its own (runbook/child.py); None: its actions run in-process only.
        self.factory = factory

    def register(self, name: str, func: Callable[..., Any], *, help: str = "",
                 read_only: bool = False, needs_config: bool = False,
                 renamed: Mapping[str, str] | None = None) -> Action:
        if name in self._actions:
            raise ValueError(f"action '{name}' is already registered")
        hints = typing.get_type_hints(func)
        signature = inspect.signature(func)
        params = []
        for index, (pname, p) in enumerate(signature.parameters.items()):
            if index == 0:
                continue  # the ActionContext
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                raise ValueError(f"action '{name}': *args/**kwargs cannot be typed parameters")
            default = None if p.default is p.empty else p.default
            if isinstance(default, Enum):
                default = default.value  # shown as a runbook writes it
            params.append(Param(pname, hints.get(pname, Any), p.default is p.empty, default))
        action = Action(name, func, tuple(params),
                        help or (inspect.getdoc(func) or "").split("\n")[0], read_only,
                        needs_config, dict(renamed or {}))
        unknown = [new for new in action.renamed.values() if action.param(new) is None]
        if unknown:
            raise ValueError(f"action '{name}': renamed to unknown parameters {unknown}")
        self._actions[name] = action
        return action

    def action(self, name: str, *, help: str = "", read_only: bool = False,
               needs_config: bool = False) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        def decorate(func: Callable[..., Any]) -> Callable[..., Any]:
            self.register(name, func, help=help, read_only=read_only,
                          needs_config=needs_config)
            return func
        return decorate

    def get(self, name: str) -> Action | None:
        return self._actions.get(name)

    def names(self) -> list[str]:
        return sorted(self._actions)

    def __iter__(self) -> typing.Iterator[Action]:
        return iter(self._actions[name] for name in self.names())


# -- the built-in actions -----------------------------------------------------------------


def _lab_up(ctx: ActionContext, *, dir: str = "lab", topic_naming: str = "kept",
            kafka_version: str | None = None, primary_port: int = 19092,
            secondary_port: int = 29092, connect_port: int = 18083,
            schema_registry: bool | None = None) -> dict[str, Any]:
    """Start the lab (idempotent) and write DIR/drctl.yaml; schema_registry: true adds a
    schema registry per cluster (false stops them; unset keeps the lab's)."""
    from drctl.errors import UsageError
    from drctl.lab.lab import Lab, LabPorts

    if topic_naming not in ("kept", "prefixed"):
        raise UsageError(f"topic_naming must be kept or prefixed, got '{topic_naming}'")
    lab = Lab(Path(dir))
    lab.up(ports=LabPorts(primary_port, secondary_port, connect_port),
           kafka_version=kafka_version, names_kept=topic_naming == "kept",
           schema_registry=schema_registry, notify=ctx.notify)
    return _lab_status(ctx, dir=dir)


def _lab_down(ctx: ActionContext, *, dir: str = "lab", purge: bool = False) -> dict[str, Any]:
    """Stop every process of the lab (idempotent)."""
    from drctl.lab.lab import Lab

    return {"stopped": Lab(Path(dir)).down(purge=purge)}


def _lab_status(ctx: ActionContext, *, dir: str = "lab") -> dict[str, Any]:
    """Processes, connectors and replication lag of the lab."""
    from drctl.lab.lab import Lab

    status = Lab(Path(dir)).status()
    status["all_running"] = all(p["running"] for p in status["processes"])
    status["not_running"] = [p["name"] for p in status["processes"] if not p["running"]]
    status["connectors_running"] = bool(status["connectors"]) and all(
        c["state"] == "RUNNING" and all(t == "RUNNING" for t in c["tasks"])
        for c in status["connectors"])
    status["replication_behind"] = sum(r["behind"] for r in status["replication_lag"])
    return status


def _lab_load(ctx: ActionContext, *, dir: str = "lab",
              topics: list[str] | None = None, partitions: int = 3, records: int = 1000,
              seed: int = 7, transactions: int = 4,
              commit: list[str] | None = None, cluster: str = "primary",
              schema_registry: bool = False) -> dict[str, Any]:
    """Produce the deterministic DR workload to a lab cluster and commit groups
    (GROUP=POSITION); schema_registry: true writes Avro values through the cluster's
    registry."""
    from drctl.lab.lab import Lab
    from drctl.lab.registry import lab_values
    from drctl.lab.workload import WorkloadSpec, run_workload

    lab = Lab(Path(dir))
    state = lab.load_state()
    spec = WorkloadSpec(topics=tuple(topics or WorkloadSpec.topics), partitions=partitions,
                        records=records, seed=seed, transactions=transactions,
                        groups=tuple(commit) if commit is not None else WorkloadSpec.groups)
    encode = lab_values(state.registry_ports, cluster, lab.dir) if schema_registry else None
    with lab.clients(state, cluster) as clients:  # its group commits' child ends here
        return run_workload(clients, spec, notify=ctx.notify, encode=encode).summary()


def _lab_copy_registry(ctx: ActionContext, *, dir: str = "lab", source: str = "primary",
                       target: str = "secondary") -> dict[str, Any]:
    """Copy a lab cluster's schema registry into another's with its ids (Apicurio's export
    and import: what a registry that is empty, or already holds the same ids, takes whole)."""
    from drctl.lab.lab import Lab
    from drctl.lab.registry import copy_registry

    lab = Lab(Path(dir))
    return copy_registry(lab.load_state().registry_ports, source, target, lab.dir)


def _lab_fail(ctx: ActionContext, *, what: str, dir: str = "lab") -> dict[str, Any]:
    """Hard-kill a part of the lab: primary, secondary or replication."""
    from drctl.lab.lab import Lab

    return {"killed": Lab(Path(dir)).fail(what)}


def _lab_heal(ctx: ActionContext, *, what: str, dir: str = "lab") -> dict[str, Any]:
    """Restart a failed part of the lab on its existing data."""
    from drctl.lab.lab import Lab

    return {"healed": Lab(Path(dir)).heal(what, notify=ctx.notify)}


def _config_check(ctx: ActionContext, *, deadline: Seconds = Seconds(30.0)) -> dict[str, Any]:
    """Connect to every configured cluster; fails (exit 4) when one does not answer."""
    from drctl.errors import Unreachable
    from drctl.kafka.clients import check_clusters

    config = ctx.config
    results, failures = check_clusters(config,
                                       config.retry.with_deadline(deadline))
    if failures:
        raise Unreachable(" ".join(f.message for f in failures))
    return {"clusters": results, "reachable": [c["cluster"] for c in results]}


def _status(ctx: ActionContext, *, deadline: Seconds = Seconds(5.0)) -> dict[str, Any]:
    """Clusters, replication and lag, open failovers and groups (`drctl status`)."""
    from drctl.context import OpsContext
    from drctl.ops.steps.flow_status import collect_status

    with OpsContext.from_config(ctx.config) as ops:
        st = collect_status(ops, deadline)
    st["open_failover_count"] = len(st["open_failovers"])
    # A check on this result that does not hold while a cluster did not answer is unknown
    # (exit 4), not "did not hold" (kinds/check.py).
    st["unreachable"] = [n for n, c in st["clusters"].items() if not c["reachable"]]
    return st


def _check(ctx: ActionContext, *, topics: str = ".*", groups: str = ".*",
           app: str | None = None, stale_after: Seconds = Seconds(300.0),
           transaction_age: Seconds | None = None) -> dict[str, Any]:
    """Readiness of the flow (`drctl check`): fails with the findings when a failover would
    not work now (exit 3), or when drctl could not look (exit 4)."""
    from drctl.context import OpsContext
    from drctl.errors import CheckFailed, ExitStatus, Unreachable
    from drctl.findings import Severity
    from drctl.readiness.check import CheckOptions, run_check

    with OpsContext.from_config(ctx.config, ctx.notify, scope=ctx.config.scope(app)) as ops:
        result = run_check(ops, CheckOptions(topics=topics, groups=groups,
                                             stale_after_s=stale_after,
                                             transaction_age_s=transaction_age))
    data = result.as_dict()
    if result.exit_status:
        shown = [f for f in data["findings"] if f["severity"] != Severity.NOTE]
        lines = "; ".join(f"{f['object']}: {f['difference']}" for f in shown[:5])
        error = Unreachable if result.exit_status == ExitStatus.UNREACHABLE else CheckFailed
        raise error(f"Not ready: {lines}" + (f" (and {len(shown) - 5} more)"
                                             if len(shown) > 5 else ""),
                    "; ".join(f["fix"] for f in shown[:3]))
    return data


def _translate_offsets(ctx: ActionContext, *, source: str | None = None,
                       target: str | None = None, groups: str = ".*", app: str | None = None,
                       method: TranslateMethod = TranslateMethod.AUTO, yes: bool = False,
                       allow_rewind: bool = False) -> dict[str, Any]:
    """Translate consumer-group offsets between clusters (`drctl translate-offsets`); with
    yes: true, commit them (`--yes`), else only compute them (`--dry-run`)."""
    from drctl.context import OpsContext
    from drctl.translate.engine import TranslateRequest, run_translation

    config = ctx.config
    rep = config.require_replication()
    with OpsContext.from_config(config, ctx.notify, scope=config.scope(app)) as ops:
        report = run_translation(ops, TranslateRequest(
            source or rep.source, target or rep.target, groups, method, yes, allow_rewind))
    return report.runbook_summary()


def _guard(ctx: ActionContext, *, groups: str = ".*",
           deadline: Seconds = Seconds(30.0)) -> dict[str, Any]:
    """One round of `drctl guard --once`: exact offset snapshots on the target; on an
    active-active pair one round on each flow (`flows`: each flow's round; `positions`,
    `pending`, `written` added up)."""
    from drctl.context import OpsContext
    from drctl.errors import Unreachable
    from drctl.ops.steps.guard import run_guard

    config = ctx.config
    if config.topology is not None:
        from drctl.ops.active_active.guard import run_pair_guard
        from drctl.ops.active_active.pair import Pair

        by_flow = {flow: rounds[-1] for flow, rounds in run_pair_guard(
            Pair(config), notify=ctx.notify, deadline_s=deadline, groups=groups,
            once=True).items()}
        failed = [f"{flow}: {r.error}" for flow, r in sorted(by_flow.items()) if r.error]
        if failed:
            raise Unreachable(f"guard: {'; '.join(failed)}",
                              "Check both clusters and run it again.")
        flows = {flow: r.as_dict() for flow, r in sorted(by_flow.items())}
        return {"flows": flows, **{k: sum(r[k] for r in flows.values())
                                   for k in ("groups", "positions", "pending", "written")}}
    with OpsContext.from_config(config, ctx.notify) as ops:
        [result] = run_guard(ops, groups=groups, once=True, deadline_s=deadline)
    if result.error:
        raise Unreachable(f"guard: {result.error}", "Check both clusters and run it again.")
    return result.as_dict()


def _failover(ctx: ActionContext, *, planned: bool = False, groups: str = ".*",
              app: str | None = None, force: bool = False,
              method: TranslateMethod = TranslateMethod.AUTO,
              deadline: Seconds = Seconds(30.0),
              timeout: Seconds = Seconds(1800.0), region: str | None = None,
              allow_left_behind: bool = False) -> dict[str, Any]:
    """Fail over from the replication source to its target (`drctl failover --yes`); on an
    active-active pair the REGION to the other one (`drctl failover --region`). Groups or
    topics left behind fail the step (exit 3), unless ALLOW_LEFT_BEHIND: then its outputs
    name them (`left_behind_groups`, `refused`) for the runbook's own checks."""
    from drctl.context import OpsContext
    from drctl.ops.steps.failover_point import FailoverOptions

    config = ctx.config
    opts = FailoverOptions(planned=planned, groups=groups, method=method,
                           source_deadline_s=deadline, catch_up_deadline_s=timeout,
                           force=force)
    if config.topology is not None or region is not None:
        if app is not None:
            from drctl.errors import UsageError

            raise UsageError("app is for one flow; an active-active pair fails over by "
                             "region.")
        return _region_failover(ctx, region, opts, allow_left_behind)
    from drctl.ops.one_way.failover import run_failover

    with OpsContext.from_config(config, ctx.notify, scope=config.scope(app)) as ops:
        result = run_failover(ops, opts)
        summary = result.runbook_summary(result.write_reports(ops))
    if result.exit_status and not allow_left_behind:  # `drctl failover`'s verdict
        _left_behind(summary["left_behind"])
    return summary


def _left_behind(lines: list[str]) -> None:
    from drctl.errors import CheckFailed

    raise CheckFailed("Failover left topics or groups behind: " + " ".join(lines),
                      "Read the failover report; place or mirror what is named.")


def _region_failover(ctx: ActionContext, region: str | None, opts: FailoverOptions,
                     allow_left_behind: bool) -> dict[str, Any]:
    """`drctl failover --region REGION --yes`."""
    from drctl.errors import UsageError
    from drctl.ops.active_active.failover import run_region_failover
    from drctl.ops.active_active.pair import Pair

    pair = Pair(ctx.config)
    if region is None:
        raise UsageError("An active-active pair fails over by region: name the one to fail "
                         "over.", f"Pass region: {' or '.join(pair.regions)}.")
    region = pair.region(region)
    with pair.context(region, ctx.notify, opts.source_deadline_s) as ops:
        result = run_region_failover(pair, ops, region, opts)
        summary = result.runbook_summary(result.write_reports(ops))
    if result.exit_status and not allow_left_behind:
        _left_behind(summary["left_behind"] + summary["refused"])
    return summary


def _mm2_checkpointed(ctx: ActionContext, *, groups: str = ".*",
                      region: str | None = None) -> dict[str, Any]:
    """The GROUPS (a regex) MirrorMaker 2 has checkpointed on the target, the flow's (on an
    active-active pair: the flow out of REGION). Without guard they are all a failover with
    the source down can see."""
    import re

    from drctl.context import OpsContext
    from drctl.kafka.checkpoints import read_checkpoints

    config = ctx.config
    if config.topology is not None:
        from drctl.ops.active_active.pair import Pair

        pair = Pair(config)
        ops = pair.context(pair.region(_required(region, "region")), ctx.notify)
    else:
        ops = OpsContext.from_config(config, ctx.notify)
    with ops:
        topic = ops.require_kind().checkpoints_topic(ops.rep)
        found = read_checkpoints(ops.target, topic) if topic else {}
    wanted = re.compile(groups)
    return {"topic": topic,
            "groups": sorted({g for g, _t, _p in found if wanted.fullmatch(g)})}


def _failback(ctx: ActionContext, *, reconcile: ReconcileMode = ReconcileMode.COPY_SAFE,
              groups: str = ".*", incident: str | None = None, app: str | None = None,
              lookback: Seconds | None = None,
              scope: GapScope = GapScope.TAIL,
              timeout: Seconds = Seconds(1800.0), region: str | None = None,
              deadline: Seconds = Seconds(30.0),
              allow_waiting: bool = False) -> dict[str, Any]:
    """Fail back with --check-order (`drctl failback --yes`): gap analysis (Spark),
    reconcile, reverse replication from the failover point, offsets back. On an
    active-active pair the REGION's applications back to it (`drctl failback --region`):
    a run that waits for groups to stop or read on before it resumes a flow fails the step
    (exit 3), unless ALLOW_WAITING: then `done` is false and `waiting` names them."""
    from drctl.context import OpsContext

    config = ctx.config
    if config.topology is not None or region is not None:
        return _region_failback(ctx, region, incident, deadline, timeout, allow_waiting)
    from drctl.ops.one_way.failback import FailbackOptions, run_failback
    from drctl.ops.one_way.gap_step import gap_finder

    opts = FailbackOptions(reconcile=reconcile, groups=groups, incident=incident,
                           catch_up_deadline_s=timeout)
    with OpsContext.from_config(config, ctx.notify, scope=config.scope(app)) as ops:
        result = run_failback(ops, opts, gap_finder(lookback, scope=scope, timeout_s=timeout))
        summary = result.runbook_summary(result.write_reports(ops))
    if result.switch_back is not None and result.switch_back.exit_status:
        from drctl.errors import CheckFailed

        raise CheckFailed(f"Failback left groups unmoved: {summary['switch_back']}.",
                          "Stop their consumers on the target and run the step again.")
    if result.exit_status:
        from drctl.errors import CheckFailed

        raise CheckFailed("Failback finished with problems the report names (groups made "
                          "to skip records, partitions not placed at failover, or topics "
                          "never mirrored).", "Read the failback report.")
    return summary


def _region_failback(ctx: ActionContext, region: str | None, incident: str | None,
                     deadline: float, timeout: float, allow_waiting: bool) -> dict[str, Any]:
    """`drctl failback --region REGION --yes`."""
    from drctl.errors import CheckFailed
    from drctl.ops.active_active.failback import (
        FailbackWaits,
        RegionFailbackOptions,
        find_incident,
        run_region_failback,
    )
    from drctl.ops.active_active.pair import Pair

    pair = Pair(ctx.config)
    name, marker = find_incident(pair, region, ctx.notify, deadline, incident)
    opts = RegionFailbackOptions(region=name, deadline_s=deadline, timeout_s=timeout)
    with pair.context(name, ctx.notify, deadline) as ops, \
            pair.context(pair.other(name), ctx.notify, deadline) as back:
        try:
            result = run_region_failback(pair, ops, back, marker, opts)
        except FailbackWaits as waits:
            if not allow_waiting:
                raise
            # Nothing done yet: what a run that finishes would say, and who waits.
            return {"incident": marker.incident, "region": name, "to": pair.other(name),
                    "done": False, "waiting": waits.waiting, "moved": [], "not_moved": {},
                    "late_arrivals": None, "late_arrivals_summary": "not counted yet",
                    "audit": None, "skipped": 0, "redelivery_bound": {},
                    "mm2_checkpoints": None, "reports": []}
        summary = result.runbook_summary(result.write_reports(ops))
    if result.exit_status:
        raise CheckFailed(f"Failback of {marker.incident} left groups where they were: "
                          + "; ".join(f"{g}: {why}" for g, why in sorted(
                              result.not_moved.items()))
                          + (f"; the audit found {result.skipped} record(s) a group skipped"
                             if result.skipped else ""),
                          "Read the failback report; run the step again once what it names "
                          "is done.")
    return summary


def _reprotect(ctx: ActionContext, *, incident: str | None = None, app: str | None = None,
               force: bool = False,
               settle: Seconds = Seconds(10.0),
               timeout: Seconds = Seconds(900.0)) -> dict[str, Any]:
    """Return to protection after failback (`drctl reprotect --yes`): retire the reverse
    flow, restart forward replication from the cut-over, check it, close the incident."""
    from drctl.context import OpsContext
    from drctl.ops.one_way.reprotect import ReprotectOptions, run_reprotect

    config = ctx.config
    opts = ReprotectOptions(incident=incident, force=force, settle_s=settle, timeout_s=timeout)
    with OpsContext.from_config(config, ctx.notify, scope=config.scope(app)) as ops:
        result = run_reprotect(ops, opts)
        return result.runbook_summary(result.write_reports(ops))


# runbook/ledger.py's DEFAULT_TOPIC, which is imported only when a ledger step runs.
DEFAULT_LEDGER_TOPIC = "drill-ledger"


def _ledger(ctx: ActionContext, name: str, cluster: str | None = None) -> tuple[Any, Any]:
    """The ledger `name`, and `cluster`'s clients: the flow's source or target, or a region
    of an active-active pair."""
    from drctl.errors import UsageError
    from drctl.kafka.clients import ClusterClients
    from drctl.runbook.ledger import clusters_of, ledger_of

    config = ctx.config
    clusters = clusters_of(config)
    if cluster is not None and cluster not in clusters:
        raise UsageError(f"cluster '{cluster}' is none of the ledger's clusters "
                         f"({', '.join(clusters)})")
    clients = ClusterClients.for_cluster(config, cluster) if cluster else None
    return ledger_of(config, name), clients


def _ledger_produce(ctx: ActionContext, *, ledger: str, cluster: str, records: int = 100,
                    topic: str = DEFAULT_LEDGER_TOPIC,
                    region: str | None = None) -> dict[str, Any]:
    """Write numbered records to the topic a producer of the flow writes on CLUSTER (the
    failover topic on the target), every acknowledgement kept in the drill's ledger. On an
    active-active pair: REGION's producer, running on CLUSTER (its region, or the other
    after its failover)."""
    from drctl.runbook.ledger import produce, region_write_topic, write_topic

    book, clients = _ledger(ctx, ledger, cluster)
    config = ctx.config
    if config.topology is not None:
        from drctl.ops.active_active.pair import Pair

        where = region_write_topic(Pair(config), _required(region, "region"), cluster, topic)
    else:
        where = write_topic(config.require_replication(), cluster, topic)
    return produce(book, clients, where, records, region=region, notify=ctx.notify)


def _required(value: str | None, name: str) -> str:
    if value is None:
        from drctl.errors import UsageError

        raise UsageError(f"an active-active pair's ledger needs '{name}'")
    return value


def _ledger_consume(ctx: ActionContext, *, ledger: str, group: str, cluster: str,
                    share: float = 1.0, topic: str = DEFAULT_LEDGER_TOPIC,
                    region: str | None = None, local_only: bool = False,
                    alone: bool = False) -> dict[str, Any]:
    """GROUP reads the topic on CLUSTER (source: the topic and its reverse copies; target:
    its mirror and failover topic) from its committed positions — SHARE of what is there
    past them — each read kept in the ledger; then its positions are committed. On an
    active-active pair: a group of REGION's applications, running on CLUSTER; aggregate (the
    local topic and the other region's copy) or LOCAL_ONLY (its local topic at home; failed
    over, what failover placed it on); ALONE: CLUSTER's local topic alone."""
    from drctl.runbook.ledger import GroupKind, consume, pair_reads, side_topics

    book, clients = _ledger(ctx, ledger, cluster)
    config = ctx.config
    kind = None
    if config.topology is not None:
        from drctl.ops.active_active.pair import Pair

        kind = GroupKind(_required(region, "region"), local_only)
        topics = pair_reads(Pair(config), cluster, topic, kind, alone)
    else:
        topics = side_topics(config.require_replication(), cluster, topic)
    return consume(book, clients, group, topics, share=share, kind=kind, notify=ctx.notify)


def _ledger_verify(ctx: ActionContext, *, ledger: str, topic: str = DEFAULT_LEDGER_TOPIC,
                   deadline: Seconds = Seconds(120.0),
                   redelivery_allowed: Any = 0,
                   left_behind: list[str] | None = None) -> dict[str, Any]:
    """Count the ledger: every acknowledged record once on each side (lost, twice, per
    partition), every group's reads (lost, re-delivered, per partition), its re-deliveries
    against REDELIVERY_ALLOWED (what drctl stated: a number, a mapping of group to number,
    or a list of those added up — failover's and failback's `redelivery_bound`; 0 by
    default); LEFT_BEHIND: the groups failover named as not moved (named in the tally);
    `ok` and `verdict` say whether it passes (nothing acknowledged: it does not).
    Counts again until both sides hold every record once, or DEADLINE has passed."""
    from drctl.runbook.ledger import tally

    book, _ = _ledger(ctx, ledger)
    return tally(book, ctx.config, topic, redelivery_allowed=redelivery_allowed,
                 left_behind=left_behind or (), deadline_s=deadline,
                 notify=ctx.notify).as_dict()


def builtin_registry() -> Registry:
    """A registry with every action drctl ships."""
    registry = Registry(factory="drctl.runbook.actions:builtin_registry")
    registry.register("lab.up", _lab_up)
    registry.register("lab.down", _lab_down)
    registry.register("lab.status", _lab_status, read_only=True)
    registry.register("lab.load", _lab_load, renamed={"groups": "commit"})
    registry.register("lab.fail", _lab_fail)
    registry.register("lab.heal", _lab_heal)
    registry.register("lab.copy_registry", _lab_copy_registry)
    registry.register("config.check", _config_check, read_only=True, needs_config=True)
    registry.register("status", _status, read_only=True, needs_config=True)
    registry.register("check", _check, read_only=True, needs_config=True)
    registry.register("translate-offsets", _translate_offsets, needs_config=True,
                      renamed={"apply": "yes"})
    registry.register("guard", _guard, needs_config=True)
    registry.register("failover", _failover, needs_config=True,
                      renamed={"source_deadline": "deadline"})
    registry.register("failback", _failback, needs_config=True)
    registry.register("reprotect", _reprotect, needs_config=True)
    registry.register("mm2.checkpointed", _mm2_checkpointed, read_only=True,
                      needs_config=True)
    registry.register("ledger.produce", _ledger_produce, needs_config=True)
    registry.register("ledger.consume", _ledger_consume, needs_config=True)
    # Read-only for the clusters (it writes the tally beside the ledger): a check may wait
    # on it.
    registry.register("ledger.verify", _ledger_verify, read_only=True, needs_config=True)
    return registry
