"""The extender's HTTP verbs with gang scheduling in front (see extender/gangs.py).

A request about a pod that names no PodGroup goes straight to the pass-through verbs of
`ExtenderServer`; a cheap byte search for the group keys decides that before any JSON is parsed
twice, so plain pods keep the pass-through hot path as it is. A pod of vulcan's scheduler that
names no group yet waits for the podgroup controller to group it (extender/ungrouped.py); a
byte search for the scheduler names lets every other plain pod skip that check unparsed.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

from core.api import keys
from extender import protocol, ungrouped
from extender.gang_verbs import GangVerbs
from extender.gangs import GangScheduler
from extender.server import ExtenderServer, Reply
from plugins.model.filter_status import FilterStatus

# Keys whose presence in a request body may make its pod a gang member.
_GROUP_MARKERS = (keys.GROUP_NAME.encode(), keys.COSCHEDULING_POD_GROUP.encode())


# kube-scheduler's encoding of ExtenderArgs in cache mode: Go marshals its fields in order,
# compact, so the pod comes first and the candidates' names last.
_POD_FIRST = b'{"Pod":'
_CANDIDATES = b',"Nodes":null,"NodeNames":['
_LAST = b"]}"


def pod_part(body: bytes) -> bytes:
    """The body up to its candidates, so the byte searches below read the pod (a few KB), not
    the ~20 KB of candidate names after it. Only for that exact layout: nothing after the
    separator but names (DNS names: no quote, no colon) can hold its bytes, so the last one
    found is the top-level one and the whole pod is kept. Any other body is searched whole."""
    if body.startswith(_POD_FIRST) and body.endswith(_LAST):
        end = body.rfind(_CANDIDATES)
        if end > 0:
            return body[:end]
    return body


def _may_be_member(pod_json: bytes) -> bool:
    return any(marker in pod_json for marker in _GROUP_MARKERS)


class GangExtenderServer(ExtenderServer):
    def __init__(
        self,
        *args: Any,
        gangs: GangScheduler,
        scheduler_names: tuple[str, ...] = (keys.DEFAULT_SCHEDULER_NAME,),
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.gangs = gangs
        # (`self.verbs` is the base server's path table)
        self.gang_verbs = GangVerbs(gangs)
        # The podgroup controller's --scheduler-name(s): their pods are grouped before they
        # may be scheduled.
        self.scheduler_names = scheduler_names
        self._name_markers = ungrouped.name_markers(scheduler_names)

    def _may_await_group(self, pod_json: bytes) -> bool:
        return any(marker in pod_json for marker in self._name_markers)

    def filter(self, body: bytes) -> Reply:
        pod_json = pod_part(body)
        if not _may_be_member(pod_json):
            ours = self._may_await_group(pod_json)
            if not ours and not self.gang_verbs.queues_contended():
                return self.pass_through_filter(body)  # no queue can refuse anyone: hot path
            args = protocol.parse_extender_args(protocol.decode(body))
            pod = args.pod
            if ours and ungrouped.awaits_group(
                pod.namespace, pod.metadata, pod.spec, self.scheduler_names
            ):
                decision = FilterStatus.unresolvable(ungrouped.REASON, "podgroup-controller")
            else:
                decision = self.gang_verbs.queue_gate(pod, args.node_names)
            return self._filter_answer(body, args, decision)
        args = protocol.parse_extender_args(protocol.decode(body))
        pod, names = args.pod, args.node_names
        decision = self.gang_verbs.filter(pod, names)
        if self.gang_verbs.waits_for_room(pod, names, decision):
            later = self.gang_verbs.filter_once_room_frees(pod, names, decision)
            return self._member_filter_after(body, args, later)
        if self.gang_verbs.waits_for_judgement(pod, decision):
            later = self.gang_verbs.filter_once_judged(pod, names, decision)
            return self._member_filter_after(body, args, later)
        return self._member_filter_answer(body, args, decision)

    async def _member_filter_after(
        self, body: bytes, args: protocol.ExtenderArgs, later: Awaitable[FilterStatus | None]
    ) -> bytes:
        """The member's answer once the filter's wait (`later`) has it."""
        return self._member_filter_answer(body, args, await later)

    def _member_filter_answer(
        self, body: bytes, args: protocol.ExtenderArgs, decision: FilterStatus | None
    ) -> bytes:
        if decision is None:
            decision = self.gang_verbs.queue_gate(args.pod, args.node_names)
        return self._filter_answer(body, args, decision)

    def _filter_answer(
        self, body: bytes, args: protocol.ExtenderArgs, decision: FilterStatus | None
    ) -> bytes:
        if decision is None:
            return self.pass_through_filter(body)
        passed, failed, unresolvable = decision.split(args.node_names)
        self._passed_nodes.inc(len(passed))
        if failed or unresolvable:
            self._failed_nodes.inc(len(failed) + len(unresolvable))
        if args.cache_mode:
            return protocol.filter_result_cache(passed, failed, unresolvable)
        objects = {o.get("metadata", {}).get("name"): o for o in args.node_objects or ()}
        return protocol.filter_result_objects(
            [objects[n] for n in passed if n in objects], failed, unresolvable
        )

    def preempt(self, body: bytes) -> bytes:
        args = protocol.parse_preemption_args(protocol.decode(body))
        return protocol.preemption_result(self.gang_verbs.preempt(args.pod, args.victims))

    async def bind_pod(self, args: protocol.BindingArgs) -> str:
        result = await self.gang_verbs.bind(args)
        if result is None:
            return await super().bind_pod(args)
        return result
