"""The words of the extender's decisions, shared by its events and its decision log lines."""

from __future__ import annotations

from collections.abc import Mapping

from core.records import PodGroupRecord
from plugins.model import gang as gangs


def plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def admitted_note(group: PodGroupRecord, slots: Mapping[str, str], view: gangs.GangView) -> str:
    """What an admission reserved, as it is: members placed now, or why none is."""
    placed = sum(1 for pod in view.members if gangs.counts_for_quorum(pod))
    head = f"gang admitted to queue {group.queue}"
    if slots:
        note = (
            f"{head}: {plural(len(slots), 'member')} reserved on "
            f"{plural(len(set(slots.values())), 'node')}"
        )
        return note + (f"; {placed} already bound" if placed else "")
    if placed:
        return f"{head}: its {placed} bound members hold what it needs; nothing new to place"
    return f"{head}: no member exists yet; each is placed as its pod is created"
