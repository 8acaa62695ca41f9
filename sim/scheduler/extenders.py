"""kube-scheduler's HTTPExtender, client side (k8s.io/kube-scheduler/extender/v1 types).

One Go-like transport per extender entry (`go_transport`: two idle connections kept per host),
`httpTimeout` as a whole-request deadline, POST of a compact JSON body with
`Content-Type: application/json`, and the response rules a Go client applies: exactly 200, one
JSON value, keys matched case-insensitively, integer scores, the subset rule for `NodeNames`,
`{}` = every node rejected, preempt answers read in the Meta form.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from core.kube.go_transport import GoTransport, TransportError
from sim.scheduler.config import ExtenderConfig
from sim.scheduler.framework import SchedNode, SchedPod


class ExtenderError(Exception):
    """A failed call: transport error, timeout, non-200, undecodable body or `Error` set."""


def _fold(obj: Any) -> Any:
    """Go's encoding/json matches struct fields case-insensitively: fold keys to lower case
    (one level; callers fold nested objects they read)."""
    if isinstance(obj, dict):
        return {str(k).lower(): v for k, v in obj.items()}
    return obj


_LATENCY_SAMPLES = 200_000


class HTTPExtender:
    def __init__(self, config: ExtenderConfig) -> None:
        self.config = config
        self.name = config.url_prefix
        self.transport = GoTransport()
        self.calls: dict[str, int] = {}
        # verb -> seconds of each call as the scheduler waited for it (benchmarks read them;
        # the first _LATENCY_SAMPLES per verb are kept).
        self.latencies: dict[str, list[float]] = {}
        # The encodings of the scheduling cycle under way, so the prioritize call after filter
        # does not encode the same pod and names again (see `_args_json`).
        self._pod_json: tuple[SchedPod | None, bytes] = (None, b"")
        self._passing_json: tuple[Sequence[SchedNode] | None, bytes] = (None, b"")

    async def close(self) -> None:
        await self.transport.close()

    def is_interested(self, pod: SchedPod) -> bool:
        managed = self.config.managed_resources
        if not managed:
            return True
        return any(r.name in pod.limits_names for r in managed)

    def is_binder(self) -> bool:
        return bool(self.config.bind_verb)

    async def _post(self, verb: str, body: Mapping[str, Any] | bytes) -> Any:
        started = time.perf_counter()
        try:
            return await self._call(verb, body)
        finally:
            samples = self.latencies.setdefault(verb, [])
            if len(samples) < _LATENCY_SAMPLES:
                samples.append(time.perf_counter() - started)

    async def _call(self, verb: str, body: Mapping[str, Any] | bytes) -> Any:
        url = self.config.url(verb)
        self.calls[verb] = self.calls.get(verb, 0) + 1
        try:
            status, raw = await self.transport.post(
                url,
                body if isinstance(body, bytes) else orjson.dumps(body),
                b"application/json",
                self.config.http_timeout,
            )
        except TimeoutError as exc:
            raise ExtenderError(
                f'Post "{url}": context deadline exceeded (Client.Timeout exceeded while '
                "awaiting headers)"
            ) from exc
        except (TransportError, OSError) as exc:
            raise ExtenderError(f'Post "{url}": {exc}') from exc
        if status != 200:
            raise ExtenderError(f"failed {verb} with extender at URL {url}, code {status}")
        if not raw.strip():
            raise ExtenderError(f"failed {verb} with extender at URL {url}: EOF")
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise ExtenderError(f"failed {verb} with extender at URL {url}: {exc}") from exc

    def _args(self, pod: SchedPod, nodes: Sequence[SchedNode]) -> dict[str, Any] | bytes:
        if self.config.node_cache_capable:
            return self._args_json(pod, nodes)
        return {
            "Pod": pod.raw,
            "Nodes": {"metadata": {}, "items": [n.raw for n in nodes]},
            "NodeNames": None,
        }

    def _args_json(self, pod: SchedPod, nodes: Sequence[SchedNode]) -> bytes:
        """ExtenderArgs with NodeNames, byte for byte what `orjson.dumps` of the object gives,
        built from parts: the pod encoded once per cycle, and the names of the nodes filter
        passed reused by prioritize. Go marshals both again for each call at a fraction of
        Python's cost; encoding a pod and ~420 names twice per pod was the stand-in's own
        overhead, and the extender receives the same bytes either way."""
        cached_pod, pod_json = self._pod_json
        if cached_pod is not pod:
            pod_json = orjson.dumps(pod.raw)
            self._pod_json = (pod, pod_json)
        sent, names_json = self._passing_json
        if sent is not nodes:
            names_json = orjson.dumps([n.name for n in nodes])
            # Kept with the list itself (never mutated once sent; held, so its identity is
            # not reused): filter answers that list when every node passed.
            self._passing_json = (nodes if isinstance(nodes, list) else None, names_json)
        return b'{"Pod":' + pod_json + b',"Nodes":null,"NodeNames":' + names_json + b"}"

    async def filter(
        self, pod: SchedPod, nodes: Sequence[SchedNode]
    ) -> tuple[list[SchedNode], dict[str, str], dict[str, str]]:
        """(passing nodes, FailedNodes, FailedAndUnresolvableNodes)."""
        result = _fold(await self._post(self.config.filter_verb, self._args(pod, nodes)))
        if not isinstance(result, dict):
            raise ExtenderError("extender filter answer is not a JSON object")
        if result.get("error"):
            raise ExtenderError(str(result["error"]))
        passing: list[SchedNode] = []
        names = result.get("nodenames")
        if self.config.node_cache_capable and names is not None:
            if len(names) == len(nodes) and all(
                name == node.name for name, node in zip(names, nodes, strict=True)
            ):
                # All passed, in the order asked: the input list is the answer (prioritize
                # then sends the names filter was sent).
                passing = nodes if isinstance(nodes, list) else list(nodes)
                failed = _reasons(result.get("failednodes"))
                return passing, failed, _reasons(result.get("failedandunresolvablenodes"))
            by_name = _index(nodes, names)
            for name in names:
                node = by_name.get(name)
                if node is None:
                    raise ExtenderError(
                        f"extender {self.name} claims a filtered node {name} which is not found "
                        "in the input node list"
                    )
                passing.append(node)
        elif result.get("nodes") is not None:
            by_name = {n.name: n for n in nodes}
            for item in _fold(result["nodes"]).get("items") or ():
                name = ((item or {}).get("metadata") or {}).get("name")
                node = by_name.get(name)
                if node is None:
                    raise ExtenderError(
                        f"extender {self.name} claims a filtered node {name} which is not found "
                        "in the input node list"
                    )
                passing.append(node)
        failed = _reasons(result.get("failednodes"))
        unresolvable = _reasons(result.get("failedandunresolvablenodes"))
        return passing, failed, unresolvable

    async def prioritize(self, pod: SchedPod, nodes: Sequence[SchedNode]) -> dict[str, int]:
        result = await self._post(self.config.prioritize_verb, self._args(pod, nodes))
        if result is None:
            return {}
        if not isinstance(result, list):
            raise ExtenderError("extender prioritize answer is not a HostPriorityList")
        scores: dict[str, int] = {}
        for item in result:
            # Go decodes this list into structs at a fraction of Python's cost per item: the
            # canonical casing every extender sends is read as is, any other is folded first
            # (same answer either way).
            if type(item) is dict and len(item) == 2 and "Host" in item and "Score" in item:
                host, score = item["Host"], item["Score"]
            else:
                item = _fold(item)
                host, score = item.get("host"), item.get("score")
            if type(score) is not int:  # bool is no int64 either
                raise ExtenderError(
                    f"cannot unmarshal number {score!r} into Go value of type int64"
                )
            scores[str(host)] = score
        return scores

    async def preempt(
        self, pod: SchedPod, victims: Mapping[str, tuple[Sequence[SchedPod], int]]
    ) -> dict[str, tuple[list[str], int]]:
        """victims: node -> (pods, NumPDBViolations). Returns node -> (victim UIDs, PDB
        violations) as the extender answered (in the Meta form, always)."""
        if self.config.node_cache_capable:
            body = {
                "Pod": pod.raw,
                "NodeNameToVictims": None,
                "NodeNameToMetaVictims": {
                    node: {"Pods": [{"UID": p.uid} for p in pods], "NumPDBViolations": pdb}
                    for node, (pods, pdb) in victims.items()
                },
            }
        else:
            body = {
                "Pod": pod.raw,
                "NodeNameToVictims": {
                    node: {"Pods": [p.raw or p.reference() for p in pods], "NumPDBViolations": pdb}
                    for node, (pods, pdb) in victims.items()
                },
                "NodeNameToMetaVictims": None,
            }
        result = _fold(await self._post(self.config.preempt_verb, body))
        if not isinstance(result, dict):
            raise ExtenderError("extender preempt answer is not a JSON object")
        meta = result.get("nodenametometavictims") or {}
        answer: dict[str, tuple[list[str], int]] = {}
        for node, entry in meta.items():
            entry = _fold(entry or {})
            uids = [str(_fold(p).get("uid", "")) for p in entry.get("pods") or ()]
            answer[node] = (uids, int(entry.get("numpdbviolations") or 0))
        return answer

    async def bind(self, pod: SchedPod, node: str) -> None:
        body = {
            "PodName": pod.name,
            "PodNamespace": pod.namespace,
            "PodUID": pod.uid,
            "Node": node,
        }
        result = _fold(await self._post(self.config.bind_verb, body))
        if isinstance(result, dict) and result.get("error"):
            raise ExtenderError(str(result["error"]))


def _index(nodes: Sequence[SchedNode], names: Sequence[Any]) -> dict[str, SchedNode]:
    """The input nodes by name, or only those named when they are few (an extender that
    steers a pod keeps one node of hundreds: no need to index all of them)."""
    if len(names) > 4:
        return {n.name: n for n in nodes}
    wanted = set(names)
    return {n.name: n for n in nodes if n.name in wanted}


def _reasons(value: Any) -> dict[str, str]:
    """A failure map as sent. Go decodes it into map[string]string: keys are strings in any
    JSON object; a value that is not a string fails the whole answer there, and here."""
    if not value:
        return {}
    if not isinstance(value, dict):
        raise ExtenderError("extender failure map is not an object")
    if not all(type(v) is str for v in value.values()):
        raise ExtenderError("extender failure map has a reason that is not a string")
    return value
