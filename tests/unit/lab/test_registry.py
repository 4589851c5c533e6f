"""The lab's schema registries (drctl/lab/registry.py): their ports, the config `lab up
--schema-registry` writes, lab.json files from before them, the build cache, and what
`lab load --schema-registry` says without them."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import pytest

from drctl.config import load_config
from drctl.errors import LabError
from drctl.lab.lab import Lab, LabPorts, LabState
from drctl.lab.registry import (
    APICURIO_VERSION,
    LabRegistries,
    lab_values,
    registry_ports,
    resolve_registry,
)


def _state(tmp_path: Path, ports: dict[str, int]) -> LabState:
    return LabState(LabPorts(25100, 25102, 25104, 25105), "4.3.1", str(tmp_path / "lib"),
                    "maven", names_kept=True, cluster_ids={}, registry_ports=ports)


def test_the_config_names_each_clusters_registry(tmp_path: Path) -> None:
    config = load_config(Lab(tmp_path).write_config(_state(tmp_path, registry_ports(25180))))
    assert {c: r.url for c, r in config.schema_registries.items()} == {
        "primary": "http://127.0.0.1:25180/apis/ccompat/v7",
        "secondary": "http://127.0.0.1:25181/apis/ccompat/v7"}
    assert "schema_registry" not in config.clusters["primary"]
    plain = load_config(Lab(tmp_path).write_config(_state(tmp_path, {})))
    assert plain.schema_registries == {}


def test_lab_json_from_before_registries_loads_without_them(tmp_path: Path) -> None:
    lab = Lab(tmp_path)
    old = asdict(_state(tmp_path, {}))
    del old["registry_ports"]
    lab.state_file.write_text(json.dumps(old))
    assert lab.load_state().registry_ports == {}


def test_load_without_a_registry_says_what_to_run(tmp_path: Path) -> None:
    with pytest.raises(LabError) as missing:
        lab_values({"primary": 25180}, "secondary", tmp_path)
    assert "no schema registry for secondary" in missing.value.message
    assert missing.value.hint == "Run `drctl lab up --schema-registry` first."


def test_a_built_registry_comes_from_the_cache_without_maven(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DRCTL_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("PATH", "")  # no mvn: the cache must do
    home = tmp_path / "apicurio-registry" / APICURIO_VERSION
    home.mkdir(parents=True)
    (home / ".complete").write_text(APICURIO_VERSION)
    with pytest.raises(LabError) as empty:
        resolve_registry()
    assert "has no runner jar" in empty.value.message
    (home / "drctl-lab-registry-1-runner.jar").write_bytes(b"")
    assert resolve_registry() == home / "drctl-lab-registry-1-runner.jar"
    (home / ".complete").unlink()
    with pytest.raises(LabError) as no_maven:
        resolve_registry()
    assert "Maven (mvn) was not found" in no_maven.value.message


def test_registries_not_running_are_rows_that_say_so(tmp_path: Path) -> None:
    registries = LabRegistries(tmp_path)
    rows = registries.rows(registry_ports(25180))
    assert [(r["name"], r["running"], r["port"]) for r in rows] == [
        ("registry-primary", False, 25180), ("registry-secondary", False, 25181)]
    assert registries.down() == []
