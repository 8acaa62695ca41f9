"""A waiting gang's reason flipping back to a kind it had moments ago.

Which of a waiting gang's checks fails first moves with every bind in its queue (the cluster's
free room, then the queue's share, then the free room again). Each flip was a PodGroup status
write, a Warning on the PodGroup and its job and a `FailedScheduling` to each pending member:
in a backlog of hundreds of waiting gangs, ~50 PodGroup writes a second on the real soak's
kube-apiserver, for words that said nothing new. A reason whose kind (`reason_shape`) the gang
had within `window` seconds is a flip back: its status waits `window` after the previous write
and nobody is told again. A kind it had not had is told at once, as before.
"""

from __future__ import annotations

import time
from collections.abc import Callable

FLIP_WINDOW = 30.0  # seconds; as long as filter keeps a reason's words (WORDS_REFRESH)


class ReasonFlips:
    def __init__(
        self, window: float = FLIP_WINDOW, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.window = window
        self._clock = clock
        # group -> (the kind it has now, {kind: when it last had it})
        self._seen: dict[str, tuple[str, dict[str, float]]] = {}

    def flipped_back(self, group_key: str, shape: str) -> bool:
        """Record that the group waits for a reason of kind `shape` now; True when that is a
        change back to a kind it had within the window."""
        now = self._clock()
        current, seen = self._seen.get(group_key, ("", {}))
        for kind in [k for k, at in seen.items() if now - at > self.window]:
            del seen[kind]
        back = shape != current and shape in seen
        seen[shape] = now
        self._seen[group_key] = (shape, seen)
        return back

    def forget(self, group_key: str) -> None:
        """The gang was admitted or is gone: its next reason is news."""
        self._seen.pop(group_key, None)
