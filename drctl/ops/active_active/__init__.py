"""The active-active topology (docs/design.md §6, "Active-active"): MirrorMaker 2 both ways
between two clusters, each a region whose producers write its local topics (`orders`) and
whose aggregate consumers also read the other region's copies (`secondary.orders`).

Its procedures are its own, built from the steps both topologies share (ops/steps) — exact
translation (translate/engine.py), the failover point and the catch-up wait
(ops/steps/failover_point.py), guard's snapshots (ops/steps/guard.py), the audit
(ops/steps/audit.py), a flow's status (ops/steps/flow_status.py), the marker store
(state.py) — each run on one of the two flows, seen as a one-way config (`Config.for_flow`):

- `pair.py`: the two flows, the two regions and what a topic is in each (local, copy); the
  naming loop that is refused;
- `failover.py`: a region's failover (planned or with the region down);
- `failback.py`: its return, once the flows that feed each group's positions caught up, and
  the late arrivals named;
- `checkpoints.py`: what MirrorMaker 2's own checkpoints would have given each group;
- `status.py`: both flows, and where each region's applications run;
- `subscriptions.py`: aggregate subscriptions that miss a topic or over-match, which
  `drctl check` of a pair (readiness/pair.py) adds to each flow's readiness.
"""
