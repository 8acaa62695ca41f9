"""The words of the extender's admission: what was reserved, never '0 members on 0 nodes'."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from core.records import PodRecord
from extender.decision_notes import admitted_note


def pod(name: str, node: str | None = None) -> PodRecord:
    spec: dict[str, Any] = {"containers": [{"name": "c"}]}
    if node:
        spec["nodeName"] = node
    meta = {"name": name, "namespace": "default", "uid": name}
    return PodRecord({"metadata": meta, "spec": spec, "status": {"phase": "Pending"}})


GROUP: Any = SimpleNamespace(queue="qa")


def view(*members: PodRecord) -> Any:
    return SimpleNamespace(members=members)


def test_members_reserved_say_how_many_and_where() -> None:
    slots = {"default/j-0": "n1", "default/j-1": "n1", "default/j-2": "n2"}
    note = admitted_note(GROUP, slots, view(pod("j-0"), pod("j-1"), pod("j-2")))
    assert note == "gang admitted to queue qa: 3 members reserved on 2 nodes"
    one = admitted_note(GROUP, {"default/j-0": "n1"}, view(pod("j-0"), pod("j-1", "n3")))
    assert one == "gang admitted to queue qa: 1 member reserved on 1 node; 1 already bound"


def test_no_slot_never_says_zero_members_on_zero_nodes() -> None:
    none_yet = admitted_note(GROUP, {}, view())
    assert none_yet == (
        "gang admitted to queue qa: no member exists yet; each is placed as its pod is created"
    )
    running = admitted_note(GROUP, {}, view(pod("j-0", "n1"), pod("j-1", "n2")))
    assert running == (
        "gang admitted to queue qa: its 2 bound members hold what it needs; nothing new to place"
    )
    assert "0 members" not in none_yet + running and "0 nodes" not in none_yet + running
