"""A Kafka component's version read as its vendor writes it (drctl/kafka_release.py):
Confluent Platform's own numbering (7.6.1-ccs is Apache Kafka 3.6), Apache's suffixes and
distributions that keep Kafka's number first."""

from __future__ import annotations

import pytest

from drctl.kafka_release import KafkaRelease, kafka_release


@pytest.mark.parametrize(("version", "kafka", "vendor"), [
    ("3.9.1", (3, 9), None),
    ("4.3.1", (4, 3), None),
    ("3.9.0-SNAPSHOT", (3, 9), None),
    ("4.1.0-rc2", (4, 1), None),
    ("0.10.2.1", (0, 10), None),
    ("3.7.0.redhat-00007", (3, 7), None),  # Red Hat's streams for Apache Kafka
    ("3.4.1.7.1.9.0-387", (3, 4), None),  # Cloudera: Kafka's number first
    # Confluent Platform: -ccs (community) and -ce (enterprise) builds.
    ("7.6.1-ccs", (3, 6), "Confluent Platform 7.6"),
    ("7.6.1-ce", (3, 6), "Confluent Platform 7.6"),
    ("7.0.0-ccs", (3, 0), "Confluent Platform 7.0"),
    ("7.9.2-CE", (3, 9), "Confluent Platform 7.9"),
    ("7.4.0-ce-SNAPSHOT", (3, 4), "Confluent Platform 7.4"),
    ("8.0.0-ccs", (4, 0), "Confluent Platform 8.0"),
    ("8.1.1-ce", (4, 1), "Confluent Platform 8.1"),
    ("6.2.4-ccs", (2, 8), "Confluent Platform 6.2"),
    ("6.1.0-ce", (2, 7), "Confluent Platform 6.1"),
    ("6.0.1-ccs", (2, 6), "Confluent Platform 6.0"),
    ("5.5.3-ccs", (2, 5), "Confluent Platform 5.5"),
    ("5.0.0-ccs", (2, 0), "Confluent Platform 5.0"),
    ("4.1.2-ccs", (1, 1), "Confluent Platform 4.1"),
    ("3.3.0-ccs", (0, 11), "Confluent Platform 3.3"),
])
def test_a_version_is_read_as_its_vendor_writes_it(version: str, kafka: tuple[int, int],
                                                   vendor: str | None) -> None:
    release = kafka_release(version)
    assert release is not None
    assert (release.major, release.minor, release.vendor) == (*kafka, vendor)
    assert release.written == version


@pytest.mark.parametrize("version", [
    "", "unknown", "7", "7.6.1",  # no Apache release 7, and no Confluent mark
    "9.0.0-ccs",  # a Confluent Platform drctl does not know the Kafka of
    "5.0.0",  # no Apache Kafka 5 yet
    "7.6.1-cc", "7.6.1-cex"])
def test_a_version_that_cannot_be_told_is_none(version: str) -> None:
    assert kafka_release(version) is None


def test_releases_compare_by_kafka_and_say_both_numberings() -> None:
    cp = kafka_release("7.6.1-ccs")
    assert cp is not None and cp < KafkaRelease(4, 0) and not cp.at_least(3, 9)
    assert cp.at_least(3, 6)
    assert str(cp) == "Confluent Platform 7.6 = Apache Kafka 3.6"
    assert str(kafka_release("3.9.1")) == "Apache Kafka 3.9"
