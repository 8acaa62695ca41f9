"""bench.soak_actions: the soak's clean-up, cut short by the soak's end, leaves nothing it
deleted unmarked (a deleted member not marked would be reported lost)."""

from __future__ import annotations

import asyncio
from typing import Any

from bench.soak_actions import Actor, Submitted


class BlockingClient:
    """Lists the gang's two pods; the second delete never returns (the soak ends then)."""

    def __init__(self) -> None:
        self.deleted: list[str] = []
        self.blocked = asyncio.Event()

    async def list(self, resource: Any, namespace: str, **query: Any) -> dict[str, Any]:
        pods = [{"metadata": {"name": f"g-{i}", "uid": f"u{i}"}} for i in range(2)]
        return {"items": pods}

    async def delete(self, resource: Any, name: str, namespace: str) -> None:
        self.deleted.append(name)
        if len(self.deleted) == 2:
            self.blocked.set()
            await asyncio.Event().wait()


async def test_a_clean_up_cancelled_mid_gang_has_marked_what_it_deleted() -> None:
    client = BlockingClient()
    actor = Actor(client, seed=1)  # type: ignore[arg-type]
    actor.submitted[("PodGroup", "soak/g")] = Submitted("PodGroup", "soak/g")
    for i in range(2):
        actor.submitted[("Pod", f"soak/g-{i}")] = Submitted("Pod", f"soak/g-{i}", group="soak/g")
    finished = {"soak/g-0": "Succeeded", "soak/g-1": "Succeeded"}
    task = asyncio.create_task(actor.clean_up({"soak/g"}, finished))
    await client.blocked.wait()
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert client.deleted == ["g-0", "g-1"]
    assert {r.key: r.cleaned for r in actor.submitted.values()} == {
        "soak/g": "Completed",
        "soak/g-0": "Succeeded",
        "soak/g-1": "Succeeded",
    }
