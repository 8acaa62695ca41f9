"""The filter rule of `--bind-marker`: with kube-scheduler's bind entry restricted to vulcan's
marker, a member of a gang that needs the barrier (minMember > 1, with the gang plugin) and
lacks the marker is refused on every candidate, saying why; a marked member, a member of a
minMember-1 group, any pod without the flag, and any member under a conf without `gang` go on
as before."""

from __future__ import annotations

import dataclasses
from typing import Any

import orjson

from core.api.keys import BINDING_MARKER
from core.records import PodGroupRecord
from plugins.framework.config import default_config, parse_scheduler_config
from plugins.framework.registry import build_policy
from tests.helpers import pod_info
from tests.unit.test_ungrouped_filter import GROUP_KEY, NODES, pod, server


def member(marked: bool, part: str = "limits") -> dict[str, Any]:
    doc = pod(annotations={GROUP_KEY: "pg"})
    if marked:
        doc["spec"]["containers"][0]["resources"][part] = {BINDING_MARKER: "1"}
    return doc


async def answer_for(doc: dict[str, Any], min_member: int, marker: str | None) -> dict[str, Any]:
    extender, gangs = server()
    gangs.options = dataclasses.replace(gangs.options, bind_marker=marker)
    gangs.cache.on_podgroup_add(
        PodGroupRecord(
            {
                "metadata": {"name": "pg", "namespace": "ns", "resourceVersion": "1"},
                "spec": {"minMember": min_member},
                "status": {"phase": "Inqueue"},
            }
        )
    )
    gangs.admissions.admit("ns/pg")
    body = orjson.dumps({"Pod": doc, "Nodes": None, "NodeNames": NODES})
    reply = extender.filter(body)  # the answer now, or once the filter has waited
    return dict(orjson.loads(reply if isinstance(reply, bytes) else await reply))


async def test_an_unmarked_member_of_a_gang_is_refused_everywhere_saying_why() -> None:
    answer = await answer_for(member(marked=False), 2, BINDING_MARKER)
    assert answer["NodeNames"] == []
    reasons = set(answer["FailedAndUnresolvableNodes"].values())
    assert len(reasons) == 1 and set(answer["FailedAndUnresolvableNodes"]) == set(NODES)
    (reason,) = reasons
    assert reason.startswith("gang ns/pg (minMember 2): pod ns/p lacks the bind marker")
    assert f"resources.limits {{{BINDING_MARKER}: 1}}" in reason


async def test_marked_members_and_pods_needing_no_barrier_go_on() -> None:
    for doc, min_member, marker in (
        (member(marked=True), 2, BINDING_MARKER),
        (member(marked=True, part="requests"), 2, BINDING_MARKER),
        (member(marked=False), 1, BINDING_MARKER),  # no barrier to keep
        (member(marked=False), 2, None),  # the bind entry takes every pod
    ):
        answer = await answer_for(doc, min_member, marker)
        assert len(answer["NodeNames"]) == 1, (min_member, marker, answer)


async def test_without_the_gang_plugin_members_bind_at_once_so_none_is_refused() -> None:
    extender, gangs = server()
    gangs.options = dataclasses.replace(gangs.options, bind_marker=BINDING_MARKER)
    # A conf without `gang`: no barrier holds any bind.
    gangs.policy = build_policy(parse_scheduler_config("tiers:\n- plugins:\n  - name: priority\n"))
    group = PodGroupRecord(
        {
            "metadata": {"name": "pg", "namespace": "ns", "resourceVersion": "1"},
            "spec": {"minMember": 3},
        }
    )
    assert extender.gang_verbs.unmarked_member(pod_info(member(marked=False)), group) is None
    gangs.policy = build_policy(default_config())
    assert extender.gang_verbs.unmarked_member(pod_info(member(marked=False)), group)
