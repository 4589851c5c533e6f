"""`drctl guard` for an active-active pair: ops/steps/guard.py on each flow, side by side. The
flow out of a region keeps that region's groups' exact positions on the other region — on
its local topics' copies and on the originals of the copies it reads — so a failover with
the region down starts each group where it was (`snapshot`, the bound stated)."""

from __future__ import annotations

import threading
from collections.abc import Callable

from drctl.metrics import Metrics
from drctl.ops.active_active.failover import groups_regex
from drctl.ops.active_active.pair import Pair
from drctl.ops.steps.guard import RoundResult, run_guard
from drctl.progress import Notify


def run_pair_guard(pair: Pair, *, notify: Notify, deadline_s: float, groups: str = ".*",
                   interval_s: float = 5.0, once: bool = False,
                   stop: threading.Event | None = None, metrics: Metrics | None = None,
                   on_round: Callable[[str, RoundResult], None] | None = None
                   ) -> dict[str, list[RoundResult]]:
    """Rounds on both flows until `stop` (or one each with `once`); per flow ("primary ->
    secondary"), its rounds' results as `run_guard` returns them."""
    stop = stop or threading.Event()
    results: dict[str, list[RoundResult]] = {}
    failed: list[BaseException] = []

    def one(region: str) -> None:
        name = f"{region} -> {pair.other(region)}"
        try:
            with pair.context(region, lambda m: notify(f"[{name}] {m}"), deadline_s) as ctx:
                results[name] = run_guard(
                    ctx, groups=groups_regex(pair, region, groups), interval_s=interval_s,
                    once=once, stop=stop, metrics=metrics, deadline_s=deadline_s,
                    on_round=None if on_round is None else (lambda r: on_round(name, r)))
        except BaseException as exc:  # noqa: BLE001 - raised in the caller's thread
            failed.append(exc)
            stop.set()  # the other flow's guard stops too: a guard half running misleads

    threads = [threading.Thread(target=one, args=(region,), name=f"guard-{region}",
                                daemon=True) for region in pair.regions]
    for thread in threads:
        thread.start()
    for thread in threads:
        while thread.is_alive():
            thread.join(0.5)  # a signal handler in the main thread still runs
    if failed:
        raise failed[0]
    return results
