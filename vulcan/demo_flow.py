"""`vulcan demo flow`: Volcano's JobFlow pipeline on the embedded cluster, stage by stage.

The users' YAML (`vulcan/examples/jobflow-pipeline.yaml`, the same as Volcano's JobFlow
document): five JobTemplates and a JobFlow running job A, then B, then C and D in parallel,
then E once both completed. The JobFlow controller creates each Job when its targets
completed; the job controller, vulcan's extender and the hollow kubelets run it. One line per
change of what a user would watch (`kubectl get jobflow,vcjob`); exit 0 once the flow Succeeded.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import shutil
import tempfile
import time
from pathlib import Path

import yaml

from core.kube.client import JOBFLOWS, JOBTEMPLATES, VCJOBS, ApiError, KubeClient
from vulcan.demo_cluster import _cluster_args, _interruptible, _stop_fully

PIPELINE = Path(__file__).with_name("examples") / "jobflow-pipeline.yaml"
FLOW = "pipeline"
STEPS = ("job-a", "job-b", "job-c", "job-d", "job-e")
RUN_TIME = "2s"
TIMEOUT = 180.0


async def _state(client: KubeClient) -> tuple[str, str]:
    """One line of what `kubectl get jobflow,vcjob` shows, and the flow's phase."""
    try:
        flow = await client.get(JOBFLOWS, FLOW, "default")
    except ApiError as exc:
        if exc.not_found:
            return "flow not found", ""
        raise
    phase = ((flow.get("status") or {}).get("state") or {}).get("phase") or "-"
    jobs = {j["metadata"]["name"]: j for j in (await client.list(VCJOBS, "default"))["items"]}
    shown = []
    for step in STEPS:
        job = jobs.get(f"{FLOW}-{step}")
        job_phase = ((job or {}).get("status") or {}).get("state", {}).get("phase") if job else None
        shown.append(f"{step[-1]}:{(job_phase or 'created') if job else '·'}")
    return f"flow {phase:<8} jobs " + " ".join(f"{s:<12}" for s in shown).rstrip(), phase


async def _flow_demo() -> int:
    from vulcan.sim_up import Cluster

    began = time.monotonic()
    print(
        "vulcan demo flow: Volcano's JobFlow pipeline (A, then B, then C and D in parallel, then "
        "E) from the users' YAML, on the embedded cluster with vulcan's extender and "
        "controllers. '·' = not created yet.",
        flush=True,
    )
    state_dir = Path(tempfile.mkdtemp(prefix="vulcan-demo-flow-"))
    args = _cluster_args(state_dir, True, ("--pod-duration", RUN_TIME))
    args.with_controllers = True
    cluster = Cluster(args)
    ok = False
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            await cluster.start()
        client = cluster.client
        assert client is not None
        for doc in yaml.safe_load_all(PIPELINE.read_text()):
            if doc:
                resource = JOBFLOWS if doc["kind"] == "JobFlow" else JOBTEMPLATES
                await client.create(
                    resource, {**doc, "metadata": {**doc["metadata"], "namespace": "default"}}
                )
        print(f"  {time.monotonic() - began:5.1f}s  kubectl apply -f jobflow-pipeline.yaml")
        last = ""
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            line, phase = await _state(client)
            if line != last:
                print(f"  {time.monotonic() - began:5.1f}s  {line}", flush=True)
                last = line
            if phase in ("Succeed", "Failed"):
                ok = phase == "Succeed"
                break
            await asyncio.sleep(0.1)
    finally:
        await _stop_fully(cluster)
        if ok:
            shutil.rmtree(state_dir, ignore_errors=True)
        else:
            print(f"logs kept in {state_dir}", flush=True)
    print(
        f"\ndemo finished in {time.monotonic() - began:.1f}s: "
        f"{'every stage ran after its dependencies; the flow Succeeded' if ok else 'FAILED'}",
        flush=True,
    )
    return 0 if ok else 1


def run_flow() -> int:
    import logging

    from vulcan.logs import setup_logging
    from vulcan.sim_commands import run_async

    setup_logging("text", logging.WARNING)
    return int(run_async(_interruptible(_flow_demo())))
