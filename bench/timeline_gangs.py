"""Draw `vulcan timeline` of a real run of many gangs (docs/timeline-20-gangs.png).

`python -m bench.timeline_gangs --gangs 20 --out docs/timeline-20-gangs.png` starts
`vulcan sim up --with-extender --with-controllers` (4 hollow nodes of 8 cpu), creates two queues
(qa, qb, weight 1 each) and N Volcano Jobs alternating between them (2 to 4 workers of 2 cpu,
each running 3 to 8 s), waits until every job is Completed, and draws the timeline with queue
lanes as `vulcan timeline --lanes queues` does (and node lanes next to it, FILE-nodes.png). The
objects read are saved as FILE.objects.json, so the picture can be drawn again offline."""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.sim_cluster import start_sim_up, stop_sim_up
from core.kube.client import QUEUES, VCJOBS, KubeClient
from core.kube.flags import ClientOptions


def queue(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": {"weight": 1, "reclaimable": True},
    }


def job(index: int) -> dict[str, Any]:
    workers = 2 + index % 3
    seconds = 3 + (index * 7) % 6
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": f"j{index:02d}", "namespace": "default"},
        "spec": {
            "minAvailable": workers,
            "schedulerName": "volcano",
            "queue": "qa" if index % 2 == 0 else "qb",
            "tasks": [
                {
                    "name": "worker",
                    "replicas": workers,
                    "template": {
                        "metadata": {"annotations": {"vulcan.sh/sim-duration": f"{seconds}s"}},
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [
                                {
                                    "name": "main",
                                    "image": "busybox",
                                    "resources": {"requests": {"cpu": "2"}},
                                }
                            ],
                        },
                    },
                }
            ],
        },
    }


async def run(gangs: int, out: Path) -> None:
    from vulcan.timeline.command import collect, draw

    with tempfile.TemporaryDirectory(prefix="vulcan-timeline-") as tmp:
        state = Path(tmp)
        process = await start_sim_up(
            4,
            state,
            "--with-extender",
            "--with-controllers",
            profile="cpu=8,memory=32Gi,pods=110",
        )
        try:
            client = await KubeClient.connect(
                ClientOptions(kubeconfig=str(state / "kubeconfig"), qps=0)
            )
            async with client:
                for name in ("qa", "qb"):
                    await client.create(QUEUES, queue(name))
                for index in range(gangs):
                    await client.create(VCJOBS, job(index), "default")
                deadline = time.monotonic() + 600
                while time.monotonic() < deadline:
                    jobs = (await client.list(VCJOBS, "default"))["items"]
                    phases = [
                        ((j.get("status") or {}).get("state") or {}).get("phase") for j in jobs
                    ]
                    if phases.count("Completed") == gangs:
                        break
                    await asyncio.sleep(1)
                await asyncio.sleep(2)  # the last events are written
                objects = await collect(client, "default")
        finally:
            await stop_sim_up(process)
    now = datetime.now(UTC)
    out.with_suffix(".objects.json").write_text(json.dumps({"now": now.isoformat(), **objects}))
    title = f"vulcan timeline: {gangs} Volcano Jobs in queues qa and qb, 4 nodes of 8 cpu"
    draw(objects, out, now=now, lanes_by="queues", title=title)
    nodes = out.with_name(out.stem + "-nodes" + out.suffix)
    draw(objects, nodes, now=now, lanes_by="nodes", title=title)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--gangs", type=int, default=20)
    parser.add_argument("--out", type=Path, default=Path("docs/timeline-20-gangs.png"))
    args = parser.parse_args()
    asyncio.run(run(args.gangs, args.out))


if __name__ == "__main__":
    main()
