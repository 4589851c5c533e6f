"""The steps both topologies use (ops/one_way, ops/active_active), each run on one flow.

- `failover_point.py`: the failover point F and what leads to it: options, preflight, the
  planned catch-up wait, the ends at F, the failover topics, what is left behind;
- `flow_status.py`: one flow's status and its verdict (`drctl status`);
- `guard.py`: exact offset snapshots kept on the target while the source answers;
- `audit.py`: a failover's positions against where each group really was;
- `rpo.py`, `target_lag.py`, `catch_up.py`: the RPO in seconds, what the target lacks, how
  far a flow is from caught up;
- `scope.py`, `side_by_side.py`: an incident's scope, and which incidents of one flow may be
  open at once (and what a step may do to what they share);
- `fence.py`: the replication fence when a stop is not confirmed;
- `schemas.py`: schema-id parity, sampled and refused;
- `reverse_copies.py`: the retired reverse flow's copies (status, check).

Nothing here imports ops/one_way or ops/active_active.
"""
