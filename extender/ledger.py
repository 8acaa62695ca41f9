"""The gang ledger: capacity reserved on nodes for pods that are admitted but not yet bound.

Filter subtracts live reservations from a node's free capacity, so a pass-through pod never takes
a slot a gang member was promised. The gang issue fills the ledger (enqueue writes reservations,
bind consumes them); this module keeps the per-node sums exact.
"""

from __future__ import annotations

from collections.abc import Callable, KeysView, Set
from dataclasses import dataclass, replace

from core.resources import ResourceVector

_ZERO = ResourceVector()


@dataclass(frozen=True, slots=True)
class Reservation:
    pod_key: str  # namespace/name of the member the slot is for
    node: str
    request: ResourceVector
    group: str | None = None
    # kube-scheduler was steered onto this slot by filter (it may be binding the member there
    # now): the slot is the member's and is not traded to another member of its gang.
    steered: bool = False


class GangLedger:
    def __init__(self, on_node_change: Callable[[str], None] | None = None) -> None:
        self._by_pod: dict[str, Reservation] = {}
        self._by_node: dict[str, ResourceVector] = {}
        self._by_group: dict[str, ResourceVector] = {}
        self._members: dict[str, set[str]] = {}  # group -> members holding a reservation
        self._on_node: dict[str, set[str]] = {}  # node -> members holding a reservation there
        # Tells the cache a node's reserved capacity changed (its memos forget that node).
        self._on_node_change = on_node_change or (lambda _node: None)
        # Told the group whose reservations changed (what it holds is a fact of its gang).
        self.group_listeners: list[Callable[[str], None]] = []

    def reserve(self, reservation: Reservation) -> None:
        self.release(reservation.pod_key)
        self._by_pod[reservation.pod_key] = reservation
        self._by_node[reservation.node] = (
            self._by_node.get(reservation.node, _ZERO) + reservation.request
        )
        group = reservation.group
        self._by_group[group] = self._by_group.get(group, _ZERO) + reservation.request
        self._members.setdefault(group, set()).add(reservation.pod_key)
        self._on_node.setdefault(reservation.node, set()).add(reservation.pod_key)
        self._on_node_change(reservation.node)
        self._group_changed(group)

    def release(self, pod_key: str) -> Reservation | None:
        reservation = self._by_pod.pop(pod_key, None)
        if reservation is not None:
            left = self._by_node.get(reservation.node, _ZERO) - reservation.request
            if left.is_zero():
                self._by_node.pop(reservation.node, None)
            else:
                self._by_node[reservation.node] = left
            on_node = self._on_node.get(reservation.node)
            if on_node is not None:
                on_node.discard(pod_key)
                if not on_node:
                    del self._on_node[reservation.node]
            group = reservation.group
            members = self._members.get(group)
            if members is not None:
                members.discard(pod_key)
            if not members:
                self._members.pop(group, None)
                self._by_group.pop(group, None)
            else:
                self._by_group[group] = self._by_group.get(group, _ZERO) - reservation.request
            self._on_node_change(reservation.node)
            self._group_changed(group)
        return reservation

    def _group_changed(self, group: str | None) -> None:
        if group is not None:
            for listener in self.group_listeners:
                listener(group)

    def steer(self, pod_key: str) -> None:
        """Mark `pod_key`'s slot as the node kube-scheduler was steered to (same node, same
        room: no sum changes, nobody told)."""
        reservation = self._by_pod.get(pod_key)
        if reservation is not None and not reservation.steered:
            self._by_pod[pod_key] = replace(reservation, steered=True)

    def members_on(self, node: str) -> Set[str]:
        """The members holding a reservation on `node` (a live view: read it without
        awaiting, copy it before reserving or releasing)."""
        return self._on_node.get(node, frozenset())

    def reservation_of(self, pod_key: str) -> Reservation | None:
        return self._by_pod.get(pod_key)

    def slot_of(self, pod_key: str) -> str | None:
        """The node reserved for `pod_key`, if any (the gang planner counts the pod there)."""
        reservation = self._by_pod.get(pod_key)
        return reservation.node if reservation is not None else None

    def reserved_on(self, node: str, *, excluding: str | None = None) -> ResourceVector:
        """Capacity promised on `node`, minus the reservation of `excluding` (the pod asking)."""
        reserved = self._by_node.get(node, _ZERO)
        if excluding is not None:
            own = self._by_pod.get(excluding)
            if own is not None and own.node == node:
                reserved = reserved - own.request
        return reserved

    def pod_keys(self) -> list[str]:
        """Every member holding a reservation (a copy: callers release while iterating)."""
        return list(self._by_pod)

    def pod_keys_set(self) -> set[str]:
        """Every member holding a reservation, as a set (a copy)."""
        return set(self._by_pod)

    def pods(self) -> KeysView[str]:
        """Every member holding a reservation (a live view: read it without awaiting)."""
        return self._by_pod.keys()

    def of_group(self, group: str) -> list[str]:
        """The members of `group` holding a reservation."""
        return list(self._members.get(group, ()))

    def held_by(self, group: str) -> ResourceVector | None:
        """What `group`'s members hold reserved (None: nothing)."""
        return self._by_group.get(group)

    def by_group(self) -> dict[str, ResourceVector]:
        """Reserved capacity per group (what each gang holds before its pods are bound); a
        copy, kept with every reserve and release."""
        return dict(self._by_group)

    @property
    def by_node(self) -> dict[str, ResourceVector]:
        """Reserved capacity per node (read-only; for hot loops)."""
        return self._by_node

    def __len__(self) -> int:
        return len(self._by_pod)
