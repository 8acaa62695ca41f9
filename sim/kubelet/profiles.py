"""Node profiles: what the hollow nodes of the embedded cluster look like.

The command line describes a node shape as `cpu=32,memory=128Gi,nvidia.com/gpu=8`, optionally
with `count=4` (how many nodes of this shape) and labels as `label.KEY=VALUE` items
(`label.topology.kubernetes.io/zone=a`). Keys that are not `count` or `label.*` are resource
names whose values are Kubernetes quantities, reported as the node's capacity and allocatable.
A profile that leaves out cpu, memory, ephemeral-storage or pods gets the default node's value
for it (32 cpu, 128Gi, 100Gi, 110 pods), so `nvidia.com/gpu=8` alone is the default node with
eight GPUs.

`numa=CELLSxCPUS` gives the node NUMA cells (`numa=2x16`: two cells of 16 cpus; the node's cpu
is then their product, and a `cpu=` item must agree) and a Numatopology published as Volcano's
resource-exporter would, with the static cpu manager; `tm-policy=` names its topology manager
policy (`none`, the kubelet's default, `best-effort`, `restricted` or `single-numa-node`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from core.resources import QuantityError, parse_quantity

# What a kubelet reports when nothing is said: pods 110 (its --max-pods default) and a node
# disk's ephemeral-storage, so pods that request it (Volcano's PaddlePaddle example) fit.
DEFAULT_CAPACITY: dict[str, str] = {
    "cpu": "32",
    "memory": "128Gi",
    "ephemeral-storage": "100Gi",
    "pods": "110",
}
# Left out of the instance-type label: every node has them, they say nothing of the machine.
_NOT_IN_INSTANCE_TYPE = frozenset({"pods", "ephemeral-storage"})

_NAME_PART = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_VALUE_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")
_NUMA = re.compile(r"^([1-9][0-9]*)x([1-9][0-9]*)$")
# The kubelet's --topology-manager-policy values.
TOPOLOGY_POLICIES = ("none", "best-effort", "restricted", "single-numa-node")


@dataclass(frozen=True)
class NodeProfile:
    """One node shape. `count` is None until `expand_profiles` decides it."""

    count: int | None = None
    capacity: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_CAPACITY))
    labels: dict[str, str] = field(default_factory=dict)
    numa: tuple[int, int] | None = None  # (cells, cpus per cell)
    topology_policy: str = "none"

    @property
    def instance_type(self) -> str:
        """A short name for the shape (`cpu32-mem128Gi-gpu8`), used as the nodes'
        `node.kubernetes.io/instance-type` label the way cloud nodes carry their machine type."""
        parts = []
        for name, amount in self.capacity.items():
            if name in _NOT_IN_INSTANCE_TYPE:
                continue
            if name == "cpu":
                short = "cpu"
            elif name == "memory":
                short = "mem"
            else:
                # nvidia.com/gpu -> gpu, ephemeral-storage -> ephemeral-storage
                short = name.rsplit("/", 1)[-1]
            parts.append(short + amount)
        text = _LABEL_VALUE_UNSAFE.sub("", "-".join(parts))[:63]
        # A label value must begin and end with an alphanumeric character.
        return text.strip("-_.") or "hollow"


DEFAULT_PROFILE = NodeProfile()


def _qualified_name_error(name: str) -> str | None:
    """Why `name` is not a Kubernetes qualified name (label key, resource name), or None."""
    prefix, slash, local = name.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        return f"prefix {prefix!r} must be a lowercase DNS subdomain"
    if not local:
        return "name part must not be empty"
    if len(local) > 63:
        return "name part must be no more than 63 characters"
    if not _NAME_PART.match(local):
        return (
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must start "
            "and end with an alphanumeric character"
        )
    return None


def parse_node_profile(text: str) -> NodeProfile:
    """Parse `cpu=32,memory=128Gi,nvidia.com/gpu=8[,count=N][,label.KEY=VALUE]...`.

    Raises ValueError naming the offending item and why it is wrong."""
    if not text.strip():
        raise ValueError("empty node profile (expected e.g. cpu=32,memory=128Gi)")
    capacity: dict[str, str] = {}
    labels: dict[str, str] = {}
    count: int | None = None
    numa: tuple[int, int] | None = None
    policy = "none"
    seen: set[str] = set()
    for raw_item in text.split(","):
        item = raw_item.strip()
        if not item:
            raise ValueError(f"node profile {text!r}: empty item")
        key, equals, value = item.partition("=")
        key, value = key.strip(), value.strip()
        if not equals:
            raise ValueError(f"node profile item {item!r}: expected KEY=VALUE")
        if not key:
            raise ValueError(f"node profile item {item!r}: empty key")
        if key in seen:
            raise ValueError(f"node profile item {item!r}: {key} given twice")
        seen.add(key)
        if key == "numa":
            match = _NUMA.match(value)
            if match is None:
                raise ValueError(
                    f"node profile item {item!r}: expected numa=CELLSxCPUS, e.g. numa=2x16"
                )
            numa = (int(match[1]), int(match[2]))
        elif key == "tm-policy":
            if value not in TOPOLOGY_POLICIES:
                raise ValueError(
                    f"node profile item {item!r}: tm-policy must be one of "
                    f"{', '.join(TOPOLOGY_POLICIES)}"
                )
            policy = value
        elif key == "count":
            try:
                count = int(value)
            except ValueError:
                raise ValueError(f"node profile item {item!r}: count must be an integer") from None
            if count < 1:
                raise ValueError(f"node profile item {item!r}: count must be at least 1")
        elif key.startswith("label."):
            label = key[len("label.") :]
            reason = _qualified_name_error(label)
            if reason:
                raise ValueError(f"node profile item {item!r}: invalid label key: {reason}")
            if len(value) > 63 or (value and not _NAME_PART.match(value)):
                raise ValueError(
                    f"node profile item {item!r}: invalid label value: at most 63 alphanumeric "
                    "characters, '-', '_' or '.', starting and ending with an alphanumeric one"
                )
            labels[label] = value
        else:
            reason = _qualified_name_error(key)
            if reason:
                raise ValueError(f"node profile item {item!r}: invalid resource name: {reason}")
            try:
                quantity = parse_quantity(value)
            except QuantityError as exc:
                raise ValueError(f"node profile item {item!r}: {exc}") from None
            if quantity.sign() < 0:
                raise ValueError(f"node profile item {item!r}: capacity must not be negative")
            capacity[key] = value
    if numa is not None:
        cpus = str(numa[0] * numa[1])
        if capacity.setdefault("cpu", cpus) != cpus:
            raise ValueError(
                f"node profile {text!r}: cpu={capacity['cpu']} is not numa={numa[0]}x{numa[1]}'s "
                f"{cpus} cpus"
            )
    elif "tm-policy" in seen:
        raise ValueError(f"node profile {text!r}: tm-policy needs numa=CELLSxCPUS")
    # The default node's cpu, memory, ephemeral-storage and pods fill in what the profile
    # leaves out, in the conventional order (cpu, memory, ephemeral-storage, extended, pods).
    merged = {
        name: capacity.pop(name, DEFAULT_CAPACITY[name])
        for name in ("cpu", "memory", "ephemeral-storage")
    }
    pods = capacity.pop("pods", DEFAULT_CAPACITY["pods"])
    merged.update(capacity)
    merged["pods"] = pods
    return NodeProfile(
        count=count, capacity=merged, labels=labels, numa=numa, topology_policy=policy
    )


def expand_profiles(profiles: Sequence[NodeProfile], nodes: int | None) -> list[NodeProfile]:
    """Decide how many nodes of each profile to run; every returned profile has its count.

    No profile means the default profile. A single profile without `count` needs `nodes`;
    several profiles must each say `count=`. When both `nodes` and counts are given they must
    agree. Raises ValueError otherwise."""
    if nodes is not None and nodes < 1:
        raise ValueError(f"the number of nodes must be at least 1, not {nodes}")
    chosen = list(profiles) or [DEFAULT_PROFILE]
    if len(chosen) == 1 and chosen[0].count is None:
        if nodes is None:
            raise ValueError("a node profile without count= needs the number of nodes")
        return [replace(chosen[0], count=nodes)]
    missing = [i + 1 for i, p in enumerate(chosen) if p.count is None]
    if missing:
        which = ", ".join(str(i) for i in missing)
        raise ValueError(f"with several node profiles each needs count=; profile {which} has none")
    total = sum(p.count or 0 for p in chosen)
    if nodes is not None and nodes != total:
        raise ValueError(
            f"the number of nodes ({nodes}) differs from the profiles' counts (sum {total})"
        )
    return chosen
