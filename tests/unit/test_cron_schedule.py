"""The cron parser (robfig/cron ParseStandard rules and messages), its next-time walk (time
zones, daylight saving) and the CronJob controller's schedule-time arithmetic (missed runs,
starting deadlines), as Kubernetes computes them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from core.api.cron import CronError, load_zone, parse
from flow_controller.cronjob.sync import go_rfc3339, job_name
from flow_controller.cronjob.times import most_recent_schedule_time, next_schedule_delay


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


def walk(spec: str, start: datetime, count: int, zone: str = "UTC") -> list[datetime]:
    schedule = parse(spec, load_zone(zone))
    out, t = [], start
    for _ in range(count):
        nxt = schedule.next(t)
        assert nxt is not None
        out.append(nxt)
        t = nxt
    return out


@pytest.mark.parametrize(
    ("spec", "start", "expected"),
    [
        ("*/5 * * * *", utc(2026, 1, 1, 10, 2), [utc(2026, 1, 1, 10, 5), utc(2026, 1, 1, 10, 10)]),
        ("0 9 * * MON-FRI", utc(2026, 1, 2, 10), [utc(2026, 1, 5, 9), utc(2026, 1, 6, 9)]),
        ("30 2 1 jan,JUL *", utc(2026, 1, 1, 3), [utc(2026, 7, 1, 2, 30), utc(2027, 1, 1, 2, 30)]),
        ("@hourly", utc(2026, 1, 1, 10, 0, 1), [utc(2026, 1, 1, 11), utc(2026, 1, 1, 12)]),
        ("@daily", utc(2026, 1, 1, 10), [utc(2026, 1, 2), utc(2026, 1, 3)]),
        ("@midnight", utc(2026, 1, 1, 10), [utc(2026, 1, 2), utc(2026, 1, 3)]),
        ("@weekly", utc(2026, 1, 1), [utc(2026, 1, 4), utc(2026, 1, 11)]),  # Sundays
        ("@monthly", utc(2026, 1, 15), [utc(2026, 2, 1), utc(2026, 3, 1)]),
        ("@yearly", utc(2026, 1, 15), [utc(2027, 1, 1), utc(2028, 1, 1)]),
        ("@annually", utc(2026, 1, 15), [utc(2027, 1, 1), utc(2028, 1, 1)]),
        # "N/step" is N-max/step.
        ("10/20 * * * *", utc(2026, 1, 1, 0, 0), [utc(2026, 1, 1, 0, 10), utc(2026, 1, 1, 0, 30)]),
        # Both day fields restricted: either matches (the 13th, or a Friday).
        ("0 0 13 * 5", utc(2026, 2, 1), [utc(2026, 2, 6), utc(2026, 2, 13)]),
        # One of them `*`: both must match (every Friday).
        ("0 0 * * 5", utc(2026, 2, 1), [utc(2026, 2, 6), utc(2026, 2, 13)]),
        ("0 0 29 2 *", utc(2026, 1, 1), [utc(2028, 2, 29), utc(2032, 2, 29)]),
        ("@every 90m", utc(2026, 1, 1, 0, 0, 0), [utc(2026, 1, 1, 1, 30), utc(2026, 1, 1, 3)]),
    ],
)
def test_schedules_fire_where_kubernetes_fires_them(
    spec: str, start: datetime, expected: list[datetime]
) -> None:
    assert walk(spec, start, len(expected)) == expected


def test_a_date_that_never_comes_has_no_next_time() -> None:
    assert parse("0 0 30 2 *").next(utc(2026, 1, 1)) is None


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("", "empty spec string"),
        ("* * * *", "expected exactly 5 fields, found 4: [* * * *]"),
        ("* * * * * *", "expected exactly 5 fields, found 6: [* * * * * *]"),
        ("60 * * * *", "end of range (60) above maximum (59): 60"),
        ("* 24 * * *", "end of range (24) above maximum (23): 24"),
        ("* * 0 * *", "beginning of range (0) below minimum (1): 0"),
        ("* * * 13 *", "end of range (13) above maximum (12): 13"),
        ("* * * * 7", "end of range (7) above maximum (6): 7"),
        ("5-1 * * * *", "beginning of range (5) beyond end of range (1): 5-1"),
        ("*/0 * * * *", "step of range should be a positive number: */0"),
        ("1-2-3 * * * *", "too many hyphens: 1-2-3"),
        ("*/2/3 * * * *", "too many slashes: */2/3"),
        ("x * * * *", 'failed to parse int from x: strconv.Atoi: parsing "x": invalid syntax'),
        (
            "* * * foo *",
            'failed to parse int from foo: strconv.Atoi: parsing "foo": invalid syntax',
        ),
        ("@fortnightly", "unrecognized descriptor: @fortnightly"),
        ("TZ=Mars/Olympus * * * * *", "provided bad location Mars/Olympus: unknown time zone"),
    ],
)
def test_bad_schedules_are_refused_with_robfigs_message(spec: str, message: str) -> None:
    with pytest.raises(CronError) as caught:
        parse(spec)
    assert str(caught.value).startswith(message)


def test_names_are_case_insensitive_and_lists_combine() -> None:
    a = parse("0 0 * JAN-mar Sun,wed")
    b = parse("0 0 * 1-3 0,3")
    assert (a.month, a.dow) == (b.month, b.dow)


def test_time_zone_moves_the_instant() -> None:
    # 09:00 in Tokyo is 00:00 UTC.
    assert walk("0 9 * * *", utc(2026, 3, 1, 1), 1, "Asia/Tokyo") == [utc(2026, 3, 2, 0)]


def test_spring_forward_skips_a_time_inside_the_gap() -> None:
    # New York 2026-03-08: 02:00 EST jumps to 03:00 EDT; 02:30 does not exist that day.
    times = walk("30 2 * * *", utc(2026, 3, 7, 12), 2, "America/New_York")
    ny = ZoneInfo("America/New_York")
    assert [t.astimezone(ny).replace(tzinfo=None) for t in times] == [
        datetime(2026, 3, 9, 2, 30),
        datetime(2026, 3, 10, 2, 30),
    ]


def test_fall_back_fires_twice_inside_the_repeated_hour() -> None:
    # New York 2026-11-01: 01:00-02:00 happens twice (EDT, then EST); robfig fires in both.
    times = walk("30 1 * * *", utc(2026, 10, 31, 12), 3, "America/New_York")
    assert times == [utc(2026, 11, 1, 5, 30), utc(2026, 11, 1, 6, 30), utc(2026, 11, 2, 6, 30)]


def test_midnight_after_a_dst_change_stays_midnight() -> None:
    times = walk("0 0 * * *", utc(2026, 3, 7, 12), 3, "America/New_York")
    ny = ZoneInfo("America/New_York")
    assert [t.astimezone(ny).hour for t in times] == [0, 0, 0]
    assert times[1] - times[0] == timedelta(hours=23)  # the short day


def test_unknown_zone() -> None:
    with pytest.raises(CronError, match="unknown time zone Nowhere/Land"):
        load_zone("Nowhere/Land")
    assert load_zone("") is UTC


# ----------------------------------------------------------------- schedule-time arithmetic

EVERY_5 = parse("*/5 * * * *")
CREATED = utc(2026, 1, 1, 10, 2)


def test_nothing_due_before_the_first_time() -> None:
    recent = most_recent_schedule_time(CREATED, None, None, utc(2026, 1, 1, 10, 4), EVERY_5)
    assert recent.most_recent is None and recent.missed == 0


def test_one_due() -> None:
    recent = most_recent_schedule_time(CREATED, None, None, utc(2026, 1, 1, 10, 7), EVERY_5)
    assert recent.most_recent == utc(2026, 1, 1, 10, 5)


def test_missed_runs_give_only_the_most_recent_and_their_count() -> None:
    now = utc(2026, 1, 1, 11, 1)
    recent = most_recent_schedule_time(CREATED, utc(2026, 1, 1, 10, 5), None, now, EVERY_5)
    assert recent.most_recent == utc(2026, 1, 1, 11, 0)
    assert recent.missed == 11  # 10:10 ... 11:00


def test_more_than_a_hundred_missed_are_counted() -> None:
    now = CREATED + timedelta(days=1)
    recent = most_recent_schedule_time(CREATED, None, None, now, EVERY_5)
    assert recent.missed > 100
    assert recent.most_recent == utc(2026, 1, 2, 10, 0)


def test_the_deadline_drops_times_too_old_to_start() -> None:
    now = utc(2026, 1, 1, 10, 6, 30)
    late = most_recent_schedule_time(CREATED, None, 60, now, EVERY_5)
    assert late.most_recent is None  # 10:05 was 90 s ago; the deadline is 60 s
    in_time = most_recent_schedule_time(CREATED, None, 120, now, EVERY_5)
    assert in_time.most_recent == utc(2026, 1, 1, 10, 5)


def test_the_deadline_bounds_the_search_after_a_long_outage() -> None:
    now = CREATED + timedelta(days=30)
    recent = most_recent_schedule_time(CREATED, None, 600, now, EVERY_5)
    assert recent.missed < 100  # no TooManyMissedTimes: only the last 10 minutes count
    assert recent.most_recent == utc(2026, 1, 31, 10, 0)


def test_requeue_is_the_next_time_plus_100ms() -> None:
    now = utc(2026, 1, 1, 10, 3)
    assert next_schedule_delay(CREATED, None, now, EVERY_5) == timedelta(minutes=2, seconds=0.1)
    # After running 10:05 at 10:05:01, the next look is 10:10:00.1.
    later = utc(2026, 1, 1, 10, 5, 1)
    delay = next_schedule_delay(CREATED, utc(2026, 1, 1, 10, 5), later, EVERY_5)
    assert later + delay == utc(2026, 1, 1, 10, 10) + timedelta(milliseconds=100)


def test_sub_second_schedules_are_refused() -> None:
    every_second = parse("@every 1s")
    now = CREATED + timedelta(seconds=5)
    # @every is at least 1 s, so this is the boundary: allowed.
    assert most_recent_schedule_time(CREATED, None, None, now, every_second).most_recent == now


def test_job_names_and_annotation_times() -> None:
    at = utc(2026, 1, 1, 10, 5)
    assert job_name("nightly", at) == f"nightly-{int(at.timestamp()) // 60}"
    assert job_name("nightly", at) == "nightly-29454365"
    assert go_rfc3339(at) == "2026-01-01T10:05:00Z"
    assert go_rfc3339(at.astimezone(ZoneInfo("Asia/Shanghai"))) == "2026-01-01T18:05:00+08:00"
