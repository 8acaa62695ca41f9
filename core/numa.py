"""What a pod asks of a node's NUMA cells, and cpusets as Kubernetes writes them ("0-3,8").

`exclusive_cpus`: the cpus the kubelet's static cpu manager pins for each container of a
Guaranteed pod (kubelet's GetPodQOS: every container limits cpu and memory and requests what it
limits); a container whose cpu is not a whole number shares the pool (0). Pure, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from core.resources_parse import parse_quantity

__all__ = ["NumaAsk", "exclusive_cpus", "format_cpuset", "numa_ask", "parse_cpuset"]

_QOS = ("cpu", "memory")


def parse_cpuset(text: str) -> list[int]:
    """The cpu ids of a cpuset ("0-3,8" -> [0, 1, 2, 3, 8]); ValueError naming a bad part."""
    ids: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        low, dash, high = part.partition("-")
        try:
            first, last = int(low), int(high) if dash else int(low)
        except ValueError:
            raise ValueError(f"invalid cpuset {text!r}: {part!r} is not a cpu or a range") from None
        if first < 0 or last < first:
            raise ValueError(f"invalid cpuset {text!r}: {part!r} is not a range")
        ids.extend(range(first, last + 1))
    return sorted(set(ids))


def format_cpuset(ids: Iterable[int]) -> str:
    """The cpuset's text, ranges folded as the kubelet writes them ([0, 1, 2, 8] -> "0-2,8")."""
    parts: list[str] = []
    run: list[int] = []
    for cpu in sorted(set(ids)):
        if run and cpu != run[-1] + 1:
            parts.append(_run(run))
            run = []
        run.append(cpu)
    if run:
        parts.append(_run(run))
    return ",".join(parts)


def _run(run: list[int]) -> str:
    return str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}"


def _amounts(stanza: Mapping[str, Any] | None) -> dict[str, int] | None:
    if not stanza:
        return {}
    out: dict[str, int] = {}
    for name in _QOS:
        if name in stanza:
            try:
                out[name] = parse_quantity(stanza[name]).milli_value()
            except (ValueError, TypeError):
                return None
    return out


def _guaranteed(container: Mapping[str, Any]) -> int | None:
    """The container's cpu limit in millicores if it is Guaranteed-shaped, else None."""
    resources = container.get("resources") or {}
    limits = _amounts(resources.get("limits"))
    requests = _amounts(resources.get("requests"))
    if limits is None or requests is None:
        return None
    for name in _QOS:
        if limits.get(name, 0) <= 0 or requests.get(name, limits[name]) != limits[name]:
            return None
    return limits["cpu"]


def exclusive_cpus(spec: Mapping[str, Any]) -> tuple[int, ...] | None:
    """Per container (spec.containers' order) the cpus its static cpu manager pins, for a
    Guaranteed pod; None for any other pod."""
    containers = spec.get("containers") or ()
    if not containers or not any(
        (c.get("resources") or {}).get("limits") for c in containers if isinstance(c, Mapping)
    ):
        return None  # the common pod: no limits at all, not Guaranteed
    for init in spec.get("initContainers") or ():
        if _guaranteed(init) is None:
            return None
    cpus: list[int] = []
    for container in containers:
        milli = _guaranteed(container)
        if milli is None:
            return None
        cpus.append(milli // 1000 if milli % 1000 == 0 else 0)
    return tuple(cpus)


@dataclass(frozen=True, slots=True)
class NumaAsk:
    """What a Guaranteed pod asks of a node's NUMA cells: each container's pinned cpus (0: it
    shares the pool), the containers' names, and the pod's own `volcano.sh/numa-topology-policy`
    ("" when it names none: the node's policy decides)."""

    cpus: tuple[int, ...]
    names: tuple[str, ...]
    policy: str = ""


_ASKS: dict[NumaAsk, NumaAsk] = {}


_CPUS: dict[bytes, tuple[int, ...] | None] = {}
_NONE: dict[str, Any] = {}


def _cpus_of(spec: Mapping[str, Any]) -> tuple[int, ...] | None:
    """`exclusive_cpus`, parsed once per distinct resource stanza (a job's pods ask alike;
    parsing the quantities again cost ~100 us a pod)."""
    key = orjson.dumps(
        (
            [c.get("resources") for c in spec.get("containers") or ()],
            [c.get("resources") for c in spec.get("initContainers") or ()],
        )
    )
    if key in _CPUS:
        return _CPUS[key]
    if len(_CPUS) > 10_000:  # bounded: a pathological variety of stanzas
        _CPUS.clear()
    cpus = _CPUS[key] = exclusive_cpus(spec)
    return cpus


def numa_ask(spec: Mapping[str, Any], policy: str = "") -> NumaAsk | None:
    """The pod's NumaAsk (shared between equal pods), None unless it is Guaranteed."""
    containers = spec.get("containers")
    if not containers or not any(
        isinstance(c, dict) and (c.get("resources") or _NONE).get("limits") for c in containers
    ):
        return None  # the common pod: no limits at all, not Guaranteed
    try:
        cpus = _cpus_of(spec)
    except (AttributeError, TypeError, orjson.JSONEncodeError):
        return None
    if cpus is None:
        return None
    names = tuple(str(c.get("name") or "") for c in spec.get("containers") or ())
    ask = NumaAsk(cpus, names, policy)
    if len(_ASKS) > 10_000:  # bounded: a pathological variety of pods
        _ASKS.clear()
    return _ASKS.setdefault(ask, ask)
