"""The one reader of the API's RFC 3339 timestamps (core.timestamps)."""

from __future__ import annotations

from datetime import UTC, datetime

from core.timestamps import epoch_seconds, parse_time


def test_time_and_micro_time_read_as_utc() -> None:
    assert parse_time("2026-01-02T03:04:05Z") == datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert epoch_seconds("1970-01-01T00:00:01.500000Z") == 1.5
    assert epoch_seconds("1970-01-01T01:00:01+01:00") == 1.0
    assert epoch_seconds("1970-01-01T00:00:02") == 2.0  # no offset: UTC, not local time


def test_absent_or_malformed_is_none() -> None:
    for text in (None, "", "yesterday", 17, {"time": "x"}):
        assert parse_time(text) is None
        assert epoch_seconds(text) is None
