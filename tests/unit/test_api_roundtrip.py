"""Every Volcano fixture decodes into the models, round-trips without losing a field, and is
admitted; the models read Volcano's field names and apply Volcano's defaults."""

from __future__ import annotations

import copy
from pathlib import Path

import orjson
import pytest

from core.api.admission import admit, apply_defaults, decode
from core.api.batch import Job
from core.api.flow import JobFlow, JobTemplate
from core.api.scheduling import PodGroup, Queue
from core.manifests import load_all
from tests.helpers import volcano_fixture_files

FIXTURE_DOCS = [
    pytest.param(doc, id=f"{path.name}:{doc['kind']}/{doc['metadata']['name']}")
    for path in volcano_fixture_files()
    for doc in load_all(path.read_text())
]


def test_fixtures_cover_every_kind_users_write() -> None:
    kinds = {p.values[0]["kind"] for p in FIXTURE_DOCS}
    assert {"Job", "PodGroup", "Queue", "JobFlow", "JobTemplate"} <= kinds


@pytest.mark.parametrize("doc", FIXTURE_DOCS)
def test_fixture_round_trips_without_losing_a_field(doc: dict) -> None:
    original = copy.deepcopy(doc)
    _, obj = decode(doc)
    assert obj.to_dict() == original
    # ...and through JSON, as the API server would store it.
    assert orjson.loads(orjson.dumps(obj.to_dict())) == orjson.loads(orjson.dumps(original))
    assert doc == original, "decoding must not mutate the input"


@pytest.mark.parametrize("doc", FIXTURE_DOCS)
def test_fixture_is_admitted(doc: dict) -> None:
    result = admit(doc)
    assert result.allowed, result.errors


def test_pod_template_keeps_every_field() -> None:
    doc = _fixture("lm-mpi-job.yaml")[0]
    _, job = decode(doc)
    assert isinstance(job, Job)
    template = job.spec.tasks[0].template
    assert template["spec"]["imagePullSecrets"] == [{"name": "default-secret"}]
    container = template["spec"]["containers"][0]
    assert container["ports"] == [{"containerPort": 22, "name": "mpijob-port"}]
    assert container["workingDir"] == "/home"


def test_job_fields_read_with_volcano_names() -> None:
    _, job = decode(_fixture("lm-mpi-job.yaml")[0])
    assert isinstance(job, Job)
    assert job.spec.min_available == 4
    assert job.spec.scheduler_name == "volcano"
    assert job.spec.plugins == {"ssh": [], "svc": []}
    assert job.spec.policies[0].event == "PodEvicted"
    assert job.spec.policies[0].action == "RestartJob"
    assert [t.name for t in job.spec.tasks] == ["mpimaster", "mpiworker"]
    assert job.spec.tasks[0].policies[0].action == "CompleteJob"
    # CRD defaults are visible on the model but not invented on output.
    assert job.spec.queue == "default"
    assert job.spec.max_retry == 3
    assert "queue" not in job.to_dict()["spec"]


def test_podgroup_status_is_read() -> None:
    _, group = decode(_fixture("lm-mpi-job-podgroup.yaml")[0])
    assert isinstance(group, PodGroup)
    assert group.spec.min_member == 4
    assert group.spec.min_task_member == {"mpimaster": 1, "mpiworker": 3}
    assert group.spec.min_resources["cpu"] == "3500m"
    assert group.status.phase == "Pending"
    unschedulable = group.status.conditions[0]
    assert unschedulable.type == "Unschedulable"
    assert unschedulable.reason == "NotEnoughResources"
    assert unschedulable.transition_id == "f4259d3b-e881-4b09-b8e5-411e5b71150d"
    assert group.metadata.owner_references[0].kind == "Job"


def test_queues_and_flow_read() -> None:
    research, prod = (decode(d)[1] for d in _fixture("queues.yaml"))
    assert isinstance(research, Queue) and isinstance(prod, Queue)
    assert research.spec.weight == 3 and prod.spec.weight == 1
    assert prod.spec.capability == {"cpu": "64", "memory": "256Gi"}
    assert research.is_reclaimable
    docs = _fixture("jobflow-pipeline.yaml")
    flow = decode(docs[-1])[1]
    assert isinstance(flow, JobFlow)
    assert [f.name for f in flow.spec.flows] == ["job-a", "job-b", "job-c", "job-d", "job-e"]
    assert flow.spec.flows[4].depends_on.targets == ["job-c", "job-d"]
    template = decode(docs[1])[1]
    assert isinstance(template, JobTemplate)
    assert template.spec.tasks[0].replicas == 2


def test_job_defaults_follow_volcano_mutating_webhook() -> None:
    doc = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "j"},
        "spec": {
            "maxRetry": 0,
            "plugins": {"mpi": ["--master=main"]},
            "tasks": [
                {"replicas": 2, "template": {"spec": {"hostNetwork": True, "containers": []}}},
                {
                    "name": "worker",
                    "replicas": 4,
                    "partitionPolicy": {
                        "totalPartitions": 2,
                        "partitionSize": 2,
                        "minPartitions": 1,
                    },
                    "template": {"spec": {"containers": []}},
                },
            ],
        },
    }
    _, job = decode(doc)
    out = apply_defaults(job).to_dict()["spec"]
    assert out["queue"] == "default"
    assert out["schedulerName"] == "volcano"
    assert out["maxRetry"] == 3
    first, second = out["tasks"]
    assert first["name"] == "default0"
    assert first["minAvailable"] == 2
    assert first["maxRetry"] == 3
    assert first["template"]["spec"]["dnsPolicy"] == "ClusterFirstWithHostNet"
    assert second["minAvailable"] == 2  # minPartitions x partitionSize
    assert out["minAvailable"] == 4
    assert out["plugins"] == {"mpi": ["--master=main"], "svc": [], "ssh": []}
    # The input object is untouched.
    assert job.spec.tasks[0].name is None


def test_queue_defaults() -> None:
    doc = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {
            "name": "q1",
            "annotations": {
                "volcano.sh/hierarchy": "sci/dev",
                "volcano.sh/hierarchy-weights": "2/8",
            },
        },
        "spec": {"weight": 0},
    }
    _, queue = decode(doc)
    out = apply_defaults(queue).to_dict()
    assert out["spec"]["weight"] == 1
    assert out["spec"]["reclaimable"] is True
    assert out["metadata"]["annotations"]["volcano.sh/hierarchy"] == "root/sci/dev"
    assert out["metadata"]["annotations"]["volcano.sh/hierarchy-weights"] == "1/2/8"


def test_unknown_fields_are_kept_but_reported() -> None:
    doc = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "pg"},
        "spec": {"minMember": 2, "minMembr": 3},
    }
    _, group = decode(doc, strict_fields=False)
    assert group.to_dict()["spec"]["minMembr"] == 3
    result = admit(doc)
    assert [(e.field, e.reason) for e in result.errors] == [
        ("spec.minMembr", 'unknown field "spec.minMembr"')
    ]


def _fixture(name: str) -> list[dict]:
    path = next(p for p in volcano_fixture_files() if p.name == name)
    return load_all(Path(path).read_text())
