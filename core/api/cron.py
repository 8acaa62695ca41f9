"""Cron schedules as Kubernetes' and Volcano's CronJobs read them (robfig/cron v3 `ParseStandard`).

Five fields (minute hour day-of-month month day-of-week), each a comma list of `*`, `?`, `n`,
`a-b`, with an optional `/step` (`n/step` means `n-max/step`); month and weekday names
(`jan`, `MON`); the descriptors `@yearly` `@annually` `@monthly` `@weekly` `@daily` `@midnight`
`@hourly` and `@every <duration>`. Errors are robfig's words, which the API server returns.

`Schedule.next(t)` follows robfig's `SpecSchedule.Next` step for step, including its daylight
saving behaviour, which CronJob users see: it walks wall-clock fields but advances hours and
minutes in real time, so a time inside a spring-forward gap does not fire that day and a time
inside a fall-back overlap fires twice (once per offset).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

STAR_BIT = 1 << 63

_MONTHS = {
    name: i + 1
    for i, name in enumerate(
        ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
    )
}
_DAYS = {name: i for i, name in enumerate(("sun", "mon", "tue", "wed", "thu", "fri", "sat"))}


@dataclass(frozen=True, slots=True)
class _Bounds:
    low: int
    high: int
    names: dict[str, int] | None = None


_MINUTE = _Bounds(0, 59)
_HOUR = _Bounds(0, 23)
_DOM = _Bounds(1, 31)
_MONTH = _Bounds(1, 12, _MONTHS)
_DOW = _Bounds(0, 6, _DAYS)

_DESCRIPTORS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_INT = re.compile(r"[+-]?[0-9]+")
_DURATION_PART = re.compile(r"([0-9]*(?:\.[0-9]*)?)(ns|us|µs|μs|ms|s|m|h)")
_UNIT_SECONDS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "μs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}


class CronError(ValueError):
    """An unparseable schedule; the message is robfig/cron's."""


def load_zone(name: str) -> tzinfo:
    """A tz database zone (Go's time.LoadLocation: "" and "UTC" are UTC, "Local" the process's
    zone, which for vulcan's controllers is UTC). Raises CronError with Go's message for an
    unknown name."""
    if name in ("", "UTC", "Local"):
        return UTC
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise CronError(f"unknown time zone {name}") from None


@dataclass(frozen=True, slots=True)
class Schedule:
    """A parsed schedule: bit sets per field (robfig's SpecSchedule), or a constant delay."""

    minute: int = 0
    hour: int = 0
    dom: int = 0
    month: int = 0
    dow: int = 0
    zone: tzinfo = UTC
    every: timedelta | None = None

    def next(self, after: datetime) -> datetime | None:
        """The first activation strictly after `after`, in UTC (None if there is none within
        five years, e.g. `0 0 30 2 *`). UTC so that differences and sums of the results are
        real time (Python's arithmetic on datetimes of one zone is wall-clock)."""
        if self.every is not None:
            start = after.astimezone(UTC)
            return start - timedelta(microseconds=start.microsecond) + self.every
        found = _next_spec(self, after)
        return None if found is None else found.astimezone(UTC)


def parse(spec: str, zone: tzinfo = UTC) -> Schedule:
    """robfig's ParseStandard. `zone` is the CronJob's timeZone (a TZ= prefix overrides it)."""
    if not spec:
        raise CronError("empty spec string")
    if spec.startswith("TZ=") or spec.startswith("CRON_TZ="):
        space, eq = spec.find(" "), spec.find("=")
        name = spec[eq + 1 : space] if space >= 0 else spec[eq + 1 :]
        try:
            zone = load_zone(name)
        except CronError as exc:
            raise CronError(f"provided bad location {name}: {exc}") from None
        spec = spec[space:].strip() if space >= 0 else ""
    if spec.startswith("@"):
        if spec.startswith("@every "):
            return Schedule(zone=zone, every=_every(spec[len("@every ") :]))
        if spec not in _DESCRIPTORS:
            raise CronError(f"unrecognized descriptor: {spec}")
        spec = _DESCRIPTORS[spec]
    fields = spec.split()
    if len(fields) != 5:
        raise CronError(f"expected exactly 5 fields, found {len(fields)}: [{' '.join(fields)}]")
    bounds = (_MINUTE, _HOUR, _DOM, _MONTH, _DOW)
    minute, hour, dom, month, dow = (
        _field(text, b) for text, b in zip(fields, bounds, strict=True)
    )
    return Schedule(minute, hour, dom, month, dow, zone)


def _every(text: str) -> timedelta:
    seconds = _go_duration_seconds(text)
    if seconds is None:
        raise CronError(f'failed to parse duration @every {text}: time: invalid duration "{text}"')
    # robfig: at least one second, and whole seconds.
    return timedelta(seconds=max(1, int(seconds)))


def _go_duration_seconds(text: str) -> float | None:
    body = text.lstrip("+-")
    if body == "0":
        return 0.0
    if not body:
        return None
    total, pos = 0.0, 0
    while pos < len(body):
        match = _DURATION_PART.match(body, pos)
        if match is None or match.group(1) in ("", "."):
            return None
        total += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        pos = match.end()
    return -total if text.startswith("-") else total


def _field(text: str, bounds: _Bounds) -> int:
    bits = 0
    for item in (part for part in text.split(",") if part):
        bits |= _range(item, bounds)
    return bits


def _range(expr: str, bounds: _Bounds) -> int:
    range_and_step = expr.split("/")
    low_and_high = range_and_step[0].split("-")
    single = len(low_and_high) == 1
    extra = 0
    if low_and_high[0] in ("*", "?"):
        start, end, extra = bounds.low, bounds.high, STAR_BIT
    else:
        start = _int_or_name(low_and_high[0], bounds.names)
        if len(low_and_high) == 1:
            end = start
        elif len(low_and_high) == 2:
            end = _int_or_name(low_and_high[1], bounds.names)
        else:
            raise CronError(f"too many hyphens: {expr}")
    if len(range_and_step) == 1:
        step = 1
    elif len(range_and_step) == 2:
        step = _must_int(range_and_step[1])
        if single:  # "N/step" means "N-max/step"
            end = bounds.high
        if step > 1:
            extra = 0
    else:
        raise CronError(f"too many slashes: {expr}")
    if start < bounds.low:
        raise CronError(f"beginning of range ({start}) below minimum ({bounds.low}): {expr}")
    if end > bounds.high:
        raise CronError(f"end of range ({end}) above maximum ({bounds.high}): {expr}")
    if start > end:
        raise CronError(f"beginning of range ({start}) beyond end of range ({end}): {expr}")
    if step == 0:
        raise CronError(f"step of range should be a positive number: {expr}")
    bits = 0
    for value in range(start, end + 1, step):
        bits |= 1 << value
    return bits | extra


def _int_or_name(expr: str, names: dict[str, int] | None) -> int:
    if names is not None and expr.lower() in names:
        return names[expr.lower()]
    return _must_int(expr)


def _must_int(expr: str) -> int:
    if not _INT.fullmatch(expr):
        raise CronError(
            f'failed to parse int from {expr}: strconv.Atoi: parsing "{expr}": invalid syntax'
        )
    number = int(expr)
    if number < 0:
        raise CronError(f"negative number ({number}) not allowed: {expr}")
    return number


# ------------------------------------------------------------------------ SpecSchedule.Next


def _add(t: datetime, delta: timedelta, zone: tzinfo) -> datetime:
    """Real-time addition (Go's Time.Add); Python's aware arithmetic is wall-clock."""
    return (t.astimezone(UTC) + delta).astimezone(zone)


def _date(year: int, month: int, day: int, hour: int, zone: tzinfo) -> datetime:
    """Go's time.Date with month/day overflow normalised (minutes and seconds zero)."""
    year, month = year + (month - 1) // 12, (month - 1) % 12 + 1
    wall = datetime(year, month, 1) + timedelta(days=day - 1, hours=hour)
    # Through UTC so a wall time inside a DST gap lands on a real instant.
    return wall.replace(tzinfo=zone).astimezone(UTC).astimezone(zone)


def _day_matches(s: Schedule, t: datetime) -> bool:
    dom_match = (1 << t.day) & s.dom > 0
    dow_match = (1 << ((t.weekday() + 1) % 7)) & s.dow > 0
    if s.dom & STAR_BIT or s.dow & STAR_BIT:
        return dom_match and dow_match
    return dom_match or dow_match


def _next_spec(s: Schedule, after: datetime) -> datetime | None:
    zone = s.zone
    t = after.astimezone(zone)
    t = _add(t, timedelta(seconds=1) - timedelta(microseconds=t.microsecond), zone)
    added = False
    year_limit = t.year + 5
    while True:  # robfig's WRAP label
        if t.year > year_limit:
            return None
        wrapped = False
        while not (1 << t.month) & s.month:
            if not added:
                added = True
                t = _date(t.year, t.month, 1, 0, zone)
            t = _date(t.year, t.month + 1, t.day, t.hour, zone)
            if t.month == 1:
                wrapped = True
                break
        if wrapped:
            continue
        while not _day_matches(s, t):
            if not added:
                added = True
                t = _date(t.year, t.month, t.day, 0, zone)
            t = _date(t.year, t.month, t.day + 1, t.hour, zone)
            # Midnight moved by a DST change: back to the day's start.
            if t.hour != 0:
                shift = 24 - t.hour if t.hour > 12 else -t.hour
                t = _add(t, timedelta(hours=shift), zone)
            if t.day == 1:
                wrapped = True
                break
        if wrapped:
            continue
        while not (1 << t.hour) & s.hour:
            if not added:
                added = True
                t = t.replace(minute=0, second=0, microsecond=0)
            t = _add(t, timedelta(hours=1), zone)
            if t.hour == 0:
                wrapped = True
                break
        if wrapped:
            continue
        while not (1 << t.minute) & s.minute:
            if not added:
                added = True
                t = t.replace(second=0, microsecond=0)
            t = _add(t, timedelta(minutes=1), zone)
            if t.minute == 0:
                wrapped = True
                break
        if wrapped:
            continue
        while t.second != 0:  # the standard parser's seconds field is always 0
            if not added:
                added = True
                t = t.replace(microsecond=0)
            t = _add(t, timedelta(seconds=1), zone)
            if t.second == 0:
                wrapped = True
                break
        if wrapped:
            continue
        return t
