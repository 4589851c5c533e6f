"""The config the dump tests share."""

from __future__ import annotations

CONFIG = {
    "clusters": {"dc1": {"bootstrap.servers": "127.0.0.1:1"},
                 "dc2": {"bootstrap.servers": "127.0.0.1:2"}},
    "replication": {"kind": "mirrormaker2", "source": "dc1", "target": "dc2",
                    "source_alias": "A", "target_alias": "B"},
}
