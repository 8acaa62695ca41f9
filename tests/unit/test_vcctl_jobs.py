"""vcctl's Jobs: the Job `job run` builds from flags (as Volcano's constructLaunchJobFlagsJob),
`-f` files, the `job list` table byte for byte, and what suspend/resume/delete send."""

from __future__ import annotations

import asyncio
import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from core.kube.client import COMMANDS, VCJOBS, ApiError, Resource
from tests.helpers import local_zone_utc
from vcctl import cli, jobs
from vcctl.kube import Session, Target, VcctlError


@pytest.fixture(autouse=True)
def outside_a_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)


@pytest.fixture(autouse=True)
def utc() -> Iterator[None]:
    """Dates print in local time (as Go's metav1.Time): pin the zone for exact tables."""
    with local_zone_utc():
        yield


class FakeClient:
    """The KubeClient calls vcctl makes, over in-memory objects; records writes."""

    host = "http://fake"

    def __init__(self, objects: dict[tuple[str, str | None, str], dict[str, Any]]) -> None:
        self.objects = objects
        self.created: list[tuple[Resource, dict[str, Any], str | None]] = []
        self.deleted: list[tuple[Resource, str, str | None]] = []
        self.patched: list[tuple[Resource, str, Any]] = []

    async def get(self, resource: Resource, name: str, namespace: str | None = None) -> Any:
        try:
            return self.objects[(resource.plural, namespace, name)]
        except KeyError:
            raise ApiError(404, "NotFound", f'{resource.plural} "{name}" not found') from None

    async def list(self, resource: Resource, namespace: str | None = None, **_: Any) -> Any:
        items = [
            o for (plural, ns, _name), o in self.objects.items()
            if plural == resource.plural and (namespace is None or ns == namespace)
        ]  # fmt: skip
        return {"items": items}

    async def create(
        self, resource: Resource, obj: dict[str, Any], namespace: str | None = None
    ) -> Any:
        self.created.append((resource, obj, namespace))
        meta = obj.get("metadata") or {}
        return {**obj, "metadata": {**meta, "name": meta.get("name") or "generated"}}

    async def delete(self, resource: Resource, name: str, namespace: str | None = None) -> Any:
        await self.get(resource, name, namespace)
        self.deleted.append((resource, name, namespace))

    async def patch(self, resource: Resource, name: str, patch: Any, *_: Any) -> Any:
        await self.get(resource, name, None)
        self.patched.append((resource, name, patch))


def run(handler: Any, client: FakeClient, argv: list[str]) -> str:
    args = cli.build_parser().parse_args(argv)
    out = io.StringIO()
    session = Session(client, Target(kubeconfig="/nonexistent"), out)  # type: ignore[arg-type]
    if args.check:
        args.check(args)
    asyncio.run(handler(session, args))
    return out.getvalue()


def vcjob(name: str, namespace: str = "default", **status: Any) -> dict[str, Any]:
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"uid-{name}",
            "creationTimestamp": "2024-05-01T10:00:00Z",
            "labels": status.pop("labels", {}),
        },
        "spec": {
            "queue": status.pop("queue", "default"),
            "schedulerName": status.pop("scheduler", "volcano"),
            "tasks": [{"replicas": 2}, {"replicas": 3}],
        },
        "status": status,
    }


# ----------------------------------------------------------------------------- job run


def test_the_job_built_from_flags_is_volcanos() -> None:
    job = jobs.build_job(
        "train",
        "team",
        image="busybox",
        min_available=2,
        replicas=3,
        requests=jobs.parse_resource_list("cpu=1000m,memory=100Mi"),
        limits=jobs.parse_resource_list("cpu=2,memory=1Gi"),
        scheduler="volcano",
    )
    assert job == {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "train", "namespace": "team"},
        "spec": {
            "minAvailable": 2,
            "schedulerName": "volcano",
            "tasks": [
                {
                    # No task name: Volcano sets none, the webhook names it default0.
                    "replicas": 3,
                    "template": {
                        "metadata": {"name": "train", "labels": {"job.volcano.sh": "train"}},
                        "spec": {
                            "containers": [
                                {
                                    "name": "train",
                                    "image": "busybox",
                                    "resources": {
                                        "limits": {"cpu": "2", "memory": "1Gi"},
                                        "requests": {"cpu": "1", "memory": "100Mi"},
                                    },
                                    "imagePullPolicy": "IfNotPresent",
                                }
                            ],
                            "restartPolicy": "Never",
                        },
                    },
                }
            ],
        },
    }


def test_zero_counts_and_empty_resources_are_left_out_as_go_omits_them() -> None:
    job = jobs.build_job(
        "j", "ns", image="i", min_available=0, replicas=0, requests={}, limits={},
        scheduler="s", command=["sh", "-c", "sleep 1"],
    )  # fmt: skip
    assert "minAvailable" not in job["spec"]
    assert "replicas" not in job["spec"]["tasks"][0]
    container = job["spec"]["tasks"][0]["template"]["spec"]["containers"][0]
    assert container["resources"] == {}
    assert container["command"] == ["sh", "-c", "sleep 1"]


def test_resource_lists_parse_as_populate_resource_list() -> None:
    assert jobs.parse_resource_list("") == {}
    assert jobs.parse_resource_list("cpu=500m,nvidia.com/gpu=1") == {
        "cpu": "500m",
        "nvidia.com/gpu": "1",
    }
    with pytest.raises(VcctlError, match="invalid argument syntax cpu, expected"):
        jobs.parse_resource_list("cpu")
    with pytest.raises(VcctlError, match="invalid quantity"):
        jobs.parse_resource_list("cpu=lots")


def test_run_posts_the_job_and_says_so() -> None:
    client = FakeClient({})
    out = run(jobs.run, client, ["job", "run", "-N", "train", "-n", "team", "-r", "2"])
    assert out == "run job train successfully\n"
    [(resource, body, namespace)] = client.created
    assert resource is VCJOBS and namespace == "team"
    assert body["spec"]["tasks"][0]["replicas"] == 2


def test_run_from_a_file_takes_its_namespace_unless_n_contradicts_it(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text("apiVersion: batch.volcano.sh/v1alpha1\nkind: Job\n"
                    "metadata: {name: filed, namespace: team}\nspec: {tasks: []}\n")  # fmt: skip
    client = FakeClient({})
    assert run(jobs.run, client, ["job", "run", "-f", str(path)]) == "run job filed successfully\n"
    assert client.created[0][2] == "team"
    run(jobs.run, client, ["job", "run", "-f", str(path), "-n", "team"])
    with pytest.raises(VcctlError, match="does not match the namespace 'other'"):
        run(jobs.run, client, ["job", "run", "-f", str(path), "-n", "other"])
    bare = tmp_path / "bare.yml"
    bare.write_text("kind: Job\nmetadata: {name: bare}\nspec: {}\n")
    run(jobs.run, client, ["job", "run", "-f", str(bare)])
    assert client.created[-1][2] == "default"  # the kubeconfig names none
    assert client.created[-1][1]["apiVersion"] == "batch.volcano.sh/v1alpha1"
    with pytest.raises(VcctlError, match="only support yaml file"):
        run(jobs.run, client, ["job", "run", "-f", str(tmp_path / "job.txt")])
    pod = tmp_path / "pod.yaml"
    pod.write_text("kind: Pod\nmetadata: {name: p}\n")
    with pytest.raises(VcctlError, match="expected a Job, found kind Pod"):
        run(jobs.run, client, ["job", "run", "-f", str(pod)])


# ----------------------------------------------------------------------------- job list


def test_the_list_table_is_volcanos_printf_layout() -> None:
    rows = [
        vcjob("train", running=2, pending=3, minAvailable=4, retryCount=1,
              state={"phase": "Running"}),
        vcjob("a-much-longer-name", labels={"volcano.sh/job-type": "MPI"}, succeeded=5,
              failed=1, unknown=2, state={"phase": "Completed"}),
    ]  # fmt: skip
    expected = (
        "Name                 Creation       Phase       JobType     Replicas    Min   Pending   "
        "Running   Succeeded   Failed    Unknown     RetryCount\n"
        "train                2024-05-01     Running     Batch       5           4     3         "
        "2         0           0         0           1         \n"
        "a-much-longer-name   2024-05-01     Completed   MPI         5           0     0         "
        "0         5           1         2           0         \n"
    )
    assert jobs.format_jobs(rows, all_namespaces=False) == expected
    wide = jobs.format_jobs(rows[:1], all_namespaces=True).splitlines()
    assert wide[0].startswith("Namespace   Name    Creation       Phase")
    assert wide[1].startswith("default     train   2024-05-01     Running     Batch       5")


def test_list_filters_by_queue_scheduler_and_name_substring() -> None:
    items = [
        vcjob("train-a", queue="research"),
        vcjob("train-b", queue="prod", scheduler="other"),
        vcjob("serve", queue="research"),
    ]
    names = lambda kept: [j["metadata"]["name"] for j in kept]  # noqa: E731
    assert names(jobs.select_jobs(items, queue="research")) == ["train-a", "serve"]
    assert names(jobs.select_jobs(items, scheduler="other")) == ["train-b"]
    assert names(jobs.select_jobs(items, selector="train")) == ["train-a", "train-b"]
    assert names(jobs.select_jobs(items, queue="research", selector="ser")) == ["serve"]


def test_list_says_no_resources_found() -> None:
    client = FakeClient({("jobs", "default", "x"): vcjob("x", queue="q")})
    assert run(jobs.list_jobs, client, ["job", "list", "-q", "other"]) == "No resources found\n"
    listed = run(jobs.list_jobs, client, ["job", "list", "--all-namespaces"])
    assert listed.splitlines()[1].startswith("default     x ")


# --------------------------------------------------------------- suspend, resume, delete


@pytest.mark.parametrize(("verb", "action"), [("suspend", "AbortJob"), ("resume", "ResumeJob")])
def test_suspend_and_resume_create_volcanos_command(verb: str, action: str) -> None:
    client = FakeClient({("jobs", "team", "train"): vcjob("train", "team")})
    handler = jobs.suspend if verb == "suspend" else jobs.resume
    assert run(handler, client, ["job", verb, "-N", "train", "-n", "team"]) == ""
    [(resource, body, namespace)] = client.created
    ref = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "name": "train",
        "uid": "uid-train",
        "controller": True,
        "blockOwnerDeletion": True,
    }
    assert resource is COMMANDS and namespace == "team"
    assert body == {
        "apiVersion": "bus.volcano.sh/v1alpha1",
        "kind": "Command",
        "metadata": {
            "generateName": f"train-{action.lower()}-",
            "ownerReferences": [ref],
            "namespace": "team",
        },
        "target": ref,
        "action": action,
    }


def test_a_missing_job_is_named_in_the_error() -> None:
    client = FakeClient({})
    with pytest.raises(VcctlError, match=r"^job team/gone not found$"):
        run(jobs.suspend, client, ["job", "suspend", "-N", "gone", "-n", "team"])
    with pytest.raises(VcctlError, match=r"^job default/gone not found$"):
        run(jobs.delete, client, ["job", "delete", "-N", "gone"])
    assert client.created == [] and client.deleted == []


def test_delete_says_so() -> None:
    client = FakeClient({("jobs", "default", "train"): vcjob("train")})
    assert run(jobs.delete, client, ["job", "delete", "-N", "train"]) == (
        "delete job train successfully\n"
    )
    assert client.deleted == [(VCJOBS, "train", "default")]
