"""Which gangs may make progress: a gang's pods run their clocks only while at least
`minMember` pods of the group are present as the API reports them (Running, or Succeeded: a
member that completed does not hold the rest back). Groups without a PodGroup object have no
gang rule. Incremental: each pod or PodGroup event updates counts, and `on_flip(group)` is
called only when a group's answer changes, so a big gang costs O(1) per event."""

from __future__ import annotations

from collections.abc import Callable


class GangTracker:
    __slots__ = ("_group_of", "_min_member", "_on_flip", "_present")

    def __init__(self, on_flip: Callable[[str], None]) -> None:
        self._on_flip = on_flip
        self._min_member: dict[str, int] = {}
        self._present: dict[str, set[str]] = {}  # group -> keys of its present pods
        self._group_of: dict[str, str] = {}  # key of a present pod -> its group

    def satisfied(self, group: str | None) -> bool:
        if group is None:
            return True
        needed = self._min_member.get(group)
        if needed is None:
            return True
        return len(self._present.get(group, ())) >= needed

    def present(self, group: str) -> int:
        return len(self._present.get(group, ()))

    def set_pod(self, key: str, group: str | None) -> None:
        """The pod `key` now counts for `group` (None: it counts for no group: not present,
        not in a group, or deleted)."""
        old = self._group_of.get(key)
        if old == group:
            return
        if old is not None:
            del self._group_of[key]
            self._change(old, key, add=False)
        if group is not None:
            self._group_of[key] = group
            self._change(group, key, add=True)

    def _change(self, group: str, key: str, *, add: bool) -> None:
        before = self.satisfied(group)
        members = self._present.get(group)
        if add:
            if members is None:
                members = self._present[group] = set()
            members.add(key)
        elif members is not None:
            members.discard(key)
            if not members:
                del self._present[group]
        if self.satisfied(group) != before:
            self._on_flip(group)

    def podgroup_changed(self, group: str, min_member: int | None) -> None:
        """A PodGroup was created, changed (`min_member`) or deleted (None)."""
        before = self.satisfied(group)
        if min_member is None:
            self._min_member.pop(group, None)
        else:
            self._min_member[group] = min_member
        if self.satisfied(group) != before:
            self._on_flip(group)
