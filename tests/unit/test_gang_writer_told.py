"""extender.gang_writer: a waiting gang's pending members are told why (Volcano's
taskUnschedulable FailedScheduling) when the reason changes, not when only its live numbers move
(issue 31: those events were most of the soak's API writes)."""

from __future__ import annotations

from typing import Any

from core.records import PodGroupRecord
from extender.admissions import reason_shape
from extender.gang_writer import GangWriter
from extender.reason_flips import FLIP_WINDOW, ReasonFlips
from tests.unit.test_gang_status import pod, view


class Recorder:
    def __init__(self) -> None:
        self.notes: list[tuple[str, str, str]] = []
        self.important: list[str] = []  # the kinds of the events recorded as important

    def record(
        self, ref: dict[str, Any], type_: str, reason: str, note: str, *, important: bool = False
    ) -> None:
        self.notes.append((ref["name"], reason, note))
        if important:
            self.important.append(ref["kind"])


GROUP = PodGroupRecord({"metadata": {"name": "pg", "namespace": "ns"}, "spec": {"minMember": 2}})


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def told(reasons: list[str], clock: Clock | None = None, step: float = 0.0) -> list[str]:
    """The notes each pending member was given for the gang's successive reasons (`step`
    seconds apart)."""
    writer = GangWriter(None)
    clock = clock or Clock()
    writer.flips = ReasonFlips(clock=clock)
    recorder = Recorder()
    writer.recorder = recorder  # type: ignore[assignment]
    gang = view(2, {"pending": 2})
    for reason in reasons:
        writer.podgroup_status(GROUP, gang, False, reason)
        clock.now += step
    return [note for name, _, note in recorder.notes if name == "pending-0"]


SHARE = "gang ns/pg: waiting for admission: queue q over its share: holds cpu {}, deserves {}"


def test_only_numbers_moving_tells_the_members_nothing_new() -> None:
    notes = told([SHARE.format(8, "14750m"), SHARE.format(10, 15), SHARE.format(11, "15.5")])
    assert len(notes) == 1
    assert notes[0].endswith("holds cpu 8, deserves 14750m")


CAPABILITY = "gang ns/pg: waiting for admission: queue q would exceed its capability cpu 4"


def test_a_new_kind_of_reason_is_told() -> None:
    notes = told([SHARE.format(8, 14), CAPABILITY, SHARE.format(9, 14)], step=FLIP_WINDOW + 1)
    assert [n.rsplit(": ", 1)[-1] for n in notes] == [
        "holds cpu 8, deserves 14",
        "queue q would exceed its capability cpu 4",
        "holds cpu 9, deserves 14",
    ]


def test_a_reason_flipping_back_within_the_window_is_not_told_again() -> None:
    """Which check binds first moves with every bind in the queue: share, capability, share,
    capability ... one second apart. Each kind is told once; a kind not had for longer than
    the window is told again."""
    flips = [SHARE.format(8 + i, 14) if i % 2 == 0 else CAPABILITY for i in range(8)]
    notes = told(flips, step=1.0)
    assert [n.rsplit(": ", 1)[-1] for n in notes] == [
        "holds cpu 8, deserves 14",
        "queue q would exceed its capability cpu 4",
    ]
    # Capability for longer than the window, then the share again: news.
    later = told([*flips, *[CAPABILITY] * 7, SHARE.format(30, 14)], step=FLIP_WINDOW / 6)
    assert later[-1].endswith("holds cpu 30, deserves 14")


class Submits:
    """A status writer that keeps what it was asked to write, and with which interval."""

    def __init__(self) -> None:
        self.submits: list[tuple[str, float | None]] = []

    def submit(self, *args: Any, interval: float | None = None, **kwargs: Any) -> None:
        status = args[3]
        message = next(c["message"] for c in status["conditions"] if c["type"] == "Unschedulable")
        self.submits.append((message.rsplit(": ", 1)[-1], interval))


def test_a_status_flipping_back_waits_the_window_and_a_new_kind_does_not() -> None:
    writer = GangWriter(None)
    clock = Clock()
    writer.flips = ReasonFlips(clock=clock)
    writer.status_writer = Submits()  # type: ignore[assignment]
    gang = view(2, {"pending": 2})
    other = "gang ns/pg: waiting for admission: not enough cpu (need 4, free 2)"
    for reason in (SHARE.format(8, 14), CAPABILITY, SHARE.format(9, 14), CAPABILITY, other):
        writer.podgroup_status(GROUP, gang, False, reason)
        clock.now += 1.0
    assert writer.status_writer.submits == [  # type: ignore[attr-defined]
        ("holds cpu 8, deserves 14", None),
        ("queue q would exceed its capability cpu 4", None),
        ("holds cpu 9, deserves 14", FLIP_WINDOW),
        ("queue q would exceed its capability cpu 4", FLIP_WINDOW),
        ("not enough cpu (need 4, free 2)", None),
    ]


def test_the_shape_keeps_words_and_drops_quantities() -> None:
    assert reason_shape("not enough cpu (need 16, free 11200m) on 2 nodes of 1.5Gi") == (
        "not enough cpu (need #, free #) on # nodes of #"
    )
    assert reason_shape("gang ns/g: task w: 2/3 members placeable, cpu 4") == (
        "gang ns/g: task w: 2/3 members placeable, cpu #"
    )
    # The gangs holding the queue's room come and go as its numbers do.
    held = "the room in queue q is held by work of priority >= 10, which it does not preempt: "
    assert reason_shape(f"over its share; {held}ns/a, ns/b and 2 more; back to Pending") == (
        reason_shape(f"over its share; {held}ns/c; back to Pending")
    )


def test_members_made_again_are_told_the_same_reason() -> None:
    """A gang evicted whole is made again by its job (same names, new pods): the new members
    are told why the gang waits, though the reason has not changed."""
    writer = GangWriter(None)
    recorder = Recorder()
    writer.recorder = recorder  # type: ignore[assignment]
    first = view(2, {"pending": 2})
    writer.podgroup_status(GROUP, first, False, SHARE.format(8, 14))
    again = view(2, {"pending": 2})
    for member in again.members:
        member.uid = f"new-{member.name}"
    writer.podgroup_status(GROUP, again, False, SHARE.format(9, 14))
    writer.podgroup_status(GROUP, again, False, SHARE.format(10, 14))
    members = [name for name, _, _ in recorder.notes if name != "pg"]
    assert members == ["pending-0", "pending-1"] * 2


def owned_group(min_member: int) -> PodGroupRecord:
    return PodGroupRecord(
        {
            "metadata": {
                "name": "pg",
                "namespace": "ns",
                "ownerReferences": [
                    {
                        "apiVersion": "batch.volcano.sh/v1alpha1",
                        "kind": "Job",
                        "name": "train",
                        "uid": "job-uid",
                        "controller": True,
                    }
                ],
            },
            "spec": {"minMember": min_member},
        }
    )


def test_members_being_made_are_told_once_not_per_count() -> None:
    """While its job makes its members the count moves every pass: the group and its job hear
    it once; once all are made, a reason about them is told (its counts are words again)."""
    writer = GangWriter(None)
    recorder = Recorder()
    writer.recorder = recorder  # type: ignore[assignment]
    for made in (1, 2, 3):
        reason = f"gang ns/pg: task worker: {made}/4 members created"
        writer.podgroup_status(owned_group(4), view(4, {"pending": made}), False, reason)
    placeable = "gang ns/pg: task worker: {}/4 members placeable"
    writer.podgroup_status(owned_group(4), view(4, {"pending": 4}), False, placeable.format(3))
    writer.podgroup_status(owned_group(4), view(4, {"pending": 4}), False, placeable.format(2))
    for name in ("pg", "train"):
        assert [note for who, _, note in recorder.notes if who == name] == [
            "gang ns/pg: task worker: 1/4 members created",
            placeable.format(3),
            placeable.format(2),
        ]


def test_the_podgroup_and_its_job_are_told_once_per_kind_of_reason() -> None:
    """`kubectl describe pg` / `describe vcjob` say why a group waits: one Warning
    Unschedulable event per change of reason (not of its numbers), on the group and on the
    Volcano Job owning it; none while it is admitted."""
    owned = owned_group(2)
    writer = GangWriter(None)
    recorder = Recorder()
    writer.recorder = recorder  # type: ignore[assignment]
    empty = view(2, {})  # no pods yet: refused at enqueue
    capability = "gang ns/pg: waiting for admission: queue q cannot hold minResources: cpu need 4"
    for reason in (SHARE.format(8, 14), SHARE.format(9, 14), capability):
        writer.podgroup_status(owned, empty, False, reason)
    writer.podgroup_status(owned, empty, True, None)  # admitted: nothing to say
    writer.podgroup_status(owned, empty, False, capability)  # waiting again: said again
    told_group = [(reason, note) for name, reason, note in recorder.notes if name == "pg"]
    told_job = [(reason, note) for name, reason, note in recorder.notes if name == "train"]
    expected = [
        ("Unschedulable", SHARE.format(8, 14)),
        ("Unschedulable", capability),
        ("Unschedulable", capability),
    ]
    assert told_group == expected and told_job == expected
    # Written ahead of its members' events (the recorder's important lane), both of them.
    assert recorder.important == ["PodGroup", "Job"] * 3


def test_a_members_event_waits_its_turn_and_the_podgroups_does_not() -> None:
    writer = GangWriter(None)
    recorder = Recorder()
    writer.recorder = recorder  # type: ignore[assignment]
    member = pod("pending-0", "pending")
    writer.pod_event(member, "Normal", "GangCommitted", "whole")
    writer.group_event(GROUP, "Normal", "GangCommitted", "whole")
    assert [name for name, _, _ in recorder.notes] == [member.name, "pg"]
    assert recorder.important == ["PodGroup"]
