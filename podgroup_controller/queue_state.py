"""Volcano's Queue state machine as one pure function.

| state   | OpenQueue | CloseQueue                              | SyncQueue                       |
|---------|-----------|-----------------------------------------|---------------------------------|
| Open    | Open      | Closed if no PodGroups, else Closing    | Open                            |
| Closing | Open      | Closed if no PodGroups, else Closing    | Closed once no PodGroups        |
| Closed  | Open      | Closed                                  | Closed                          |
| Unknown | Open      | Closed if no PodGroups, else Closing    | Unknown                         |

An empty `status.state` (never written) is Open; a value outside the enum is Unknown. Opening
a queue whose parent is Closing or Closed is refused (the controller retries it).
"""

from __future__ import annotations

OPEN = "Open"
CLOSING = "Closing"
CLOSED = "Closed"
UNKNOWN = "Unknown"
STATES = (OPEN, CLOSING, CLOSED, UNKNOWN)

OPEN_QUEUE = "OpenQueue"
CLOSE_QUEUE = "CloseQueue"
SYNC_QUEUE = "SyncQueue"
ACTIONS = (OPEN_QUEUE, CLOSE_QUEUE, SYNC_QUEUE)


class TransitionRefused(Exception):
    """The action cannot be applied now (e.g. opening a queue under a closed parent)."""


def normalize(state: str) -> str:
    """The state a `status.state` value stands for."""
    if not state:
        return OPEN
    return state if state in STATES else UNKNOWN


def is_closed(state: str) -> bool:
    """Closing or Closed: the queue takes no new work and its children close with it."""
    return normalize(state) in (CLOSING, CLOSED)


def transition(
    state: str, action: str, *, has_podgroups: bool, parent_state: str | None = None
) -> str:
    """The queue's next state after `action`. `parent_state` is None for a queue without a
    parent (root). Raises TransitionRefused, or ValueError for an unknown action."""
    current = normalize(state)
    if action == OPEN_QUEUE:
        if parent_state is not None and is_closed(parent_state):
            raise TransitionRefused(f"its parent queue is {normalize(parent_state)}")
        return OPEN
    if action == CLOSE_QUEUE:
        if current == CLOSED:
            return CLOSED
        return CLOSING if has_podgroups else CLOSED
    if action == SYNC_QUEUE:
        if current == CLOSING and not has_podgroups:
            return CLOSED
        return current
    raise ValueError(f"unknown queue action {action!r} (known: {', '.join(ACTIONS)})")
