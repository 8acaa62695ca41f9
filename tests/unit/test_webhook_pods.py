"""extender.webhook_pods: which pods are created behind the queue-allocation gate."""

from __future__ import annotations

from typing import Any

import pytest

from core.api import keys
from core.records import PodGroupRecord
from core.served import ServedPods
from extender.webhook_configs import POD_GATE_CONDITIONS, webhook_configurations
from extender.webhook_pods import gate_patch, gated_pods

SERVED = ServedPods.of(["volcano"])
GATE = {"name": keys.QUEUE_ALLOCATION_GATE}
GROUPED = {"op": "add", "path": "/metadata/labels", "value": {keys.GROUPED: "true"}}


def pod(
    group: str | None = "train",
    *,
    scheduler: str = "volcano",
    gates: list[dict[str, str]] | None = None,
    label: bool = False,
    **meta: Any,
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": "train-0", **meta}
    if group is not None and label:
        metadata["labels"] = {keys.COSCHEDULING_POD_GROUP: group}
    elif group is not None:
        metadata["annotations"] = {keys.GROUP_NAME: group}
    spec: dict[str, Any] = {"schedulerName": scheduler, "containers": [{"name": "c"}]}
    if gates is not None:
        spec["schedulingGates"] = gates
    return {"metadata": metadata, "spec": spec}


def groups(phase: str | None) -> dict[str, PodGroupRecord]:
    if phase is None:
        return {}
    obj = {"metadata": {"name": "train", "namespace": "ns"}, "status": {"phase": phase}}
    return {"ns/train": PodGroupRecord(obj)}


@pytest.mark.parametrize("phase", [None, "Pending", "Inqueue"])
def test_a_member_of_a_gang_not_running_yet_is_gated(phase: str | None) -> None:
    assert gate_patch(pod(), "ns", SERVED, groups(phase)) == [
        {"op": "add", "path": "/spec/schedulingGates", "value": [GATE]},
        GROUPED,
    ]


@pytest.mark.parametrize("phase", ["Running", "Unknown", "Completed"])
def test_a_member_of_a_running_gang_is_not(phase: str) -> None:
    assert gate_patch(pod(), "ns", SERVED, groups(phase)) == []


def test_only_pods_vulcan_schedules_that_name_a_podgroup() -> None:
    assert gate_patch(pod(scheduler="default-scheduler"), "ns", SERVED, {}) == []
    assert gate_patch(pod(None), "ns", SERVED, {}) == []
    # The coscheduling label names a group as well; another namespace's group is another.
    assert gate_patch(pod(label=True), "ns", SERVED, groups("Pending")) != []
    assert gate_patch(pod(), "other", SERVED, groups("Running")) != []


def test_a_gated_pod_keeps_its_gates_and_gets_ours_once() -> None:
    user = {"name": "example.com/approval"}
    assert gate_patch(pod(gates=[user]), "ns", SERVED, {}) == [
        {"op": "add", "path": "/spec/schedulingGates/-", "value": GATE},
        GROUPED,
    ]
    assert gate_patch(pod(gates=[GATE]), "ns", SERVED, {}) == []


def test_a_gated_member_is_labelled_grouped_beside_its_own_labels() -> None:
    """The label keeps it out of the PodGroup controller's pod watch; the pod's labels stay."""
    labelled = pod(labels={"app": "train"})
    assert gate_patch(labelled, "ns", SERVED, {})[1] == {
        "op": "add",
        "path": "/metadata/labels/vulcan.sh~1grouped",
        "value": "true",
    }


def test_a_pod_named_by_generate_name_or_already_bound() -> None:
    unnamed = pod(name="", generateName="train-")
    assert gate_patch(unnamed, "ns", SERVED, {}) != []
    bound = pod()
    bound["spec"]["nodeName"] = "n1"
    assert gate_patch(bound, "ns", SERVED, {}) == []


def test_the_configuration_sends_only_podgroup_members_and_ignores_failures() -> None:
    mutating, _ = webhook_configurations(url="https://127.0.0.1:1", ca_bundle="")
    [hook] = [h for h in mutating["webhooks"] if h["name"] == "gatepod.vulcan.sh"]
    assert hook["failurePolicy"] == "Ignore"
    assert hook["rules"][0]["resources"] == ["pods"]
    assert hook["rules"][0]["operations"] == ["CREATE"]
    assert hook["matchConditions"] == list(POD_GATE_CONDITIONS)


def test_where_binds_need_a_marker_a_pod_without_it_is_not_gated() -> None:
    """It is refused at filter with the fix in words, which it would never reach gated."""
    marker = "vulcan.sh/managed-bind"
    gated = gated_pods(SERVED, marker)
    plain = pod()
    assert gate_patch(plain, "ns", gated, {}) == []
    marked = pod()
    marked["spec"]["containers"][0]["resources"] = {"limits": {marker: "1"}}
    assert gate_patch(marked, "ns", gated, {}) != []
    assert gated_pods(SERVED, None) is SERVED


def sent(obj: dict[str, Any]) -> bool:
    """Whether the pod webhook's matchConditions (all of them) send `obj`, evaluated by CEL as
    the API servers do."""
    import celpy

    from sim.apiserver.webhook_config import compile_condition

    activation = {"object": celpy.json_to_cel(obj)}
    return all(
        bool(compile_condition(c["expression"]).evaluate(activation)) for c in POD_GATE_CONDITIONS
    )


def test_the_conditions_send_podgroup_members_not_gated_already() -> None:
    assert sent(pod())
    assert sent(pod(label=True))
    assert sent(pod(gates=[{"name": "example.com/mine"}]))
    assert not sent(pod(group=None))
    # A Volcano Job's pods are made behind the gate: no webhook call for them.
    assert not sent(pod(gates=[GATE]))
    assert not sent(pod(gates=[{"name": "example.com/mine"}, GATE]))
