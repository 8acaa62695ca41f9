"""Sessions on hand-built snapshots, for unit tests of the scheduling core: the extender's facts
in memory (what is admitted, the ledger's slots, the queues' starvation), a pass run with or
without the memo, and the decisions read plainly."""

from __future__ import annotations

import time
from collections.abc import Collection, KeysView, Mapping
from typing import Any

from core.cache import Snapshot
from core.resources import ResourceVector
from plugins.framework.decisions import Admitted, Adopted, Decision, Enqueued, Waiting
from plugins.framework.memo import Memo
from plugins.framework.pass_input import ExtenderFacts, PassInput, QueueWait, Settings
from plugins.framework.policy import Policy
from plugins.framework.run import open_session, run_pass
from plugins.framework.session import PassResult, Session


class Ledger:
    """The gang ledger in memory: pod -> (node, request, group)."""

    def __init__(self, slots: Mapping[str, tuple[str, ResourceVector, str]] | None = None) -> None:
        self.slots = dict(slots or {})

    @property
    def by_node(self) -> dict[str, ResourceVector]:
        out: dict[str, ResourceVector] = {}
        for node, request, _ in self.slots.values():
            out[node] = out.get(node, ResourceVector()) + request
        return out

    def by_group(self) -> dict[str, ResourceVector]:
        out: dict[str, ResourceVector] = {}
        for _, request, group in self.slots.values():
            out[group] = out.get(group, ResourceVector()) + request
        return out

    def held_by(self, group: str) -> ResourceVector | None:
        return self.by_group().get(group)

    def slot_of(self, pod_key: str) -> str | None:
        found = self.slots.get(pod_key)
        return found[0] if found is not None else None

    def pods(self) -> KeysView[str]:
        return self.slots.keys()


def given(
    snapshot: Snapshot,
    *,
    admitted: Collection[str] = (),
    ledger: Ledger | None = None,
    starving: Mapping[str, QueueWait] | None = None,
    backoff: Mapping[str, tuple[str, float]] | None = None,
    elastic_waiting: Mapping[str, Collection[str]] | None = None,
    promised: Mapping[str, Collection[str]] | None = None,
    prefer: str = "binpack",
    now: float | None = None,
    **settings: Any,
) -> PassInput:
    facts = ExtenderFacts(
        admitted=frozenset(admitted),
        ledger=ledger or Ledger(),
        backoff=backoff or {},
        starving=starving or {},
        elastic_waiting=elastic_waiting or {},
        promised=promised or {},
    )
    return PassInput(
        snapshot, facts, Settings(prefer=prefer, **settings), time.time() if now is None else now
    )


def run(policy: Policy, snapshot: Snapshot, memo: Memo | None = None, **facts: Any) -> PassResult:
    return run_pass(given(snapshot, **facts), policy, memo)


def session(policy: Policy, snapshot: Snapshot, **facts: Any) -> Session:
    return open_session(given(snapshot, **facts), policy)


def ok(decision: Decision) -> bool:
    return isinstance(decision, Admitted | Enqueued | Adopted)


def reason(decision: Decision) -> str | None:
    return decision.reason if isinstance(decision, Waiting) else None
