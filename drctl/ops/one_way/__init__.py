"""The one-way topology: one flow, source -> target, the target standing by (docs/design.md).

The procedures, each a command:

- `failover.py`: preflight, stop replication, the failover point, group offsets, report;
- `failback.py`: the gap analysis with its order check, reconcile, reverse replication and
  the switch back;
- `reprotect.py`: the return to protection, forward replication resumed where the cut-over
  (`cut_over.py`) says.

Their own steps: `reverse.py` (the reverse flow from the failover point), `gap_step.py` and
`reconcile.py` (the gap and what is done with it), `switchback.py` (positions back on the
source), `late_copies.py` (what the replicator copied after F), `verify.py` (failback's
end-state check), `quiet.py` (no producer left on the failover topics), `copies.py` (how a
record and its copy are matched), `phases.py` (the phase clock), `scorecard.py` (objectives
judged); a procedure runs again when a cluster drops (drctl/rerun.py). What the active-active
topology uses too is in ops/steps.
"""
