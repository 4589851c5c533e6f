"""For benchmarks only: `DRCTL_REQUEST_COUNT=FILE` makes every Kafka client drctl builds count
the requests it sends, and writes the process's totals to FILE (JSON) when it exits. Off by
default: nothing is counted and no statistics are asked of librdkafka.

The counts are librdkafka's own statistics (per broker connection: requests sent, in all and by
type), emitted every INTERVAL_MS while a client lives and served when it is polled; each
client's latest figures are kept, and at exit the clients still open are polled once more
after one interval. Requests of a client's last interval before it was closed are not counted.
librdkafka counts an admin client as a producer and does not itemize a producer's group-offset
requests: an admin client's OffsetFetch and OffsetCommit requests are counted together, as
what its total has beyond the requests it itemizes (UNITEMIZED).
"""

from __future__ import annotations

import atexit
import json
import os
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

ENV = "DRCTL_REQUEST_COUNT"
INTERVAL_MS = 100
UNITEMIZED = "OffsetFetch+OffsetCommit"


class RequestCount:
    """Requests sent per client (its latest statistics), summed by type at exit."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._by_client: dict[str, dict[str, int]] = {}
        self._clients: list[Any] = []  # polled at exit for their last statistics

    def record(self, stats: str) -> None:
        """librdkafka's `stats_cb`: its JSON statistics, cumulative since the client began."""
        data = json.loads(stats)
        sent: Counter[str] = Counter()
        for broker in (data.get("brokers") or {}).values():
            itemized = {api: n for api, n in (broker.get("req") or {}).items() if n}
            sent.update(itemized)
            sent[UNITEMIZED] += int(broker.get("tx") or 0) - sum(itemized.values())
        with self._lock:
            self._by_client[str(data.get("name"))] = dict(sent)

    def watch(self, client: Any) -> None:
        self._clients.append(client)

    def totals(self) -> dict[str, Any]:
        with self._lock:
            by_api: Counter[str] = Counter()
            for sent in self._by_client.values():
                by_api.update(sent)
            by_api = +by_api  # without the zeros
            return {"requests": sum(by_api.values()), "clients": len(self._by_client),
                    "by_api": dict(sorted(by_api.items()))}

    def write(self) -> None:
        time.sleep(INTERVAL_MS / 1000 * 1.5)  # one more emission from the clients still open
        for client in self._clients:
            try:
                client.poll(0)
            except RuntimeError:  # a closed consumer: its last figures are in already
                pass
        self.path.write_text(json.dumps(self.totals(), indent=1))


_COUNT: RequestCount | None = None


def counting_properties() -> dict[str, Any]:
    """The client properties that count its requests, when DRCTL_REQUEST_COUNT is set."""
    global _COUNT
    path = os.environ.get(ENV)
    if not path:
        return {}
    if _COUNT is None:
        _COUNT = RequestCount(Path(path))
        atexit.register(_COUNT.write)
    return {"statistics.interval.ms": str(INTERVAL_MS), "stats_cb": _COUNT.record}


def watch(client: Any) -> None:
    """Keep `client` to poll at exit (when counting)."""
    if _COUNT is not None:
        _COUNT.watch(client)
