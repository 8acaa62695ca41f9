"""Text as Volcano's vcctl prints it: Go printf-style padded columns, ages and timestamps.

Volcano pads with `%-Ns` (left-aligned, never truncated, trailing blanks kept) rather than a
tabwriter; `pad` is that verb. Ages are apimachinery's `duration.HumanDuration`; dates and
timestamps are printed in local time, as Go's `metav1.Time` is after decoding.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from core.timestamps import parse_time

# What Go prints for a zero metav1.Time through `%s` (Time.String()).
ZERO_TIME = "0001-01-01 00:00:00 +0000 UTC"


def pad(value: object, width: int) -> str:
    """Go's `%-{width}s` / `%-{width}d`."""
    return f"{value!s:<{width}}"


def local(moment: datetime) -> datetime:
    return moment.astimezone() if moment.tzinfo else moment.replace(tzinfo=UTC).astimezone()


def go_date(text: str | None) -> str:
    """`CreationTimestamp.Format("2006-01-02")` in local time."""
    moment = parse_time(text)
    return local(moment).strftime("%Y-%m-%d") if moment else "0001-01-01"


def go_time(text: str | None) -> str:
    """A metav1.Time printed with `%s`: `2006-01-02 15:04:05 -0700 MST` in local time."""
    moment = parse_time(text)
    if moment is None:
        return ZERO_TIME
    moment = local(moment)
    return moment.strftime("%Y-%m-%d %H:%M:%S %z ") + (moment.tzname() or "")


def human_duration(seconds: float) -> str:
    """apimachinery's duration.HumanDuration."""
    whole = int(seconds)
    if whole < -1:
        return "<invalid>"
    if whole < 0:
        return "0s"
    if whole < 60 * 2:
        return f"{whole}s"
    minutes = whole // 60
    if minutes < 10:
        rest = whole % 60
        return f"{minutes}m" if rest == 0 else f"{minutes}m{rest}s"
    if minutes < 60 * 3:
        return f"{minutes}m"
    hours = whole // 3600
    if hours < 8:
        rest = minutes % 60
        return f"{hours}h" if rest == 0 else f"{hours}h{rest}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        rest = hours % 24
        return f"{hours // 24}d" if rest == 0 else f"{hours // 24}d{rest}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = (hours // 24) % 365
        years = hours // 24 // 365
        return f"{years}y" if days == 0 else f"{years}y{days}d"
    return f"{hours // 24 // 365}y"


def age(text: str | None, now: float | None = None) -> str:
    """`translateTimestampSince`: the age of a timestamp, `<unknown>` when it is unset."""
    moment = parse_time(text)
    if moment is None:
        return "<unknown>"
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return human_duration((time.time() if now is None else now) - moment.timestamp())


def meta(obj: dict[str, Any]) -> dict[str, Any]:
    return obj.get("metadata") or {}
