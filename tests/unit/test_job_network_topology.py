"""The job controller copies a Job's networkTopology to the PodGroup it makes, as Volcano's
createOrUpdatePodGroup does (highestTierAllowed, else highestTierName), and leaves it alone
afterwards (Volcano's shouldUpdateExistingPodGroup never compares it)."""

from __future__ import annotations

from typing import Any

from core.api.batch import JobSpec
from core.api.defaults import default_job_spec
from flow_controller.job import objects

META = {"name": "nt", "namespace": "default", "uid": "u"}


def spec(topology: dict[str, Any] | None) -> JobSpec:
    task = {"name": "w", "replicas": 4, "template": {"spec": {"containers": [{"name": "c"}]}}}
    raw: dict[str, Any] = {"tasks": [task]}
    if topology is not None:
        raw["networkTopology"] = topology
    return default_job_spec(JobSpec.model_validate(raw))


def test_the_podgroup_gets_the_jobs_network_topology() -> None:
    group = objects.build_podgroup(META, spec({"mode": "hard", "highestTierAllowed": 1}))
    assert group["spec"]["networkTopology"] == {"mode": "hard", "highestTierAllowed": 1}
    named = objects.build_podgroup(META, spec({"mode": "soft", "highestTierName": "spine"}))
    assert named["spec"]["networkTopology"] == {"mode": "soft", "highestTierName": "spine"}
    assert "networkTopology" not in objects.build_podgroup(META, spec(None))["spec"]


def test_a_changed_network_topology_is_not_written_to_the_podgroup() -> None:
    made = objects.build_podgroup(META, spec({"mode": "hard", "highestTierAllowed": 1}))["spec"]
    now = objects.build_podgroup(META, spec({"mode": "hard", "highestTierAllowed": 2}))["spec"]
    assert objects.podgroup_changes(made, now) == {}
