"""A PodGroup's subgroups (its `spec.subGroupPolicy`: Volcano's SubJobs), each a gang of its
own, as Volcano's scheduler cache forms them (pkg/scheduler/api job_info.go getOrCreateSubJob,
sub_job_info.go getSubJobMatchValues):

- a pod joins the subgroup of the first policy whose `labelSelector` it matches (none: every
  pod) and whose every `matchLabelKeys` label it carries with a value; the subgroup is the
  policy and those values (`volcano.sh/partition-id` "0", "1", ... for a Job's partitions);
- a policy without `matchLabelKeys` forms no subgroup: its pods, and pods no policy takes, are
  in the job's default subgroup, of size 1 (each such member is on its own, as in Volcano);
- a subgroup needs `subGroupSize` members (default 1) placed together, within one HyperNode of
  its policy's `networkTopology` when it has one; the job needs `minSubGroups` (default 0)
  whole subgroups of each policy.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from core.api.topology import LabelSelector
from core.api.topology_members import selector_matches
from core.records import PodRecord

__all__ = ["DEFAULT", "SubGroup", "SubGroups", "policy_selector", "subgroups_of"]

DEFAULT = ""  # the key of the default subgroup


@dataclass(slots=True)
class SubGroup:
    key: str  # "<policy>-<values>", or DEFAULT
    policy: str
    size: int
    topology: Mapping[str, Any] | None
    index: int = 0  # the first value as a number (Volcano's MatchIndex): the order of a policy's
    members: list[PodRecord] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class SubGroups:
    groups: list[SubGroup]  # by policy order, then index, then key; the default one last
    min_sub_groups: Mapping[str, int]  # policy -> how many of its subgroups must be whole

    @property
    def any(self) -> bool:
        return any(g.key != DEFAULT for g in self.groups)


def policy_selector(raw: Any) -> LabelSelector | None:
    """A subGroupPolicy's labelSelector (None: every pod); an invalid one matches nothing."""
    if raw is None:
        return None
    try:
        return LabelSelector.model_validate(raw)
    except ValueError:
        return LabelSelector(match_labels={"": "\0"})  # an invalid selector matches nothing


def _int(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def subgroups_of(spec: Mapping[str, Any], pods: Iterable[PodRecord]) -> SubGroups:
    """The PodGroup's (`spec`) subgroups among `pods` (its members)."""
    policies = [p for p in spec.get("subGroupPolicy") or () if isinstance(p, Mapping)]
    selectors = [policy_selector(p.get("labelSelector")) for p in policies]
    found: dict[str, SubGroup] = {}
    order: dict[str, tuple[int, int, str]] = {}
    for pod in pods:
        group = None
        for number, (policy, selector) in enumerate(zip(policies, selectors, strict=True)):
            if selector is not None and not selector_matches(selector, pod.labels):
                continue
            keys = policy.get("matchLabelKeys") or []
            values = [pod.labels.get(k, "") for k in keys]
            if not keys or not all(values):
                continue  # (Volcano: no values, no subgroup of this policy)
            name = str(policy.get("name") or "")
            key = f"{name}-{'-'.join(values)}"
            group = found.get(key)
            if group is None:
                index = int(values[0]) if values[0].isdigit() else 0
                size = _int(policy.get("subGroupSize"), 1)
                group = found[key] = SubGroup(key, name, size, policy.get("networkTopology"), index)
                order[key] = (number, index, key)
            break
        if group is None:
            group = found.get(DEFAULT)
            if group is None:
                # (Volcano's default subgroup takes the job's networkTopology: the job's own
                # HyperNode, which the planner already keeps every member in.)
                group = found[DEFAULT] = SubGroup(DEFAULT, DEFAULT, 1, None)
                order[DEFAULT] = (len(policies), 0, "")
        group.members.append(pod)
    minimums = {str(p.get("name") or ""): _int(p.get("minSubGroups"), 0) for p in policies}
    return SubGroups(sorted(found.values(), key=lambda g: order[g.key]), minimums)
