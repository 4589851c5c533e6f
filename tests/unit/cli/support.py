"""Shared by the CLI tests: a config whose clusters answer nothing (port 9)."""

from __future__ import annotations

from pathlib import Path


def unreachable_config(tmp_path: Path) -> Path:
    cfg = tmp_path / "drctl.yaml"
    cfg.write_text("clusters:\n  a: {bootstrap.servers: '127.0.0.1:9'}\n"
                   "  b: {bootstrap.servers: '127.0.0.1:9'}\n"
                   "replication: {kind: mirrormaker2, source: a, target: b}\n"
                   f"state: {{dir: '{tmp_path / 'state'}'}}\n")
    return cfg
