"""The registry of replication kinds (drctl/replication_registry.py): exactly three,
and a new kind is one module and one registration line."""

from __future__ import annotations

from pathlib import Path

import drctl
from drctl.gap.plan import IDENTITY
from drctl.replication.base import ReplicationKind, kind_named
from drctl.replication_registry import KIND_NAMES


def test_registry_lists_exactly_the_three_kinds() -> None:
    assert KIND_NAMES == ("replicator", "mirrormaker2", "identity")
    for name in KIND_NAMES:
        assert isinstance(kind_named(name), ReplicationKind)


_NEW_KIND = '''"""A kind added for the test: an offset-preserving link driven by its own API."""
from drctl.replication.identity import Identity


class ClusterLink(Identity):
    def component_states(self, rep):
        return {"link": "ACTIVE"}
'''


_PROBE = '''
import os
import drctl
assert drctl.__file__.startswith(os.environ["PYTHONPATH"]), drctl.__file__
from drctl.config import parse_config
from drctl.gap.planner import gap_kind
from drctl.replication.base import kind_for
from drctl.replication_registry import KIND_NAMES
config = parse_config({"clusters": {"a": {"bootstrap.servers": "x"},
                                    "b": {"bootstrap.servers": "y"}},
                       "replication": {"kind": "clusterlink", "source": "a", "target": "b"}})
kind = kind_for(config.require_replication())
print(type(kind).__name__, KIND_NAMES[-1], gap_kind(kind),
      kind.auto_translate_method(source_up=False, forward=True),
      kind.component_states(config.require_replication())["link"])
'''


def test_a_new_kind_is_one_module_and_one_registration_line(tmp_path: Path) -> None:
    import shutil
    import subprocess
    import sys

    package = Path(drctl.__file__).parent
    copy = tmp_path / "drctl"
    shutil.copytree(package, copy, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "replication" / "clusterlink.py").write_text(_NEW_KIND)  # the one module
    registry = copy / "replication_registry.py"
    text = registry.read_text()
    last = ('    "identity": KindEntry("drctl.replication.identity:Identity", '
            'keeps_topic_names=True),\n')
    assert last in text
    registry.write_text(text.replace(last, last + '    "clusterlink": KindEntry('
                                     '"drctl.replication.clusterlink:ClusterLink", '
                                     'keeps_topic_names=True),\n'))  # the one line
    done = subprocess.run([sys.executable, "-c", _PROBE], cwd=tmp_path, capture_output=True,
                          text=True, env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"},
                          check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["ClusterLink", "clusterlink", IDENTITY, "identity", "ACTIVE"]
