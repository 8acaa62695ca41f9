"""vulcan's managedResources markers (cluster-scheduler install): the job controller adds them to
the pods it creates, and vulcan never counts them as capacity (pods, PodGroups, the extender's
fast path)."""

from __future__ import annotations

import argparse
from typing import Any

import pytest

from core.api import markers
from core.api.keys import BINDING_MARKER, MARKER_RESOURCE_GROUP, MARKERS, SCHEDULING_MARKER
from core.records import PodGroupRecord, PodRecord
from core.resources import ResourceVector, pod_requests, without_group
from extender.flags import add_extender_flags
from extender.passthrough import request_of
from flow_controller.flags import add_job_flags
from flow_controller.job.objects import BindMarker, add_markers


def marked_pod(requests: dict[str, str] | None = None) -> dict[str, Any]:
    resources: dict[str, Any] = {"limits": {"cpu": "2", "vulcan.sh/managed": "1"}}
    if requests is not None:
        resources["requests"] = requests
    return {
        "metadata": {"name": "p", "namespace": "default", "uid": "u"},
        "spec": {"containers": [{"name": "c", "resources": resources}, {"name": "sidecar"}]},
    }


def test_markers_go_into_the_first_containers_limits_and_requests_when_it_has_some() -> None:
    pod = {"spec": {"containers": [{"name": "a"}, {"name": "b"}]}}
    add_markers(pod, MARKERS)
    first, second = pod["spec"]["containers"]
    assert first["resources"] == {"limits": dict.fromkeys(MARKERS, "1")}
    assert "resources" not in second
    # A container that states requests must state the same for an extended resource.
    pod = {"spec": {"containers": [{"name": "a", "resources": {"requests": {"cpu": "1"}}}]}}
    add_markers(pod, MARKERS)
    resources = pod["spec"]["containers"][0]["resources"]
    assert resources["requests"] == {"cpu": "1", **dict.fromkeys(MARKERS, "1")}
    assert resources["limits"] == dict.fromkeys(MARKERS, "1")
    untouched = {"spec": {"containers": [{"name": "a"}]}}
    add_markers(untouched, ())
    assert untouched == {"spec": {"containers": [{"name": "a"}]}}


def test_the_flag_takes_only_names_in_vulcans_domain() -> None:
    parser = argparse.ArgumentParser()
    add_job_flags(parser)
    args = parser.parse_args(["--pod-resource-markers", ",".join(MARKERS)])
    assert args.pod_resource_markers == MARKERS
    assert parser.parse_args([]).pod_resource_markers == ()
    with pytest.raises(SystemExit):
        parser.parse_args(["--pod-resource-markers", "nvidia.com/gpu"])


def test_vulcan_never_counts_a_marker_as_capacity() -> None:
    pod = marked_pod()
    # kube-scheduler's own sum has it (its fit ignores it by ignoredByScheduler) ...
    assert pod_requests(pod["spec"]).get("vulcan.sh/managed") == 1
    # ... vulcan's do not.
    assert PodRecord(pod).requests == ResourceVector({"cpu": 2000, "pods": 1})
    assert request_of(pod["spec"]) == ResourceVector({"cpu": 2000, "pods": 1})
    group = PodGroupRecord(
        {
            "metadata": {"name": "g", "namespace": "default", "uid": "g"},
            "spec": {
                "minMember": 1,
                "minResources": {"cpu": "2", "vulcan.sh/managed": "1", "nvidia.com/gpu": "1"},
            },
        }
    )
    assert group.min_resources == ResourceVector({"cpu": 2000, "nvidia.com/gpu": 1})


def test_without_group_keeps_the_same_vector_when_there_is_nothing_to_drop() -> None:
    plain = ResourceVector({"cpu": 1000, "example.com/x": 2})
    assert without_group(plain, MARKER_RESOURCE_GROUP) is plain
    assert without_group(plain, "example.com") == ResourceVector({"cpu": 1000})


def test_the_bind_marker_goes_only_to_pods_of_vulcans_schedulers() -> None:
    marker = BindMarker(BINDING_MARKER, frozenset({"volcano"}))
    ours = {"spec": {"schedulerName": "volcano", "containers": [{"name": "a"}]}}
    theirs = {"spec": {"containers": [{"name": "a"}]}}  # default-scheduler
    marker.add_to(ours)
    marker.add_to(theirs)
    assert ours["spec"]["containers"][0]["resources"] == {"limits": {BINDING_MARKER: "1"}}
    # A scheduler without vulcan's entries would count it as a resource no node has.
    assert "resources" not in theirs["spec"]["containers"][0]
    assert markers.carries(ours["spec"], BINDING_MARKER)
    assert not markers.carries(theirs["spec"], BINDING_MARKER)


def test_a_marker_is_found_as_kube_scheduler_finds_managed_resources() -> None:
    def spec(field: str, part: str) -> dict[str, Any]:
        return {field: [{"name": "a"}, {"name": "b", "resources": {part: {BINDING_MARKER: "1"}}}]}

    for field in ("containers", "initContainers"):
        for part in ("requests", "limits"):
            assert markers.carries(spec(field, part), BINDING_MARKER)
    assert not markers.carries({"containers": [{"name": "a", "resources": None}]}, BINDING_MARKER)
    assert not markers.carries(None, BINDING_MARKER)


def test_the_bind_marker_flags_take_one_name_in_vulcans_domain() -> None:
    controllers = argparse.ArgumentParser()
    add_job_flags(controllers)
    assert controllers.parse_args([f"--bind-marker={BINDING_MARKER}"]).bind_marker == BINDING_MARKER
    assert controllers.parse_args([]).bind_marker == ""
    extender = argparse.ArgumentParser()
    add_extender_flags(extender)
    assert extender.parse_args([f"--bind-marker={BINDING_MARKER}"]).bind_marker == BINDING_MARKER
    assert extender.parse_args([]).bind_marker == ""
    for parser in (controllers, extender):
        for wrong in ("nvidia.com/gpu", f"{BINDING_MARKER},{MARKERS[0]}"):
            with pytest.raises(SystemExit):
                parser.parse_args([f"--bind-marker={wrong}"])


def test_a_pod_record_knows_the_markers_it_carries() -> None:
    spec = {
        "initContainers": [{"name": "i", "resources": {"requests": {SCHEDULING_MARKER: "1"}}}],
        "containers": [
            {"name": "c", "resources": {"limits": {BINDING_MARKER: "1", "cpu": "1"}}},
        ],
    }
    pod = PodRecord({"metadata": {"name": "p", "namespace": "ns"}, "spec": spec})
    assert pod.markers == {SCHEDULING_MARKER, BINDING_MARKER}
    plain = PodRecord({"metadata": {"name": "q", "namespace": "ns"}, "spec": {"containers": []}})
    assert plain.markers == frozenset()
