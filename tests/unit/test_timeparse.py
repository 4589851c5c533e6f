"""Times and durations as every command and runbook reads them, and durations as people
read them (drctl/timeparse.py)."""

from __future__ import annotations

from typing import Any

import pytest

from drctl.errors import UsageError
from drctl.timeparse import format_duration, parse_duration, parse_time_ms


def test_runbook_durations() -> None:
    assert [parse_duration(v) for v in (5, 2.5, "500ms", "5s", "2m", "1h")] == \
        [5, 2.5, 0.5, 5, 120, 3600]
    for bad in ("soon", -1, True, "5 days"):
        with pytest.raises(ValueError):
            parse_duration(bad)


def test_gap_option_durations_and_times() -> None:
    assert parse_duration("90s") == 90
    assert parse_duration("6h") == 6 * 3600
    assert parse_duration("1.5m") == 90
    assert parse_duration("30") == 30
    assert parse_time_ms("1700000000000", "--since") == 1_700_000_000_000
    assert parse_time_ms("2023-11-14T22:13:20Z", "--since") == 1_700_000_000_000
    assert parse_time_ms("2023-11-14T23:13:20+01:00", "--since") == 1_700_000_000_000
    with pytest.raises(ValueError):
        parse_duration("soon")
    with pytest.raises(UsageError):
        parse_time_ms("yesterday", "--since")


def test_dump_option_times() -> None:
    assert parse_time_ms("1714564800000", "--since") == 1714564800000
    assert parse_time_ms("2024-05-01T12:00:00Z", "--since") == 1714564800000
    assert parse_time_ms("2024-05-01T14:00:00+02:00", "--since") == 1714564800000
    assert parse_time_ms("2024-05-01 12:00:00", "--since") == 1714564800000  # UTC when naive
    with pytest.raises(UsageError, match="--until 'yesterday'"):
        parse_time_ms("yesterday", "--until")


@pytest.mark.parametrize(("text", "ms"), [
    ("250ms", 250), ("90s", 90_000), ("1.5m", 90_000), ("6h", 21_600_000),
    ("2d", 172_800_000), ("1w", 604_800_000),
    ("30", 30_000),  # a bare number is seconds
    (" 2 h ", 7_200_000), ("0.5s", 500),
])
def test_every_duration_unit(text: str, ms: int) -> None:
    assert parse_duration(text) == ms / 1000


@pytest.mark.parametrize("value", [0, 0.25, 7, 3600.5])
def test_runbook_durations_may_be_plain_numbers_of_seconds(value: float) -> None:
    assert parse_duration(value) == value


@pytest.mark.parametrize("text", ["", "soon", "-5s", "5 days", "5sec", "1.s", ".5s", "5s5"])
def test_durations_that_cannot_be_read(text: str) -> None:
    with pytest.raises(ValueError, match="expected a duration such as 5s, 500ms or 2m"):
        parse_duration(text)


@pytest.mark.parametrize(("value", "message"), [
    (True, "expected a duration such as 5s or 2m, got True"),
    (-1, "a duration cannot be negative, got -1"),
    (None, "expected a duration such as 5s, 500ms or 2m, got None"),
])
def test_runbook_duration_errors(value: Any, message: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_duration(value)
    assert str(info.value) == message


@pytest.mark.parametrize(("text", "ms"), [
    ("1714564800000", 1_714_564_800_000),  # epoch milliseconds
    (" 1714564800000 ", 1_714_564_800_000),
    ("-1000", -1000),  # before 1970
    ("0", 0),
    ("2024-05-01T12:00:00Z", 1_714_564_800_000),  # ISO 8601, UTC
    ("2024-05-01T12:00:00+00:00", 1_714_564_800_000),
    ("2024-05-01T14:00:00+02:00", 1_714_564_800_000),  # another zone
    ("2024-05-01T12:00:00", 1_714_564_800_000),  # naive: UTC
    ("2024-05-01 12:00:00", 1_714_564_800_000),
    ("2024-05-01T12:00:00.250Z", 1_714_564_800_250),  # fractions of a second
    ("2024-05-01", 1_714_521_600_000),  # a date: its midnight, UTC
    ("20240501T120000Z", 1_714_564_800_000),  # ISO basic format
])
def test_every_time_syntax(text: str, ms: int) -> None:
    assert parse_time_ms(text, "--since") == ms


@pytest.mark.parametrize("text", ["yesterday", "", "12:00 tomorrow", "2024-13-01", "--5"])
def test_times_that_cannot_be_read(text: str) -> None:
    with pytest.raises(UsageError) as info:
        parse_time_ms(text, "--until")
    assert info.value.message == \
        f"--until {text.strip()!r} is neither an ISO time nor epoch milliseconds."
    assert info.value.hint == "Examples: 2024-05-01T12:00:00Z, 2024-05-01, 1714564800000."


@pytest.mark.parametrize(("seconds", "text"), [
    (0.5, "0.5s"), (45, "45s"), (60, "1m"), (750, "12m30s"), (1800, "30m"), (3600, "1h"),
    (7500, "2h05m")])
def test_durations_as_people_read_them(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text
