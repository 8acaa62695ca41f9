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
