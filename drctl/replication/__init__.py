"""Replication kinds: one module per kind (`replicator`, `mirrormaker2`, `identity`) behind
one small interface (`base.ReplicationKind`), registered in `drctl/replication_registry.py`.

Nothing outside this package compares kind names: it asks the kind object instead.
To add a kind, write one module with a `ReplicationKind` subclass and add one line to
`drctl.replication_registry._KINDS`.
"""
