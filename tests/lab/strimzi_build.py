"""The Strimzi lab's binaries and CRDs, built before its tests need them: tests/conftest.py
runs this in the background as a run with lab tests begins (`python -m
tests.lab.strimzi_build`). The cache's locks make the lab's fixture wait for it."""

from __future__ import annotations

import sys
import time

from drctl.errors import DrctlError
from drctl.lab.kube import kube_binaries
from drctl.lab.strimzi_crds import strimzi_crds


def main() -> int:
    started = time.monotonic()
    try:
        kube_binaries(notify=lambda m: print(m, flush=True))
        print(f"kube-apiserver and etcd: {time.monotonic() - started:.0f} s", flush=True)
        strimzi_crds("v1")
    except DrctlError as exc:  # the fixture builds again and fails with the cause
        print(f"{exc.message}\n{exc.hint or ''}", flush=True)
        return 1
    print(f"done in {time.monotonic() - started:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
