"""The memo's layer over the queues' job order (`plugins.framework.traversal.job_order`): each
gang's order key kept while its version and the cluster total stand (the keys read the gang, its
pods and, for drf, the total), and each queue's last order, ranked again from itself when one of
its gangs changed. Nothing else is read, so it orders as `job_order` does."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from plugins.model.job_input import job_input

if TYPE_CHECKING:
    from plugins.framework.session import Session

__all__ = ["KeptOrders"]


class KeptOrders:
    def __init__(self) -> None:
        self._orders: dict[str, tuple[Any, list[str]]] = {}  # queue -> (total, job order)
        # gang -> (its version, (its job order key, the gang)), under `_total`
        self._keys: dict[str, tuple[Any, tuple[Any, str]]] = {}
        self._total: Any = None

    def forget(self, key: str) -> None:
        """Gang `key` is gone."""
        self._keys.pop(key, None)

    def of(self, ssn: Session, queue: str, *, changed: bool) -> list[str]:
        """The queue's gangs in job order; `changed`: one of them changed since the last ask."""
        snapshot = ssn.snapshot
        total = snapshot.total_allocatable
        known = self._orders.get(queue)
        if known is not None and known[0] == total and not changed:
            return known[1]
        if total != self._total:  # every key reads it
            self._keys.clear()
            self._total = total
        members = ssn.queues.groups_by_queue.get(queue, set())
        # The last order first, then the newcomers: sorting a list that is almost in order
        # costs a walk over it, not a full sort (a queue of 1,000 gangs is ranked again every
        # pass one of them changes).
        keys = [key for key in known[1] if key in members] if known is not None else []
        if len(keys) < len(members):
            kept = set(keys)
            keys += [key for key in members if key not in kept]
        versions, podgroups, order_keys = snapshot.group_versions, snapshot.podgroups, self._keys
        ranked = []
        for key in keys:
            group = podgroups.get(key)
            if group is None:
                continue
            version = versions.get(key)
            cached = order_keys.get(key)
            if cached is None or cached[0] != version:
                ranked_key = (ssn.job_order_key(job_input(snapshot, group)), key)
                cached = order_keys[key] = (version, ranked_key)
            ranked.append(cached[1])
        ranked.sort()
        order = [key for _, key in ranked]
        self._orders[queue] = (total, order)
        return order
