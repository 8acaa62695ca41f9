"""While a gang backs off after a timeout the extender keeps deciding again (every pass), but it
writes its PodGroup only when there is news: the status and conditions stay the same through
the backoff, so the embedded API server's audit log shows no PATCH of the PodGroup after the one
that says the gang backs off (before, the condition carried a countdown and changed every
second)."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

from core.cache import ClusterCache
from core.kube.client import PODGROUPS, PODS, KubeClient
from core.kube.flags import ClientOptions
from extender.binder import Binder, BindError
from extender.gang_options import GangOptions
from extender.gang_verbs import GangVerbs
from extender.gangs import GangScheduler
from extender.ledger import GangLedger
from extender.protocol import BindingArgs
from sim.apiserver.server import EmbeddedApiServer, write_kubeconfig
from tests.helpers import until
from tests.integration.test_gang_scheduler import add_gpu_node, worker


def podgroup_patches(audit: Path) -> int:
    entries = [json.loads(line) for line in audit.read_text().splitlines()]
    return sum(
        1
        for e in entries
        if e["verb"] == "patch" and e["resource"] == "podgroups" and e["name"] == "job"
    )


async def test_a_backing_off_gang_patches_its_podgroup_only_when_something_changed(
    tmp_path: Path,
) -> None:
    tokens = tmp_path / "tokens.csv"
    tokens.write_text('admin-token,admin,1,"system:masters"\n')
    audit = tmp_path / "audit.log"
    async with EmbeddedApiServer(token_auth_file=tokens, audit_log_path=audit) as server:
        kubeconfig = tmp_path / "kubeconfig"
        write_kubeconfig(kubeconfig, server.url, "admin-token")
        client = await KubeClient.connect(ClientOptions(kubeconfig=str(kubeconfig), qps=0))
        now = [1000.0]  # the backoff's clock, stepped by the test instead of waited for
        cache = ClusterCache()
        gangs = None
        try:
            for name in ("gpu-0", "gpu-1"):
                await add_gpu_node(client, name)
            group = {
                "metadata": {
                    "name": "job",
                    "namespace": "default",
                    "annotations": {"vulcan.sh/gang-timeout": "200ms"},
                },
                "spec": {"minMember": 2},
            }
            await client.create(PODGROUPS, group)
            lone = await client.create(PODS, worker("job", 0))
            await client.create(PODS, worker("job", 1))
            cache.start(client)
            await cache.wait_synced(10)
            gangs = GangScheduler(
                cache,
                GangLedger(cache.bump_node),
                client,
                Binder(client).bind,
                options=GangOptions(backoff=10.0),
                clock=lambda: now[0],
            )
            gangs.start(enqueue=False)
            await until(lambda: len(cache.pods) == 2 and len(cache.podgroups) == 1)
            gangs.schedule_pass()
            assert gangs.admitted == {"default/job"}
            node = gangs.ledger.reservation_of("default/job-worker-0").node
            args = BindingArgs("job-worker-0", "default", lone["metadata"]["uid"], node)
            with contextlib.suppress(BindError):
                await GangVerbs(gangs).bind(args)  # the other member never asks: the hold times out
            assert gangs.barrier.backing_off("default/job") == 10.0
            writer = gangs.status_writer
            assert writer is not None
            gangs.schedule_pass()  # the news: the gang backs off
            await writer.flush()
            stored = await client.get(PODGROUPS, "job", "default")
            (condition,) = [
                c for c in stored["status"]["conditions"] if c["type"] == "Unschedulable"
            ]
            assert "backing off after a gang timeout until " in condition["message"]
            before = podgroup_patches(audit)
            assert before >= 1
            for _second in range(9):  # a pass per second of the backoff, as the extender runs
                now[0] += 1.0
                gangs.schedule_pass()
                await writer.flush()
            assert gangs.barrier.backing_off("default/job") == 1.0
            assert podgroup_patches(audit) == before
            again = await client.get(PODGROUPS, "job", "default")
            assert again["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"]
        finally:
            if gangs is not None:
                await gangs.stop()
            await cache.stop()
            await client.close()
