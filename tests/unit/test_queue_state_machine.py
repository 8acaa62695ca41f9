"""Volcano's Queue state machine (spec/volcano.md §4.12) as a pure function."""

from __future__ import annotations

import pytest

from podgroup_controller.queue_state import (
    CLOSE_QUEUE,
    CLOSED,
    CLOSING,
    OPEN,
    OPEN_QUEUE,
    SYNC_QUEUE,
    UNKNOWN,
    TransitionRefused,
    is_closed,
    normalize,
    transition,
)

# (state, action, has PodGroups) -> next state: the table of spec §4.12, row by row.
TABLE = [
    (OPEN, OPEN_QUEUE, False, OPEN),
    (OPEN, OPEN_QUEUE, True, OPEN),
    (OPEN, CLOSE_QUEUE, False, CLOSED),
    (OPEN, CLOSE_QUEUE, True, CLOSING),
    (OPEN, SYNC_QUEUE, True, OPEN),
    (OPEN, SYNC_QUEUE, False, OPEN),
    (CLOSING, OPEN_QUEUE, True, OPEN),
    (CLOSING, CLOSE_QUEUE, True, CLOSING),
    (CLOSING, CLOSE_QUEUE, False, CLOSED),
    (CLOSING, SYNC_QUEUE, True, CLOSING),
    (CLOSING, SYNC_QUEUE, False, CLOSED),
    (CLOSED, OPEN_QUEUE, False, OPEN),
    (CLOSED, CLOSE_QUEUE, True, CLOSED),
    (CLOSED, SYNC_QUEUE, True, CLOSED),
    (CLOSED, SYNC_QUEUE, False, CLOSED),
    (UNKNOWN, OPEN_QUEUE, True, OPEN),
    (UNKNOWN, CLOSE_QUEUE, True, CLOSING),
    (UNKNOWN, CLOSE_QUEUE, False, CLOSED),
    (UNKNOWN, SYNC_QUEUE, False, UNKNOWN),
    # Never written: an Open queue.
    ("", SYNC_QUEUE, False, OPEN),
    ("", CLOSE_QUEUE, True, CLOSING),
    # Outside the enum: Unknown.
    ("Weird", SYNC_QUEUE, False, UNKNOWN),
    ("Weird", OPEN_QUEUE, False, OPEN),
]


@pytest.mark.parametrize(("state", "action", "groups", "expected"), TABLE)
def test_table(state: str, action: str, groups: bool, expected: str) -> None:
    assert transition(state, action, has_podgroups=groups) == expected


@pytest.mark.parametrize("parent", [CLOSING, CLOSED])
def test_opening_under_a_closed_parent_is_refused(parent: str) -> None:
    with pytest.raises(TransitionRefused, match=parent):
        transition(CLOSED, OPEN_QUEUE, has_podgroups=False, parent_state=parent)


@pytest.mark.parametrize("parent", [OPEN, "", UNKNOWN])
def test_opening_under_an_open_parent(parent: str) -> None:
    assert transition(CLOSED, OPEN_QUEUE, has_podgroups=False, parent_state=parent) == OPEN


def test_a_closed_parent_does_not_stop_closing_or_syncing() -> None:
    assert transition(OPEN, CLOSE_QUEUE, has_podgroups=True, parent_state=CLOSED) == CLOSING
    assert transition(CLOSING, SYNC_QUEUE, has_podgroups=False, parent_state=CLOSED) == CLOSED


def test_unknown_action() -> None:
    with pytest.raises(ValueError, match="RestartJob"):
        transition(OPEN, "RestartJob", has_podgroups=False)


def test_helpers() -> None:
    assert normalize("") == OPEN and normalize("Closed") == CLOSED and normalize("x") == UNKNOWN
    assert is_closed(CLOSING) and is_closed(CLOSED)
    assert not is_closed("") and not is_closed(OPEN) and not is_closed(UNKNOWN)
