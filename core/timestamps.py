"""RFC 3339 timestamps as the Kubernetes API writes them (`Time`: `2024-05-01T10:00:00Z`,
`MicroTime`: with microseconds): one reader for every part of vulcan that reads them back."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any


def parse_time(text: Any) -> datetime | None:
    """An aware UTC datetime; None when absent or not a timestamp. One without an offset is
    taken as UTC (the API never writes one)."""
    if not isinstance(text, str) or not text:
        return None
    try:
        moment = datetime.fromisoformat(text)  # Python >= 3.11 reads "Z" and any precision
    except ValueError:
        return None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def epoch_seconds(text: Any) -> float | None:
    """`parse_time` as POSIX seconds."""
    moment = parse_time(text)
    return moment.timestamp() if moment is not None else None
