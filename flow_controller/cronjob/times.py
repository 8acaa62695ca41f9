"""When a CronJob should run: Kubernetes' cronjob_controllerv2 utils (`mostRecentScheduleTime`,
`nextScheduleTime`, `nextScheduleTimeDuration`), which Volcano's controller copies.

Pure functions of the CronJob's creation time, `status.lastScheduleTime`,
`spec.startingDeadlineSeconds`, the parsed schedule and now: the unit tests drive them directly.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from core.api.cron import Schedule

MANY_MISSED = 100  # more missed starts than this: a TooManyMissedTimes warning
NEXT_SCHEDULE_DELTA = timedelta(milliseconds=100)  # Kubernetes' nextScheduleDelta


@dataclass(frozen=True, slots=True)
class Recent:
    earliest: datetime
    """Where the search started: lastScheduleTime, else creation (later of it and the deadline)."""
    most_recent: datetime | None
    """The latest schedule time in (earliest, now], None if there is none."""
    missed: int
    """How many schedule times fell in (earliest, now] (estimated as Kubernetes does)."""


def most_recent_schedule_time(
    created: datetime,
    last_scheduled: datetime | None,
    deadline_seconds: int | None,
    now: datetime,
    schedule: Schedule,
) -> Recent:
    """Kubernetes' mostRecentScheduleTime. Raises ValueError for a schedule firing more often
    than once a second (Kubernetes' words)."""
    earliest = last_scheduled if last_scheduled is not None else created
    if deadline_seconds is not None:
        earliest = max(earliest, now - timedelta(seconds=deadline_seconds))
    t1 = schedule.next(earliest)
    if t1 is None or now < t1:
        return Recent(earliest, None, 0)
    t2 = schedule.next(t1)
    if t2 is None or now < t2:
        return Recent(earliest, t1, 1)
    # Many schedule times passed: estimate how many from the interval of the first two, then
    # walk only the last few (an unevenly spaced schedule is walked from one interval earlier).
    between = round((t2 - t1).total_seconds())
    if between < 1:
        raise ValueError("time difference between two schedules is less than 1 second")
    elapsed = int((now - t1).total_seconds())
    missed = elapsed // between + 1
    most_recent: datetime | None = None
    t = schedule.next(t1 + timedelta(seconds=(missed - 2) * between))
    while t is not None and t <= now:
        most_recent = t
        t = schedule.next(t)
    return Recent(earliest, most_recent, missed)


def next_schedule_delay(
    created: datetime,
    last_scheduled: datetime | None,
    now: datetime,
    schedule: Schedule,
) -> timedelta | None:
    """How long until the next schedule time after the most recent one (plus Kubernetes' 100 ms),
    ignoring the deadline: when to look at the CronJob again. None if it never runs again."""
    try:
        recent = most_recent_schedule_time(created, last_scheduled, None, now, schedule)
    except ValueError:
        base = now
    else:
        if recent.most_recent is not None:
            base = recent.most_recent
        else:
            base = recent.earliest if recent.missed == 0 else now
    upcoming = schedule.next(base)
    if upcoming is None:
        return None
    return upcoming + NEXT_SCHEDULE_DELTA - now
