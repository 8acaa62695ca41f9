"""plugins.model.filter_status: the typed filter answer and the extender protocol's lists it
becomes."""

from __future__ import annotations

from plugins.model.filter_status import SUCCESS, UNRESOLVABLE, UNSCHEDULABLE, FilterStatus


def test_a_pod_steered_to_its_slot_passes_that_node_alone() -> None:
    status = FilterStatus.passes("n2", "gang")
    assert status.ok and status.code == SUCCESS and status.plugin == "gang"
    assert status.split(["n1", "n2", "n3"]) == (["n2"], {}, {})


def test_a_refusal_names_every_candidate_with_its_reason() -> None:
    status = FilterStatus.unresolvable("gang ns/a: waiting for admission", "gang")
    assert not status.ok and status.code == UNRESOLVABLE
    assert status.split(["n1", "n2"]) == (
        [],
        {},
        {"n1": "gang ns/a: waiting for admission", "n2": "gang ns/a: waiting for admission"},
    )
    maybe = FilterStatus(UNSCHEDULABLE, "no room", "gang")
    assert maybe.split(["n1"]) == ([], {"n1": "no room"}, {})  # preemption may help
