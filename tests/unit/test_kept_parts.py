"""The memo's layer over proportion's per-queue parts: what it hands back is what computing
every part gives, across passes where queues change, come, go and guarantees move."""

from __future__ import annotations

import dataclasses

from core.resources import ResourceVector
from plugins.framework.kept_parts import KeptParts
from plugins.model.proportion_shares import proportion_shares
from plugins.model.queue_share import QueueInput


def cpu(n: float) -> ResourceVector:
    return ResourceVector({"cpu": int(n * 1000)})


def model_view(model) -> dict[str, tuple]:
    return {
        name: (s.deserved, s.real_capability, s.allocated, s.request, s.inqueue, s.share)
        for name, s in model.shares.items()
    }


def test_a_part_is_reused_only_for_the_same_input_object_and_context() -> None:
    calls: list[str] = []

    def part_of(queue: QueueInput, context: ResourceVector) -> tuple[str, ResourceVector]:
        calls.append(queue.name)
        return (queue.name, context)

    kept = KeptParts()
    a, b = QueueInput("a", request=cpu(2)), QueueInput("b", request=cpu(3))
    assert kept(part_of, [a, b], cpu(10)) == [("a", cpu(10)), ("b", cpu(10))]
    assert calls == ["a", "b"]
    assert kept(part_of, [a, b], cpu(10)) == [("a", cpu(10)), ("b", cpu(10))]
    assert calls == ["a", "b"]  # nothing moved: nothing computed
    a2 = dataclasses.replace(a)  # an equal input, but a new object: computed again
    kept(part_of, [a2, b], cpu(10))
    assert calls == ["a", "b", "a"]
    assert kept(part_of, [a2, b], cpu(8)) == [("a", cpu(8)), ("b", cpu(8))]
    assert calls == ["a", "b", "a", "a", "b"]  # the cluster-wide value moved: every part


def test_a_queue_gone_and_back_is_computed_again() -> None:
    calls: list[str] = []

    def part_of(queue: QueueInput, context: ResourceVector) -> str:
        calls.append(queue.name)
        return queue.name

    kept = KeptParts()
    a, b = QueueInput("a"), QueueInput("b")
    kept(part_of, [a, b], cpu(1))
    kept(part_of, [a], cpu(1))
    kept(part_of, [a, b], cpu(1))
    assert calls == ["a", "b", "b"]


def test_proportion_with_kept_parts_decides_as_computed_over_changing_passes() -> None:
    kept = KeptParts()
    queues = {
        "a": QueueInput("a", weight=1, request=cpu(30), allocated=cpu(4)),
        "b": QueueInput("b", weight=3, request=cpu(30), guarantee=cpu(2)),
        "c": QueueInput("c", weight=2, request=cpu(1), capability=cpu(5)),
    }
    changes = [
        ("a", {"allocated": cpu(6)}),
        ("b", {"guarantee": cpu(8)}),  # moves every other queue's realCapability
        ("c", {"has_jobs": False}),
        ("d", {"request": cpu(12), "weight": 4}),  # a new queue
        ("a", {"inqueue": cpu(3)}),
    ]
    for name, fields in changes:
        base = queues.get(name, QueueInput(name))
        queues[name] = dataclasses.replace(base, **fields)
        inputs = list(queues.values())
        with_kept = proportion_shares(cpu(40), inputs, kept)
        computed = proportion_shares(cpu(40), inputs)
        assert model_view(with_kept) == model_view(computed), (name, fields)
    del queues["b"]  # a queue gone: its guarantee no longer held back from the others
    inputs = list(queues.values())
    assert model_view(proportion_shares(cpu(40), inputs, kept)) == model_view(
        proportion_shares(cpu(40), inputs)
    )
