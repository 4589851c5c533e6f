"""`drctl status`: clusters, replication, open failovers and groups at a glance."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import Any

from confluent_kafka import KafkaException

from drctl.config import Scope
from drctl.context import OpsContext
from drctl.errors import DrctlError, ExitStatus, Unreachable
from drctl.kafka.causes import Cause
from drctl.kafka.clients import ClusterUnreachable, describe_with_retry
from drctl.kafka.connect_rest import ConnectRejected
from drctl.kafka.groups import GroupListing, committed_offsets, group_listing, group_states
from drctl.kafka.records import ReadTimeout
from drctl.ops.steps.fence import open_risks
from drctl.ops.steps.reverse_copies import read_reverse_copies, reverse_copy_topics
from drctl.ops.steps.rpo import flow_rpo
from drctl.ops.steps.schemas import flow_parity, mirrored_topics, registries_configured
from drctl.ops.steps.side_by_side import waiting_for
from drctl.ops.steps.target_lag import target_lag
from drctl.progress import Notify
from drctl.state import FailoverMarker, IncidentPhase, MarkerStore
from drctl.translate.inventory import groups_reading, inventory_on_record, keep_inventory


def _late_copies_line(m: FailoverMarker) -> str | None:
    """What the replicator copied after F, when the incident had an unconfirmed stop."""
    if not m.stop_unconfirmed:
        return None
    late = m.late_copies
    if not late:
        return ("not counted yet: the stop was pending; `drctl failover` (re-run) or "
                "failback counts them once it is confirmed")
    if late.get("total") is None:
        return "not counted: " + " ".join(late.get("notes", []))
    stale = late.get("stale_keys") or []
    return (f"{late['total']} record(s) copied after the failover point"
            + (f"; {len(stale)} key(s) got an old value after a new one" if stale else ""))


def pending_stop_warnings(store: MarkerStore) -> list[str]:
    """Open incidents whose replication stop is pending, in `store` (the local state
    directory: cheap enough to check before every command)."""
    try:
        markers = store.open_markers()
    except DrctlError:
        return []
    return [f"Incident {m.incident}: replication {m.source} -> {m.target} was never confirmed "
            "stopped. "
            + ("It is fenced on the target (its writes are denied) until failback; stop it."
               if m.fence.get("state") == "fenced" else
               "It is NOT fenced: if the replicator comes back it copies stale data behind "
               "the new writes — stop it.")
            for m in markers if m.replication_stop == "pending"]


def collect_status(ctx: OpsContext, deadline_s: float = 5.0) -> dict[str, Any]:
    """Everything at once under one deadline: clusters and Connect are asked in parallel, and
    what has not answered by then is reported as not answering (never waited for); the
    context's notify hears each answer as it arrives."""
    notify = ctx.notify
    config = ctx.config
    policy = config.retry.with_deadline(deadline_s)
    rep = config.replication
    kind = ctx.require_kind() if rep is not None else None
    asks: dict[str, Callable[[], Any]] = {
        f"cluster:{name}": partial(describe_with_retry, ctx.clients(name), policy)
        for name in config.clusters}
    if rep is not None and kind is not None:
        asks["replication"] = partial(kind.component_states, rep)
        asks["forward"] = partial(kind.forward_state, rep)
    notify(f"Asking {', '.join(k.removeprefix('cluster:') for k in asks if k != 'forward')} "
           "in parallel "
           f"(deadline {deadline_s:g} s)")
    # The forward state comes from the same Connect worker as the connectors' states:
    # said once, by the "replication" answer.
    answers = _ask_in_parallel(asks, deadline_s, notify, quiet=("forward",))

    clusters: dict[str, dict[str, Any]] = {}
    for name in config.clusters:
        info = answers[f"cluster:{name}"]
        if isinstance(info, BaseException):
            message = info.message if isinstance(info, DrctlError) else str(info)
            # The cause alone too, in words: the table's cell (the message says it all).
            cause = info.cause if isinstance(info, ClusterUnreachable) else (
                Cause.TIMEOUT if isinstance(info, TimeoutError) else Cause.NO_ANSWER)
            clusters[name] = {"reachable": False, "error": message, "cause": str(cause)}
        else:
            clusters[name] = {"reachable": True, "cluster_id": info.cluster_id,
                              "brokers": info.broker_count, "rtt_ms": round(info.rtt_ms, 1)}
    # Each cluster's groups listed once, both at once: the inventory and the groups below
    # share the answer. A listing waits LIST_PAUSE_S between the answers it compares: it
    # runs while the replication's state is read, and is waited for where it is needed.
    listings_of = _group_listings(ctx, [n for n, c in clusters.items() if c["reachable"]])
    replication: dict[str, Any] = {}
    markers: list[dict[str, Any]] = []
    markers_from = "local state directory"
    if rep is not None and kind is not None:
        states = answers["replication"]
        refused = states if isinstance(states, ConnectRejected) else None
        replication = {"kind": rep.kind, "source": rep.source, "target": rep.target,
                       "connectors": ({c: "REFUSED-DRCTL" if refused else "NO ANSWER"
                                       for c in rep.connect.connectors}
                                      if isinstance(states, BaseException) else states),
                       "lag": None}
        if refused is not None:
            # Credentials or TLS: the config is wrong, which only the operator can fix.
            replication["refused"] = {"message": refused.message, "hint": refused.hint}
        source_up = clusters[rep.source]["reachable"]
        lag_error = None
        # The lag is read from the replicator's stored positions: a controller that gave no
        # answer within the deadline is not asked again after it (status never waits twice).
        if source_up and isinstance(states, BaseException):
            lag_error = (f"not read: {rep.kind}'s controller did not answer within "
                         f"{deadline_s:g} s")
        elif source_up:
            try:
                replication["lag"] = target_lag(ctx)
            except (DrctlError, ReadTimeout, KafkaException) as exc:
                replication["lag"] = None
                lag_error = exc.message if isinstance(exc, DrctlError) else str(exc)
        if clusters[rep.target]["reachable"]:
            # The RPO now, per partition; from MirrorMaker 2's heartbeats with the source gone.
            replication["rpo"] = flow_rpo(
                ctx.clients(rep.source) if source_up else None, ctx.clients(rep.target),
                rep.source_alias, replication["lag"], int(time.time() * 1000),
                lag_error=lag_error).as_dict()
        if not isinstance(states, BaseException):  # Connect answered: read its settings
            try:
                replication["translation_costs"] = kind.translation_costs(rep)
            except DrctlError as exc:  # it stopped answering meanwhile: unknown
                replication["translation_costs"] = {"lines": [f"unknown: {exc.message}"]}
        if clusters[rep.source]["reachable"] and clusters[rep.target]["reachable"]:
            # What a failover with the source gone names if it has no position for it.
            replication["inventory"] = keep_inventory(
                config, ctx.clients(rep.source), ctx.clients(rep.target),
                listing=listings_of()[rep.source]).as_dict()
        else:
            replication["inventory"] = inventory_on_record(
                config, "not refreshed: source or target unreachable").as_dict()
        if source_up and not rep.names_kept:
            replication["reverse_copies"] = _reverse_copies(ctx, deadline_s)
        # The marker topic lives on the target. With the target down the local copy is all
        # drctl sees — not all there is: another machine's incident is on the target only.
        target_up = clusters[rep.target]["reachable"]
        opened: list[FailoverMarker] = []
        if target_up:
            markers_from = f"state topic on {rep.target} and the local state directory"
        try:
            opened = ctx.markers(rep.target if target_up else None).open_markers()
            if not target_up:
                raise Unreachable(f"the state topic {config.state.topic} is on "
                                  f"'{rep.target}', which did not answer; the local state "
                                  f"directory lists {len(opened)} open incident(s)")
        except Unreachable as exc:
            markers_from = f"unknown: {exc.message}"
            replication["markers_unreadable"] = exc.message
        for m in opened:
            markers.append({"incident": m.incident, "source": m.source, "target": m.target,
                            "created_at": m.created_at, "replication_stop": m.replication_stop,
                            "phase": m.phase.value,
                            "next_command": next_command(m),
                            "fence": m.fence, "open_risks": open_risks(m),
                            "late_copies": _late_copies_line(m),
                            "steps": list(m.steps)})
        if target_up and registries_configured(ctx):
            # Whether the ids in the mirrored records mean the same on the target's registry:
            # the newest record of each mirror partition (status is asked again and again;
            # check reads more).
            parity = flow_parity(ctx, mirrored_topics(ctx, source_up), source_up=False,
                                 per_partition=1)
            replication["schemas"] = None if parity is None else parity.as_dict()
        flow_opened = [m for m in opened if (m.source, m.target) == (rep.source, rep.target)]
        replication["protection"] = flow_protection(
            flow_opened, answers["forward"], replication["lag"], rep.connect.connectors)
        if config.applications:
            replication["applications"] = applications_protection(
                config.applications, flow_opened, answers["forward"], replication["lag"],
                rep.connect.connectors)
        if "markers_unreadable" in replication:
            replication["protection"] = {**replication["protection"], "state": "unknown",
                                         "why": "the incidents on record cannot be read"}
    groups: dict[str, dict[str, Any]] = {}
    listings = listings_of()
    for name, cluster in clusters.items():
        if not cluster["reachable"]:
            continue
        ids = [g for g in listings[name].groups if config.groups.matches(g)]
        states_of = group_states(ctx.clients(name), ids)
        groups[name] = {g: {"state": st.state, "members": st.members}
                        for g, st in sorted(states_of.items())}
    return {"clusters": clusters, "replication": replication, "open_failovers": markers,
            "markers_from": markers_from, "groups": groups}


def _group_listings(ctx: OpsContext, names: Sequence[str]
                    ) -> Callable[[], dict[str, GroupListing]]:
    """Each named cluster's consumer groups, listed in parallel in the background; the
    function returned waits for them (a failed listing raises there, as one listed alone
    does) and, the first time, says each group left out through the clients' notify."""
    pool = ThreadPoolExecutor(max_workers=max(1, len(names)), thread_name_prefix="status-groups")
    futures = {name: pool.submit(group_listing, ctx.clients(name)) for name in names}
    pool.shutdown(wait=False)  # its threads end with their listings
    gathered: dict[str, GroupListing] = {}

    def listings() -> dict[str, GroupListing]:
        if len(gathered) < len(futures):
            for name, future in futures.items():
                gathered[name] = future.result()
            for name, listing in gathered.items():
                clients = ctx.clients(name)
                if clients.notify is not None:
                    for line in listing.notes(clients):
                        clients.notify(line)
        return gathered
    return listings


def _reverse_copies(ctx: OpsContext, deadline_s: float) -> list[dict[str, Any]] | str:
    """The retired reverse flows' copies on the source and who reads them (the groups the
    inventory saw there); what went wrong in words when they could not be read."""
    rep = ctx.rep
    try:
        readers = groups_reading(ctx.config, reverse_copy_topics(rep, ctx.source))
        commits = committed_offsets(ctx.source, readers, deadline_s=deadline_s) if readers \
            else {}
        return [c.as_dict() for c in read_reverse_copies(rep, ctx.source, commits)]
    except (DrctlError, KafkaException) as exc:
        return f"not read: {_reason(exc)}"


@dataclass(frozen=True)
class FlowReading:
    """One flow read the cheap way (guard's metrics, each round): its lag, its protection and
    its open incidents. A read that failed is None with its error, never an empty value."""

    lag: list[dict[str, Any]] | None  # None: unknown (see lag_error) or not measurable
    lag_error: str | None
    protection: dict[str, Any]
    incident_ages_s: list[float] | None  # the flow's open incidents; None: unknown
    incidents_error: str | None
    read_ms: int  # when it was read (lag seconds are counted to it)

    def as_dict(self) -> dict[str, Any]:
        return {"lag": self.lag, "lag_error": self.lag_error,
                "protection": self.protection.get("state"),
                "open_incidents": (None if self.incident_ages_s is None
                                   else len(self.incident_ages_s)),
                "incidents_error": self.incidents_error}


def read_flow(ctx: OpsContext, deadline_s: float = 10.0) -> FlowReading:
    """The flow's lag, forward state and open incidents, asked in parallel under one deadline;
    each read that fails or does not answer in time is reported unknown with its error."""
    rep, kind = ctx.rep, ctx.require_kind()
    answers = _ask_in_parallel({
        "lag": partial(target_lag, ctx),
        "forward": partial(kind.forward_state, rep),
        "incidents": partial(ctx.markers(rep.target).open_markers, rep.source, rep.target),
    }, deadline_s)
    now_ms = int(time.time() * 1000)
    lag, lag_error = answers["lag"], None
    if isinstance(answers["lag"], BaseException):
        lag, lag_error = None, _reason(answers["lag"])
    opened, incidents_error = answers["incidents"], None
    if isinstance(answers["incidents"], BaseException):
        opened, incidents_error = None, _reason(answers["incidents"])
    protection = flow_protection(opened or [], answers["forward"], lag,
                                 rep.connect.connectors, now_ms)
    if opened is None:
        protection = {**protection, "state": "unknown",
                      "why": "the incidents on record cannot be read"}
    return FlowReading(lag, lag_error, protection,
                       None if opened is None else [m.age_s(now_ms / 1000) for m in opened],
                       incidents_error, now_ms)


def _reason(exc: BaseException) -> str:
    return exc.message if isinstance(exc, DrctlError) else f"{type(exc).__name__}: {exc}"


def next_command(marker: FailoverMarker) -> str:
    """What to run next for an open incident: its own next step, or the return of the
    incident its return waits for (ops/steps/side_by_side.py)."""
    held_by = waiting_for(marker)
    if held_by:
        return f"drctl reprotect --incident {held_by}"
    return f"{marker.phase.next_command} --incident {marker.incident}"


def flow_protection(opened: Sequence[FailoverMarker], forward: Any,
                    lag: Sequence[Mapping[str, Any]] | None,
                    components: Sequence[str], now_ms: int | None = None) -> dict[str, Any]:
    """Whether the flow protects its source now, in one word and the facts behind it:

    - `incident`: an incident of this flow is open (which step, what to run next); once it
      failed back the flow is `exposed` until the return to protection closes it;
    - `protected`: every forward component copies and the target lacks nothing the
      replicator has passed; the lag in records and in seconds (the RPO now: the age of the
      oldest source record the target lacks);
    - `exposed`: a component does not copy (stopped, paused, failed, missing), or the target
      lacks records the replicator passed without copying or retention deleted before they
      were copied (no waiting brings them); since the oldest record the target lacks, when
      one is known;
    - `unknown`: drctl cannot see the replicator (Connect not configured or unreachable).
    """
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    out: dict[str, Any] = {}
    if lag is not None:
        behind = sum(int(r["behind"]) for r in lag)
        oldest = [r["oldest_unreplicated_ms"] for r in lag
                  if r.get("oldest_unreplicated_ms") is not None]
        out["lag_records"] = behind
        # A missing record stamped in the future has no age to tell: unknown, never 0.
        out["lag_s"] = (0.0 if not oldest else None if min(oldest) > now_ms
                        else round((now_ms - min(oldest)) / 1000, 1))
        if oldest:
            out["oldest_unreplicated_ms"] = min(oldest)
    if opened:
        # A whole-flow incident says most of the flow (it holds the forward flow stopped).
        m = next((o for o in reversed(opened) if o.covers.whole), opened[-1])
        incident = {"incident": m.incident, "phase": m.phase.value,
                    "next_command": next_command(m)}
        scope = "" if m.covers.whole else f" ({m.covers.describe()})"
        if m.phase in (IncidentPhase.FAILED_BACK, IncidentPhase.REPROTECTING):
            # Failed back: the source serves again, and nothing copies it to the target.
            return {**out, **incident, "state": "exposed",
                    "why": f"incident {m.incident}{scope} failed back: "
                           + ("forward replication stays" if not scope else
                              "replication of its topics stays")
                           + " stopped until the return to protection"}
        return {**out, **incident, "state": "incident",
                "why": f"incident {m.incident}{scope} is {m.phase}"}
    lost = lost_partitions(lag)
    if lost:
        return {**out, "state": "exposed", "lost": lost,
                "why": "the target lacks records the replicator will not copy: "
                       + "; ".join(lost[:5]) + (f" (and {len(lost) - 5} more)"
                                                if len(lost) > 5 else "")}
    if isinstance(forward, BaseException) or not getattr(forward, "readable", False):
        why = ("no replication.connect configured: drctl cannot see the replicator"
               if not components else "Kafka Connect did not answer")
        return {**out, "state": "unknown", "why": why}
    idle = [n for n in components if n not in forward.copying]
    # MirrorMaker 2 runs a connector with no task while nothing matches its filters (no
    # topic or group to copy yet): with nothing left to copy, that is not exposure.
    waiting = [n for n in idle if lag is not None and out.get("lag_records") == 0
               and forward.components.get(n) == "RUNNING with no tasks"]
    idle = [n for n in idle if n not in waiting]
    if idle:
        return {**out, "state": "exposed",
                "why": f"not copying: {forward.describe(idle)}"}
    why = f"copying: {', '.join(forward.copying) or 'nothing yet'}"
    if waiting:
        why += f"; nothing to copy yet: {', '.join(waiting)} (RUNNING, no task)"
    return {**out, "state": "protected", "why": why}


def applications_protection(applications: Mapping[str, Scope],
                            opened: Sequence[FailoverMarker], forward: Any,
                            lag: Sequence[Mapping[str, Any]] | None,
                            components: Sequence[str], now_ms: int | None = None
                            ) -> dict[str, dict[str, Any]]:
    """Per configured application, what `flow_protection` says of the flow, told of its own
    topics and incidents: in its own incident (or the whole flow's) it is `incident` or, once
    failed back, `exposed`; otherwise the flow's state with the lag (and RPO, in seconds) of
    its topics only."""
    whole = [m for m in opened if m.covers.whole]
    out: dict[str, dict[str, Any]] = {}
    for name, scope in sorted(applications.items()):
        # Its own incidents, and any other whose topics are its (a one-off scope, the
        # whole flow); a whole-flow incident whose topics are not known yet covers all.
        mine = [m for m in opened if m.covers.name == name
                or any(scope.covers_topic(t) for t in m.topics)] \
            or [m for m in whole if not m.topics]
        rows = None if lag is None else [r for r in lag if scope.covers_topic(r["topic"])]
        state = flow_protection(mine, forward, rows, components, now_ms)
        out[name] = {**state, "topics": [r["topic"] for r in rows or []]}
    return out


def lost_partitions(lag: Sequence[Mapping[str, Any]] | None) -> list[str]:
    """Per partition of the lag rows (ops/steps/target_lag.py) whose missing records no waiting
    brings, one line: what the replicator passed over, what retention deleted first."""
    out = []
    for row in lag or ():
        for part in row.get("by_partition", []):
            said = []
            if part.get("missing"):
                said.append(f"{part['missing']} record(s) passed over from offset "
                            f"{part['missing_from']}")
            if part.get("deleted"):
                said.append(f"up to {part['deleted']} offset(s) deleted by retention before "
                            "they were copied")
            if said:
                out.append(f"{row['topic']}-{part['partition']}: {', '.join(said)}")
    return out


def status_verdict(status: dict[str, Any]) -> tuple[ExitStatus, str | None]:
    """The exit status `drctl status` owes its reader, and why when it is not 0: nothing seen
    is not "all well"."""
    clusters = status["clusters"]
    if clusters and not any(c["reachable"] for c in clusters.values()):
        return ExitStatus.UNREACHABLE, f"No cluster answered ({', '.join(clusters)})."
    unreadable = (status.get("replication") or {}).get("markers_unreadable")
    if unreadable:
        return ExitStatus.UNREACHABLE, f"Open incidents unknown: {unreadable}"
    refused = (status.get("replication") or {}).get("refused")
    if refused:
        return ExitStatus.USAGE, f"{refused['message']} {refused['hint'] or ''}".strip()
    pending = [m["incident"] for m in status["open_failovers"]
               if m["replication_stop"] == "pending"]
    risks = [r for m in status["open_failovers"] for r in m.get("open_risks", [])]
    if risks:
        return ExitStatus.CHECK_FAILED, " ".join(risks)
    if pending:
        return ExitStatus.CHECK_FAILED, (f"Replication stop pending for {', '.join(pending)} "
                                         "(fenced on the target): stop the replicator.")
    if status["open_failovers"]:
        nexts = "; ".join(f"{m['incident']} ({m['phase']}): `{m['next_command']}`"
                          for m in status["open_failovers"])
        return ExitStatus.CHECK_FAILED, (f"{len(status['open_failovers'])} open "
                                         f"incident(s): {nexts}.")
    protection = (status.get("replication") or {}).get("protection") or {}
    if protection.get("state") == "exposed":
        return ExitStatus.CHECK_FAILED, (f"Replication does not protect the source: "
                                         f"{protection['why']}.")
    return ExitStatus.SUCCESS, None


def _ask_in_parallel(asks: dict[str, Callable[[], Any]], deadline_s: float,
                     notify: Notify = lambda _: None, quiet: Sequence[str] = ()
                     ) -> dict[str, Any]:
    """Each callable's result, or the exception it raised, or TimeoutError when it had not
    answered by the deadline. Daemon threads: a hung endpoint never holds the process.
    Answers are announced from the calling thread, in the order they arrive."""
    arrived: queue.Queue[tuple[str, Any]] = queue.Queue()

    def run(key: str, call: Callable[[], Any]) -> None:
        try:
            value: Any = call()
        except Exception as exc:  # noqa: BLE001 - reported as that endpoint's answer
            value = exc
        arrived.put((key, value))

    started = time.monotonic()
    for key, call in asks.items():
        threading.Thread(target=run, args=(key, call), daemon=True,
                         name=f"status-{key}").start()
    # Grace beyond the deadline: the retry policy's own last attempt may end just after it.
    end = started + deadline_s + 1.0
    results: dict[str, Any] = {}
    while len(results) < len(asks):
        try:
            key, value = arrived.get(timeout=max(0.0, end - time.monotonic()))
        except queue.Empty:
            break
        results[key] = value
        if key in quiet:
            continue
        name = key.removeprefix("cluster:")
        took = time.monotonic() - started
        if isinstance(value, DrctlError):
            notify(value.message)  # names the cluster (or Connect), its address, the cause
        elif isinstance(value, BaseException):
            notify(f"{name}: no answer after {took:.1f} s ({value})")
        else:
            notify(f"{name}: answered in {took:.1f} s")
    for key in asks.keys() - results.keys() - set(quiet):
        notify(f"{key.removeprefix('cluster:')}: no answer within {deadline_s:g} s")
    return {key: results.get(key, TimeoutError(f"no answer within {deadline_s:g} s"))
            for key in asks}
