"""The filter rule for pods the podgroup controller has not grouped yet: a pod of vulcan's
scheduler that names no PodGroup is refused on every candidate as unresolvable, with the
reason; once it names its group (the controller's annotation, or the coscheduling label) it is
a gang member like any other; pods of other schedulers pass as plain pods."""

from __future__ import annotations

import asyncio
import itertools
import time
from typing import Any

import orjson
import pytest

from core.cache import ClusterCache
from core.records import NodeRecord, PodGroupRecord, PodRecord
from extender import ungrouped
from extender.binder import Binder
from extender.gang_options import GangOptions
from extender.gang_server import GangExtenderServer
from extender.gangs import GangScheduler
from extender.ledger import GangLedger
from plugins.framework.config import default_config
from plugins.framework.node_order import Framework

_rv = itertools.count(1)
NODES = ["n0", "n1"]
GROUP_KEY = "scheduling.k8s.io/group-name"


def node(name: str) -> NodeRecord:
    return NodeRecord(
        {
            "metadata": {"name": name, "resourceVersion": str(next(_rv))},
            "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"}},
        }
    )


def pod(
    scheduler: str | None = "volcano",
    annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
        **spec,
    }
    if scheduler is not None:
        body["schedulerName"] = scheduler
    return {
        "metadata": {
            "name": "p",
            "namespace": "ns",
            "uid": "u-1",
            "annotations": annotations or {},
            # A label value spelling the scheduler's name must not confuse the rule.
            "labels": labels if labels is not None else {"app": "volcano"},
        },
        "spec": body,
        "status": {"phase": "Pending"},
    }


def server(
    names: tuple[str, ...] = ("volcano",), wait: float = 0.5
) -> tuple[GangExtenderServer, GangScheduler]:
    cache = ClusterCache()
    for name in NODES:
        cache.on_node_add(node(name))
    ledger = GangLedger(cache.bump_node)

    async def commit(args: Any) -> None:
        raise AssertionError("no bind in these tests")

    gangs = GangScheduler(cache, ledger, None, commit, options=GangOptions(pipelined_wait=wait))
    gangs.poke = lambda: None  # type: ignore[method-assign]  # no scheduling loop runs here
    framework = Framework(default_config())
    extender = GangExtenderServer(
        cache,
        framework,
        Binder(None),  # type: ignore[arg-type]
        ledger=ledger,
        gangs=gangs,
        scheduler_names=names,
    )
    return extender, gangs


async def filter_(extender: GangExtenderServer, doc: dict[str, Any]) -> dict[str, Any]:
    body = orjson.dumps({"Pod": doc, "Nodes": None, "NodeNames": NODES})
    reply = extender.filter(body)  # the answer now, or once the filter has waited
    answer: dict[str, Any] = orjson.loads(reply if isinstance(reply, bytes) else await reply)
    return answer


async def test_an_ungrouped_pod_of_vulcans_scheduler_waits_for_its_podgroup() -> None:
    extender, _ = server()
    answer = await filter_(extender, pod())
    assert answer["NodeNames"] == []
    assert not answer.get("FailedNodes")
    assert answer["FailedAndUnresolvableNodes"] == dict.fromkeys(NODES, ungrouped.REASON)
    assert "waiting for its PodGroup" in ungrouped.REASON


@pytest.mark.parametrize(
    "doc",
    [
        pod(scheduler=None),  # default-scheduler
        pod(scheduler="default-scheduler"),
        pod(scheduler="other"),
        pod(scheduler="volcano-two"),  # a name that merely starts like ours
    ],
)
async def test_pods_of_other_schedulers_pass_as_plain_pods(doc: dict[str, Any]) -> None:
    extender, _ = server()
    answer = await filter_(extender, doc)
    assert sorted(answer["NodeNames"]) == NODES
    assert not answer.get("FailedAndUnresolvableNodes")


async def test_every_configured_scheduler_name_counts() -> None:
    extender, _ = server(ungrouped.scheduler_names(["volcano,batch", "batch"]))
    assert extender.scheduler_names == ("volcano", "batch")
    for name in ("volcano", "batch"):
        answer = await filter_(extender, pod(scheduler=name))
        assert answer["NodeNames"] == [], name
    answer = await filter_(extender, pod(scheduler="default-scheduler"))
    assert sorted(answer["NodeNames"]) == NODES


async def test_once_grouped_the_pod_is_a_gang_member() -> None:
    """The annotation (the controller's) or the coscheduling label makes the pod a member:
    the group's own rules decide from there (here: its PodGroup is not seen yet)."""
    extender, _ = server()
    for doc in (
        pod(annotations={GROUP_KEY: "pg"}),
        pod(labels={"scheduling.x-k8s.io/pod-group": "pg"}),
    ):
        answer = await filter_(extender, doc)
        assert answer["NodeNames"] == []
        assert set(answer["FailedAndUnresolvableNodes"].values()) == {"podgroup ns/pg not found"}


async def test_a_grouped_pod_of_an_admitted_gang_is_placed() -> None:
    extender, gangs = server()
    gangs.cache.on_podgroup_add(
        PodGroupRecord(
            {
                "metadata": {"name": "pg", "namespace": "ns", "resourceVersion": "1"},
                "spec": {"minMember": 1},
                "status": {"phase": "Inqueue"},
            }
        )
    )
    gangs.admissions.admit("ns/pg")
    answer = await filter_(extender, pod(annotations={GROUP_KEY: "pg"}))
    assert len(answer["NodeNames"]) == 1 and answer["NodeNames"][0] in NODES


def test_the_rule_skips_pods_with_kubernetes_native_gang_fields() -> None:
    """kube-scheduler's own gang plugin handles them; vulcan's cache puts them in no group,
    so refusing them would hold them forever."""
    names = ("volcano",)
    doc = pod(workloadRef={"name": "w"})
    assert not ungrouped.awaits_group("ns", doc["metadata"], doc["spec"], names)
    doc = pod()
    assert ungrouped.awaits_group("ns", doc["metadata"], doc["spec"], names)
    doc = pod(annotations={GROUP_KEY: ""})  # an empty name names no group
    assert ungrouped.awaits_group("ns", doc["metadata"], doc["spec"], names)


def test_scheduler_names_default_to_the_controllers_default() -> None:
    assert ungrouped.scheduler_names(None) == ("volcano",)
    assert ungrouped.scheduler_names([" a , b", "", "a"]) == ("a", "b")
    assert ungrouped.scheduler_names([","]) == ("volcano",)


def _pending_group(gangs: GangScheduler) -> None:
    gangs.cache.on_podgroup_add(
        PodGroupRecord(
            {
                "metadata": {"name": "pg", "namespace": "ns", "resourceVersion": "1"},
                "spec": {"minMember": 1},
                "status": {"phase": "Pending"},
            }
        )
    )


async def test_a_member_no_pass_has_judged_is_told_what_the_next_pass_says() -> None:
    """Grouped just now (kube-scheduler's copy names the group, no pass saw the member in it
    yet): refused with a placeholder, kube-scheduler would park it with those words until an
    update of the pod, which a gang that stays refused never gets. The filter waits for the
    pass instead and answers with its reason (here: 16 cpus, on nodes of 8)."""
    extender, gangs = server()
    _pending_group(gangs)
    member = pod(annotations={GROUP_KEY: "pg"})
    member["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "16"
    loop = asyncio.get_running_loop()
    # The scheduling loop's answer to a poke: a pass soon after.
    gangs.poke = lambda: loop.call_later(0.01, gangs.schedule_pass)  # type: ignore[method-assign]

    async def the_pass() -> None:
        await asyncio.sleep(0.05)
        gangs.cache.on_pod_add(PodRecord(member))  # the controller's annotation arrives
        gangs.schedule_pass()

    later = asyncio.create_task(the_pass())
    answer = await filter_(extender, member)
    await later
    told = set(answer["FailedAndUnresolvableNodes"].values())
    assert told == set((await filter_(extender, member))["FailedAndUnresolvableNodes"].values())
    (reason,) = told
    assert reason != "gang ns/pg: waiting for admission" and "cpu" in reason, reason


async def test_without_a_pass_the_wait_for_a_judgement_is_bounded() -> None:
    extender, gangs = server(wait=0.1)
    _pending_group(gangs)
    started = time.monotonic()
    answer = await filter_(extender, pod(annotations={GROUP_KEY: "pg"}))
    assert time.monotonic() - started >= 0.1
    assert set(answer["FailedAndUnresolvableNodes"].values()) == {
        "gang ns/pg: waiting for admission"
    }
