"""Failover and failback procedures, one room per topology, on the steps they share.

- `one_way/`: the active/standby topology — one flow, source -> target, the target standing
  by. Its procedures are `failover.py`, `failback.py` and `reprotect.py` (the return to
  protection); the rest of the room are their own steps (the reverse flow, the gap and its
  reconciliation, the switch-back positions, the cut-over, the phase clock, the scorecard).
- `active_active/`: MirrorMaker 2 both ways between two regions (docs/design.md §6,
  "Active-active"); a region's `failover.py` and `failback.py`, the pair's guard and status,
  each run on one of the two flows seen as a one-way config (`Config.for_flow`).
- `steps/`: what both topologies use, each on one flow: the failover point and what leads to
  it (`failover_point.py`), a flow's status (`flow_status.py`), guard's snapshots (`guard.py`),
  the audit of a failover's positions, the RPO and what the target lacks, the incident scope
  and which incidents may be open side by side, the fence, schema-id parity.

Imports point down: a topology imports `steps/`, never the other topology; `steps/` imports
neither. The CLI and the runbook actions choose the topology.
"""
