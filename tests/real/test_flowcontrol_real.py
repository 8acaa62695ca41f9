"""The install's API Priority and Fairness FlowSchemas on a real kube-apiserver: both are
accepted and point at priority levels that exist (not Dangling), and vulcan's own requests are
dispatched under them: its Lease renewals at `leader-election`, the rest at `workload-high`
(kube-apiserver's `apiserver_flowcontrol_dispatched_requests_total`)."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.conftest import wait_for
from tests.real.conftest import RealCluster

pytestmark = pytest.mark.real

FLOWSCHEMAS = "/apis/flowcontrol.apiserver.k8s.io/v1/flowschemas"
LEVELS = {"vulcan-leader-election": "leader-election", "vulcan-components": "workload-high"}


def dispatched(cluster: RealCluster) -> dict[tuple[str, str], float]:
    """(FlowSchema, priority level) -> requests dispatched so far."""
    text = cluster.kubectl("get", "--raw", "/metrics")
    out: dict[tuple[str, str], float] = {}
    for family in text_string_to_metric_families(text):
        if family.name != "apiserver_flowcontrol_dispatched_requests":
            continue
        for sample in family.samples:
            key = (sample.labels.get("flow_schema", ""), sample.labels.get("priority_level", ""))
            out[key] = out.get(key, 0.0) + sample.value
    return out


def test_vulcans_requests_are_served_at_its_flowschemas_levels(cluster: RealCluster) -> None:
    for name, level in LEVELS.items():
        schema = cluster.get(f"{FLOWSCHEMAS}/{name}")
        assert schema["spec"]["priorityLevelConfiguration"]["name"] == level
        conditions = {c["type"]: c["status"] for c in schema["status"].get("conditions", [])}
        assert conditions.get("Dangling") == "False", schema["status"]

    def served() -> bool:  # Lease renewals come every few seconds; the rest at start already
        counts = dispatched(cluster)
        return all(counts.get((name, level), 0) > 0 for name, level in LEVELS.items())

    wait_for("vulcan's requests dispatched under its FlowSchemas", served, timeout=60)
