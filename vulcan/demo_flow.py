"""`vulcan demo flow`: Volcano's JobFlow pipeline on the embedded cluster, stage by stage.

The users' YAML (`vulcan/examples/jobflow-pipeline.yaml`, shipped in the package; the same
file as the repository's examples/jobflow-pipeline.yaml, in Volcano's JobFlow shape): five
JobTemplates and a JobFlow running job A, then B, then C and D in parallel,
then E once both completed. The JobFlow controller creates each Job when its targets
completed; the job controller, vulcan's extender and the hollow kubelets run it. One line per
change of what a user would watch (`kubectl get jobflow,vcjob`); exit 0 once the flow Succeeded.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from core.kube.client import JOBFLOWS, JOBTEMPLATES, VCJOBS, ApiError, KubeClient
from vulcan.demo_cluster import Watch, controllers_demo, run_demo

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
    async def body(watch: Watch) -> bool:
        for doc in yaml.safe_load_all(PIPELINE.read_text()):
            if doc:
                resource = JOBFLOWS if doc["kind"] == "JobFlow" else JOBTEMPLATES
                doc["metadata"]["namespace"] = "default"
                await watch.client.create(resource, doc)
        watch.say("kubectl apply -f jobflow-pipeline.yaml")

        async def look() -> tuple[str, bool | None]:
            line, phase = await _state(watch.client)
            return line, (phase == "Succeed") if phase in ("Succeed", "Failed") else None

        return await watch.follow(look, TIMEOUT)

    return await controllers_demo(
        "flow",
        "vulcan demo flow: Volcano's JobFlow pipeline (A, then B, then C and D in parallel, then "
        "E) from the users' YAML, on the embedded cluster with vulcan's extender and "
        "controllers. '·' = not created yet.",
        body,
        "every stage ran after its dependencies; the flow Succeeded",
        ("--pod-duration", RUN_TIME),
    )


def run_flow() -> int:
    return run_demo(_flow_demo)
