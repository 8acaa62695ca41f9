"""Which gangs are admitted (their room is in the gang ledger), why the others are not (word for
word what filter answers their members), what a gang was enqueued on the promise of evicting
(those pods are nobody else's until the promise is settled), and which gangs' facts changed
since the last pass (the memo's). One owner: everything else asks it."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator

__all__ = ["Admissions"]


class Admissions:
    def __init__(self) -> None:
        self._admitted: set[str] = set()
        self.reasons: dict[str, str] = {}  # gang -> why it is not admitted (for filter)
        # gang -> what it was enqueued on the promise of evicting (words), and those pods.
        self._promises: dict[str, tuple[str, frozenset[str]]] = {}
        self.promises_version = 0
        self._generations: dict[str, str] = {}  # gang -> the PodGroup UID decisions were for
        self._touched: set[str] = set()
        self.admit_listeners: list[Callable[[str], None]] = []  # called once per admission

    # ------------------------------------------------------------------ admitted

    def __contains__(self, key: object) -> bool:
        return key in self._admitted

    def __iter__(self) -> Iterator[str]:
        return iter(self._admitted)

    def __len__(self) -> int:
        return len(self._admitted)

    @property
    def keys(self) -> Collection[str]:
        """The admitted gangs (read-only; a pass reads it without awaiting)."""
        return self._admitted

    def admit(self, key: str) -> None:
        if key not in self._admitted:
            self._admitted.add(key)
            self._touched.add(key)
            for listener in self.admit_listeners:
                listener(key)
        self.reasons.pop(key, None)
        self.settle_promise(key)

    def refuse(self, key: str, reason: str) -> None:
        self.reasons[key] = reason

    def forget(self, key: str) -> None:
        """Nothing decided for the gang stands any more (it goes through admission again)."""
        self._admitted.discard(key)
        self._touched.add(key)

    def deleted(self, key: str) -> None:
        self.forget(key)
        self.reasons.pop(key, None)
        self.settle_promise(key)
        self._generations.pop(key, None)

    # ------------------------------------------------------------------ promises

    def promise(self, key: str, words: str, pods: frozenset[str]) -> None:
        self._promises[key] = (words, pods)
        self.promises_version += 1
        self._touched.add(key)

    def settle_promise(self, key: str) -> None:
        if self._promises.pop(key, None) is not None:
            self.promises_version += 1
            self._touched.add(key)

    def promise_of(self, key: str) -> str | None:
        found = self._promises.get(key)
        return found[0] if found is not None else None

    def promised(self) -> dict[str, frozenset[str]]:
        return {key: pods for key, (_, pods) in self._promises.items()}

    # ------------------------------------------------------------------ generations

    def recreated(self, key: str, uid: str) -> bool:
        """Whether the PodGroup `key` is another one than decisions were made for (deleted
        and created again under the same name); remembers `uid` either way."""
        known = self._generations.get(key)
        self._generations[key] = uid
        return known is not None and known != uid

    # ------------------------------------------------------------------ the memo's

    def touch(self, key: str) -> None:
        """Something a decision about `key` reads changed outside the cache's sight."""
        self._touched.add(key)

    def take_touched(self) -> set[str]:
        touched, self._touched = self._touched, set()
        return touched
