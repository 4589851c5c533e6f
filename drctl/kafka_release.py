"""Which Apache Kafka release a component's version means, read as its vendor writes it.

Apache Kafka writes `3.9.1`, `4.1.0-rc2`, `3.9.0-SNAPSHOT`; distributions of it keep Kafka's
number first (Red Hat `3.7.0.redhat-00007`, Cloudera `3.4.1.7.1.9.0-387`). Confluent Platform
numbers its own releases and marks its Kafka builds `-ccs` (community) or `-ce` (enterprise):
a Connect worker of CP 7.6.1 answers `GET /` with `7.6.1-ccs`, which is Apache Kafka 3.6. Read
as Kafka 7 it made drctl think MirrorMaker 2 had dropped its old key names, as Kafka 4.0 did.

Confluent Platform to Apache Kafka: 3.0-3.2 = 0.10.0-0.10.2, 3.3 = 0.11.0, 4.0 = 1.0,
4.1 = 1.1, 5.0-5.5 = 2.0-2.5, 6.0 = 2.6, 6.1 = 2.7, 6.2 = 2.8, 7.x = 3.x (7.0 = 3.0 … 7.9 = 3.9),
8.x = 4.x (8.0 = 4.0).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# Apache Kafka's newest major release: a plain version above it is no Apache release, but a
# vendor's own numbering drctl cannot read (Confluent's without its -ccs/-ce mark).
NEWEST_APACHE_MAJOR = 4

# Confluent Platform (major, minor) -> Apache Kafka (major, minor), where CP's minor does not
# follow Kafka's; from CP 7 on it does, with the major four less.
_CONFLUENT = {(3, 0): (0, 10), (3, 1): (0, 10), (3, 2): (0, 10), (3, 3): (0, 11),
              (4, 0): (1, 0), (4, 1): (1, 1),
              **{(5, m): (2, m) for m in range(6)},
              (6, 0): (2, 6), (6, 1): (2, 7), (6, 2): (2, 8)}
_CONFLUENT_FROM, _CONFLUENT_UNTIL = 7, 8  # CP 7.x = Kafka 3.x … CP 8.x = Kafka 4.x

_VERSION = re.compile(r"\s*v?(\d+)\.(\d+)(?:\.\d+)*(.*?)\s*", re.S)
_CONFLUENT_BUILD = re.compile(r"-c(?:cs|e)(?![a-z])", re.I)


@dataclass(frozen=True, order=True)
class KafkaRelease:
    """An Apache Kafka release line (major, minor), and what the component wrote."""

    major: int
    minor: int
    written: str = field(compare=False, default="")
    # The vendor's own release when it numbers its own (Confluent Platform 7.6), else None.
    vendor: str | None = field(compare=False, default=None)

    def at_least(self, major: int, minor: int = 0) -> bool:
        return (self.major, self.minor) >= (major, minor)

    def __str__(self) -> str:
        kafka = f"Apache Kafka {self.major}.{self.minor}"
        return f"{self.vendor} = {kafka}" if self.vendor else kafka


def kafka_release(version: str | None) -> KafkaRelease | None:
    """The Apache Kafka release `version` (as a Kafka component reports it: Connect's `GET /`,
    a jar's name) is of; None when it cannot be told."""
    m = _VERSION.fullmatch(version or "")
    if m is None:
        return None
    major, minor, rest = int(m[1]), int(m[2]), m[3]
    if _CONFLUENT_BUILD.match(rest):
        kafka = _CONFLUENT.get((major, minor))
        if kafka is None and _CONFLUENT_FROM <= major <= _CONFLUENT_UNTIL:
            kafka = (major - 4, minor)
        if kafka is None:
            return None
        return KafkaRelease(*kafka, written=str(version),
                            vendor=f"Confluent Platform {major}.{minor}")
    if major > NEWEST_APACHE_MAJOR:
        return None
    return KafkaRelease(major, minor, written=str(version))
