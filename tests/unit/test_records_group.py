"""One membership rule for the cache, the extender's requests and the hollow kubelets."""

from __future__ import annotations

from core.records import PodRecord, pod_group_key


def pod(meta: dict, spec: dict | None = None) -> dict:
    return {
        "metadata": {"name": "p", "namespace": "team-a", **meta},
        "spec": {"containers": [{"name": "c"}], **(spec or {})},
    }


def test_volcano_annotation_then_coscheduling_label() -> None:
    annotated = pod(
        {
            "annotations": {"scheduling.k8s.io/group-name": "train"},
            "labels": {"scheduling.x-k8s.io/pod-group": "other"},
        }
    )
    labelled = pod({"labels": {"scheduling.x-k8s.io/pod-group": "train"}})
    assert PodRecord(annotated).group == "team-a/train"
    assert PodRecord(labelled).group == "team-a/train"
    assert PodRecord(pod({})).group is None


def test_pods_of_kubernetes_native_gangs_are_not_ours() -> None:
    meta = {"annotations": {"scheduling.k8s.io/group-name": "train"}}
    for field in ("schedulingGroup", "workloadRef"):
        native = pod(meta, {field: {"name": "w"}})
        assert PodRecord(native).group is None
        assert pod_group_key("team-a", native["metadata"], native["spec"]) is None
