"""PodRecord.refresh, what an informer builds for a pod's MODIFIED: the same record as a fresh
build, whatever changed, and a copy of the old one (with the new resourceVersion) when nothing
it reads did."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import orjson
import pytest

from core.kube.client import PODS
from core.kube.informer import Informer
from core.records import PodRecord


def pod(rv: int = 1) -> dict[str, Any]:
    return {
        "metadata": {
            "name": "p",
            "namespace": "ns",
            "uid": "u1",
            "resourceVersion": str(rv),
            "creationTimestamp": "2026-11-29T06:00:00Z",
            "labels": {"app": "a"},
            "annotations": {"scheduling.k8s.io/group-name": "g"},
            "managedFields": [{"manager": "kubectl", "time": "2026-11-29T06:00:00Z"}],
        },
        "spec": {
            "nodeName": "node-1",
            "schedulingGates": [{"name": "g1"}],
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}],
            "tolerations": [{"key": "k", "operator": "Exists"}],
        },
        "status": {
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "True"}],
        },
    }


def slots(record: PodRecord) -> dict[str, Any]:
    return {name: getattr(record, name) for name in PodRecord.__slots__ if name != "basis"}


def kubelet_write(obj: dict[str, Any]) -> None:
    """A write that changes nothing PodRecord reads (its kubelet's first status, a finalizer)."""
    obj["metadata"]["managedFields"].append({"manager": "kubelet"})
    obj["metadata"]["finalizers"] = ["example.com/keep"]
    status = obj["status"]
    status.update(podIP="10.0.0.1", hostIP="192.168.0.1", startTime="2026-11-29T06:00:02Z")
    status["conditions"].append({"type": "Initialized", "status": "True"})
    status["containerStatuses"] = [
        {"name": "c", "ready": False, "restartCount": 0, "state": {"waiting": {}}}
    ]


def set_in(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(obj: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        target = obj
        for name in parents:
            target = target.setdefault(name, {})
        target[last] = value

    return change


CHANGES: dict[str, Callable[[dict[str, Any]], None]] = {
    "node": set_in("spec.nodeName", "node-2"),
    "label": set_in("metadata.labels", {"app": "b"}),
    "annotation": set_in("metadata.annotations", {"scheduling.k8s.io/group-name": "h"}),
    "deleting": set_in("metadata.deletionTimestamp", "2026-11-29T06:01:00Z"),
    "owner": set_in("metadata.ownerReferences", [{"kind": "Job", "name": "j", "uid": "o"}]),
    "recreated": set_in("metadata.uid", "u2"),
    "gates lifted": set_in("spec.schedulingGates", []),
    "resized": set_in("spec.containers", [{"name": "c", "resources": {"requests": {"cpu": "2"}}}]),
    "phase": set_in("status.phase", "Running"),
    "nominated": set_in("status.nominatedNodeName", "node-3"),
    "refused": set_in(
        "status.conditions",
        [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "m"}],
    ),
    "ready": set_in("status.containerStatuses", [{"ready": True, "restartCount": 0}]),
    "restarted": set_in("status.containerStatuses", [{"ready": False, "restartCount": 2}]),
    "exited": set_in(
        "status.containerStatuses",
        [{"ready": False, "restartCount": 0, "state": {"terminated": {"exitCode": 3}}}],
    ),
    "init restarted": set_in("status.initContainerStatuses", [{"restartCount": 1}]),
}


def refreshed(before: dict[str, Any], after: dict[str, Any]) -> PodRecord:
    """`after`'s record as an informer makes it, `before` having come as a MODIFIED already."""
    first = PodRecord(pod(0))
    old = PodRecord.refresh(first, before)
    return PodRecord.refresh(old, after)


def test_a_write_that_changes_nothing_read_copies_the_record_with_its_new_version() -> None:
    before, after = pod(1), pod(2)
    kubelet_write(after)
    old = PodRecord.refresh(PodRecord(pod(0)), before)
    new = PodRecord.refresh(old, after)
    assert new is not old and new.basis == old.basis
    assert new.rv == "2"
    assert slots(new) == slots(PodRecord(after))


@pytest.mark.parametrize("change", CHANGES)
def test_a_change_to_what_is_read_builds_the_record_anew(change: str) -> None:
    before, after = pod(1), pod(2)
    CHANGES[change](after)
    new = refreshed(before, after)
    assert slots(new) == slots(PodRecord(after))
    assert new.basis is not None and new.basis != PodRecord.refresh(new, before).basis


def test_a_copy_carries_every_slot() -> None:
    record = PodRecord(pod())
    record.basis = 7
    copied = record._copy()
    assert all(getattr(copied, n) is getattr(record, n) for n in PodRecord.__slots__)


def test_the_informer_hands_handlers_the_refreshed_record_of_a_modified() -> None:
    informer: Informer[PodRecord] = Informer(None, PODS, PodRecord)  # type: ignore[arg-type]
    updates: list[tuple[PodRecord, PodRecord]] = []
    informer.add_handlers(on_update=lambda old, new: updates.append((old, new)))
    first, second, third = pod(1), pod(2), pod(3)
    kubelet_write(third)
    for kind, obj in (("ADDED", first), ("MODIFIED", second), ("MODIFIED", copy.deepcopy(third))):
        informer._apply_event(orjson.dumps({"type": kind, "object": obj}))
    assert [(old.rv, new.rv) for old, new in updates] == [("1", "2"), ("2", "3")]
    assert updates[1][1].basis == updates[0][1].basis  # the second MODIFIED was a copy
    assert informer.items["ns/p"] is updates[1][1]
    assert informer.resource_version == "3"
