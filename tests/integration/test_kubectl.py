"""The real kubectl against the embedded API server, as a user would type it."""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
import yaml

from sim.apiserver.server import EmbeddedApiServer
from tests.helpers import volcano_fixture_files

KUBECTL = shutil.which("kubectl")
pytestmark = pytest.mark.skipif(
    KUBECTL is None,
    reason="kubectl is not installed and could not be installed (Debian package "
    "kubernetes-client; `make test` tries apt-get)",
)


class Kubectl:
    def __init__(self, kubeconfig: Path, cache: Path) -> None:
        self.base = [
            KUBECTL or "kubectl",
            "--kubeconfig",
            str(kubeconfig),
            "--cache-dir",
            str(cache),
            "--request-timeout=20s",
        ]

    async def __call__(
        self, *args: str, stdin: str | None = None, check: bool = True
    ) -> tuple[int, str, str]:
        process = await asyncio.create_subprocess_exec(
            *self.base,
            *args,
            stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env={**os.environ, "KUBECTL_COMMAND_HEADERS": "false"},
        )
        out, err = await asyncio.wait_for(
            process.communicate(stdin.encode() if stdin is not None else None), timeout=60
        )
        code = process.returncode or 0
        if check and code != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({code}): {err.decode()}")
        return code, out.decode(), err.decode()

    async def spawn(self, *args: str) -> asyncio.subprocess.Process:
        return await asyncio.create_subprocess_exec(
            *self.base, *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
        )


@pytest_asyncio.fixture
async def kubectl(tmp_path: Path) -> AsyncIterator[Kubectl]:
    config = tmp_path / "kubeconfig"
    async with EmbeddedApiServer(kubeconfig_out=config):
        yield Kubectl(config, tmp_path / "cache")


POD = """\
apiVersion: v1
kind: Pod
metadata:
  name: web
  labels: {app: web}
spec:
  containers:
    - name: main
      image: nginx
    - name: side
      image: envoy
"""


async def test_create_every_volcano_fixture_and_get(kubectl: Kubectl) -> None:
    # kubectl's default (strict) validation: it finds `fieldValidation` in our OpenAPI v3 and
    # leaves the judgement to the server.
    for path in volcano_fixture_files():
        _, out, _ = await kubectl("create", "-f", str(path))
        assert "created" in out
    _, out, _ = await kubectl("get", "vcjob")
    # The CRD's printer columns come back as a server-side Table.
    assert out.split("\n")[0].split() == ["NAME", "STATUS", "MINAVAILABLE", "RUNNINGS", "AGE"]
    for name in ("lm-mpi-job", "mpi-job", "tensorflow-benchmark", "test-job"):
        assert name in out
    _, out, _ = await kubectl("get", "pg", "-o", "yaml")
    listed = yaml.safe_load(out)
    group = listed["items"][0]
    assert group["kind"] == "PodGroup"
    assert group["spec"]["minTaskMember"] == {"mpimaster": 1, "mpiworker": 3}
    _, out, _ = await kubectl("get", "q")
    assert "research" in out and "prod" in out
    _, out, _ = await kubectl("get", "jf", "pipeline", "-o", "jsonpath={.spec.flows[4].name}")
    assert out == "job-e"
    _, out, _ = await kubectl("get", "jt", "-o", "name")
    assert "jobtemplate.flow.volcano.sh/job-a" in out


async def test_strict_validation_rejects_unknown_fields(kubectl: Kubectl) -> None:
    queue = "apiVersion: scheduling.volcano.sh/v1beta1\nkind: Queue\nmetadata: {name: q}\n"
    code, _, err = await kubectl(
        "create", "-f", "-", stdin=queue + "spec: {wieght: 2}\n", check=False
    )
    assert code != 0 and 'strict decoding error: unknown field "spec.wieght"' in err
    code, _, err = await kubectl(
        "create", "-f", "-", stdin=queue + "spec: {weight: -2}\n", check=False
    )
    assert code != 0 and "spec.weight" in err and "greater than or equal to 1" in err


async def test_pod_table_columns(kubectl: Kubectl) -> None:
    await kubectl("create", "-f", "-", stdin=POD)
    _, out, _ = await kubectl("get", "pods")
    header, row = out.strip().split("\n")
    assert header.split() == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert row.split()[:4] == ["web", "0/2", "Pending", "0"]


EVENTS_FOR_SORT = """\
apiVersion: v1
kind: Event
metadata: {name: late}
involvedObject: {kind: Pod, name: web, namespace: default}
reason: Later
message: second
type: Normal
firstTimestamp: "2026-01-01T10:05:00Z"
lastTimestamp: "2026-01-01T10:05:00Z"
count: 1
source: {component: vc-controller-manager}
---
apiVersion: v1
kind: Event
metadata: {name: early}
involvedObject: {kind: Pod, name: web, namespace: default}
reason: Earlier
message: first
type: Normal
firstTimestamp: "2026-01-01T10:00:00Z"
lastTimestamp: "2026-01-01T10:00:00Z"
count: 1
source: {component: vc-controller-manager}
---
apiVersion: events.k8s.io/v1
kind: Event
metadata: {name: bound}
eventTime: "2026-01-01T10:02:00.000000Z"
reportingController: default-scheduler
reportingInstance: default-scheduler-1
action: Binding
reason: Scheduled
regarding: {kind: Pod, name: web, namespace: default}
note: assigned
type: Normal
"""


async def test_sort_by_sorts_the_rows_of_a_table(kubectl: Kubectl) -> None:
    """kubectl --sort-by asks for Table rows with includeObject=Object and sorts by the
    embedded objects: with only metadata embedded it printed `No resources found`."""
    await kubectl("create", "-f", "-", stdin=EVENTS_FOR_SORT)
    _, out, _ = await kubectl("get", "events", "--sort-by=.lastTimestamp")
    reasons = [line.split()[2] for line in out.strip().splitlines()[1:]]
    # kubectl puts the event with no lastTimestamp (events.k8s.io, as kube-scheduler's) first.
    assert reasons == ["Scheduled", "Earlier", "Later"], out
    _, out, _ = await kubectl("get", "events", "--sort-by=.metadata.name", "-o", "name")
    assert out.split() == ["event/bound", "event/early", "event/late"]


async def test_apply_twice_then_changed(kubectl: Kubectl, tmp_path: Path) -> None:
    manifest = tmp_path / "pod.yaml"
    manifest.write_text(POD)
    _, out, _ = await kubectl("apply", "-f", str(manifest), "--validate=false")
    assert "created" in out
    _, out, _ = await kubectl("apply", "-f", str(manifest), "--validate=false")
    assert "unchanged" in out
    manifest.write_text(
        POD.replace("image: envoy", "image: envoy:v2").replace(
            "labels: {app: web}", "labels: {app: web, tier: edge}"
        )
    )
    _, out, _ = await kubectl("apply", "-f", str(manifest), "--validate=false")
    assert "configured" in out
    _, out, _ = await kubectl("get", "pod", "web", "-o", "yaml")
    pod = yaml.safe_load(out)
    assert pod["metadata"]["labels"] == {"app": "web", "tier": "edge"}
    assert [c["image"] for c in pod["spec"]["containers"]] == ["nginx", "envoy:v2"]


async def test_patch_label_delete(kubectl: Kubectl) -> None:
    await kubectl("create", "-f", "-", "--validate=false", stdin=POD)
    await kubectl(
        "patch", "pod", "web", "--type", "merge", "-p", '{"metadata":{"annotations":{"a":"1"}}}'
    )
    await kubectl(
        "patch",
        "pod",
        "web",
        "--type",
        "json",
        "-p",
        '[{"op":"add","path":"/metadata/annotations/b","value":"2"}]',
    )
    await kubectl(
        "patch",
        "pod",
        "web",
        "--type",
        "strategic",
        "-p",
        '{"spec":{"containers":[{"name":"side","image":"envoy:v3"}]}}',
    )
    await kubectl("label", "pod", "web", "team=a")
    _, out, _ = await kubectl("get", "pod", "web", "-o", "yaml")
    pod = yaml.safe_load(out)
    assert pod["metadata"]["annotations"] == {"a": "1", "b": "2"}
    assert pod["metadata"]["labels"] == {"app": "web", "team": "a"}
    assert [c["image"] for c in pod["spec"]["containers"]] == ["nginx", "envoy:v3"]
    await kubectl("label", "pod", "web", "team-")
    _, out, _ = await kubectl("get", "pods", "-l", "team=a", "-o", "name")
    assert out.strip() == ""
    _, out, _ = await kubectl("get", "pods", "-l", "app=web", "-o", "name")
    assert out.strip() == "pod/web"
    _, out, _ = await kubectl("delete", "pod", "web")
    assert "deleted" in out
    code, _, err = await kubectl("get", "pod", "web", check=False)
    assert code != 0 and "NotFound" in err


async def test_delete_custom_resource(kubectl: Kubectl) -> None:
    path = next(p for p in volcano_fixture_files() if p.name == "queues.yaml")
    await kubectl("create", "-f", str(path), "--validate=false")
    _, out, _ = await kubectl("delete", "queue", "prod")
    assert "deleted" in out
    _, out, _ = await kubectl("get", "q", "-o", "name")
    assert out.split() == ["queue.scheduling.volcano.sh/research"]


async def test_get_watch_sees_a_change(kubectl: Kubectl) -> None:
    await kubectl("create", "-f", "-", "--validate=false", stdin=POD)
    watcher = await kubectl.spawn("get", "pods", "-w", "-o", "name")
    try:
        assert watcher.stdout is not None
        first = await asyncio.wait_for(watcher.stdout.readline(), timeout=30)
        assert first.decode().strip() == "pod/web"
        await kubectl(
            "create", "-f", "-", "--validate=false", stdin=POD.replace("name: web", "name: api")
        )
        line = await asyncio.wait_for(watcher.stdout.readline(), timeout=30)
        assert line.decode().strip() == "pod/api"
    finally:
        watcher.kill()
        await watcher.wait()


WORKLOADS = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
data: {mode: fast}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: c, image: nginx}]}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: research}
spec: {weight: 2}
"""


async def test_a_list_from_get_o_yaml_is_reapplied_with_validation(
    kubectl: Kubectl, tmp_path: Path
) -> None:
    """What `kubectl get -o yaml` prints for several objects is a `List`; kubectl validates a
    List against the OpenAPI v2 document before sending its items."""
    await kubectl("create", "-f", "-", stdin=WORKLOADS)
    _, saved, _ = await kubectl(
        "get", "configmap/settings", "deploy/web", "queue/research", "-o", "yaml"
    )
    assert yaml.safe_load(saved)["kind"] == "List"
    path = tmp_path / "saved.yaml"
    path.write_text(saved)
    await kubectl("delete", "-f", str(path))
    _, out, err = await kubectl("create", "-f", str(path), "--validate=strict")
    assert "error validating" not in err
    assert "configmap/settings created" in out and "deployment.apps/web created" in out
    await kubectl("delete", "-f", str(path))
    _, out, err = await kubectl("apply", "-f", str(path))
    assert "error validating" not in err
    assert "queue.scheduling.volcano.sh/research created" in out
    await kubectl("delete", "-f", str(path))
    # Each item is still judged by the server: an unknown field of a custom resource is refused.
    bad = saved.replace("weight: 2", "wieght: 2")
    code, _, err = await kubectl("apply", "-f", "-", stdin=bad, check=False)
    assert code != 0 and 'unknown field "spec.wieght"' in err


async def test_get_all_lists_the_all_category(kubectl: Kubectl) -> None:
    await kubectl("create", "-f", "-", stdin=WORKLOADS)
    await kubectl("create", "job", "once", "--image=busybox")
    _, out, _ = await kubectl("get", "all")
    assert "deployment.apps/web" in out and "job.batch/once" in out
    assert "configmap" not in out and "queue" not in out  # not in the category


async def test_workload_tables_have_kube_apiserver_columns(kubectl: Kubectl) -> None:
    await kubectl("create", "job", "once", "--image=busybox")
    _, out, _ = await kubectl("get", "job", "once")
    assert out.split("\n")[0].split() == ["NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE"]
    assert out.split("\n")[1].split()[:3] == ["once", "Running", "0/1"]
    # The API server generated the Job's selector and pod labels, as kube-apiserver does.
    _, out, _ = await kubectl("get", "job", "once", "-o", "jsonpath={.spec.selector.matchLabels}")
    assert "batch.kubernetes.io/controller-uid" in out
    sts = (
        "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: db}\nspec:\n  replicas: 3\n"
        "  serviceName: db\n  selector: {matchLabels: {app: db}}\n  template:\n"
        "    metadata: {labels: {app: db}}\n    spec: {containers: [{name: c, image: pg}]}\n"
    )
    await kubectl("create", "-f", "-", stdin=sts)
    _, out, _ = await kubectl("get", "sts", "db")
    assert out.split("\n")[0].split() == ["NAME", "READY", "AGE"]
    assert out.split("\n")[1].split()[:2] == ["db", "0/3"]
    ds = sts.replace("StatefulSet", "DaemonSet").replace("  replicas: 3\n", "")
    ds = ds.replace("  serviceName: db\n", "").replace("name: db}", "name: agent}")
    await kubectl("create", "-f", "-", stdin=ds)
    _, out, _ = await kubectl("get", "ds", "agent")
    assert out.split("\n")[0].split() == [
        "NAME",
        "DESIRED",
        "CURRENT",
        "READY",
        "UP-TO-DATE",
        "AVAILABLE",
        "NODE",
        "SELECTOR",
        "AGE",
    ]


CRONJOB = """\
apiVersion: batch.volcano.sh/v1alpha1
kind: CronJob
metadata:
  name: nightly
spec:
  schedule: "0 3 * * *"
  timeZone: Asia/Tokyo
  jobTemplate:
    spec:
      tasks:
      - name: main
        replicas: 1
        template: {spec: {containers: [{name: c, image: busybox}]}}
"""


async def test_cronjob_short_names_and_columns(kubectl: Kubectl) -> None:
    _, out, _ = await kubectl("create", "-f", "-", stdin=CRONJOB)
    assert "cronjob.batch.volcano.sh/nightly created" in out
    for short in ("cronvj", "cronvcjob"):
        _, out, _ = await kubectl("get", short)
        header, row = out.strip().split("\n")
        assert header.split() == [
            "NAME",
            "SCHEDULE",
            "TIMEZONE",
            "SUSPEND",
            "LAST",
            "SCHEDULE",
            "AGE",
        ]
        assert row.split()[:5] == ["nightly", "0", "3", "*", "*"]
        assert "Asia/Tokyo" in row and "false" in row
