"""Volcano's label-based HyperNode discovery as a pure function: from the nodes' labels to the
HyperNodes that should exist.

For each topology type, a node with the tier-1 label gets a tier-1 HyperNode per label value
(members: its nodes), a node with the tier-2 label as well puts that tier-1 HyperNode into a
tier-2 HyperNode, and so on; a node missing a tier's label stops there. A HyperNode is
`hypernode-<type>-tier<N>-<5 characters>` (type lower-cased, other characters than letters,
digits, '.' and '-' replaced by '-'), labelled `volcano.sh/network-topology-source:
label` and `<key>: <value>`; a HyperNode of the same key/value already labelled so, whose name
starts with `hypernode-<type>-tier<N>`, keeps its name. One label value is one HyperNode, even
across topology types that share the key (as in Volcano).

Volcano draws the 5 characters at random; here they are a hash of the type, the label and its
value, so that a pass deciding again before the informer has seen the last pass's creates asks
for the same names (409, nothing made twice) instead of making a second HyperNode of a label.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

SOURCE_LABEL = "volcano.sh/network-topology-source"
SOURCE = "label"
_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # Kubernetes' rand.String alphabet


@dataclass(slots=True)
class Desired:
    tier: int
    tier_name: str
    labels: dict[str, str]
    members: set[str] = field(default_factory=set)
    nodes: set[str] = field(default_factory=set)  # every node below it: status.nodeCount

    @property
    def member_type(self) -> str:
        return "Node" if self.tier == 1 else "HyperNode"


def clean(type_name: str) -> str:
    return "".join(
        c.lower() if c.isalpha() else c if (c.isdigit() or c in ".-") else "-" for c in type_name
    )


def stable_suffix(type_name: str, key: str, value: str, attempt: int) -> str:
    """5 characters of Kubernetes' rand.String alphabet, the same for the same label."""
    digest = hashlib.sha256(f"{type_name}\0{key}\0{value}\0{attempt}".encode()).digest()
    return "".join(_SUFFIX_ALPHABET[b % len(_SUFFIX_ALPHABET)] for b in digest[:5])


def discover(
    tiers: Mapping[str, tuple[str, ...]],
    nodes: Iterable[tuple[str, Mapping[str, str]]],
    existing: Mapping[str, Mapping[str, str]],
) -> dict[str, Desired]:
    """HyperNode name -> what it should be. `existing`: name -> labels of the HyperNodes this
    source made (their names are kept)."""
    out: dict[str, Desired] = {}
    by_label: dict[tuple[str, str], str] = {}
    for node, labels in sorted(nodes):
        for type_name, keys in tiers.items():
            member = node
            for index, key in enumerate(keys):
                value = labels.get(key)
                if value is None:
                    break
                tier = index + 1
                name = by_label.get((key, value))
                if name is None:
                    name = _name(type_name, key, value, tier, existing, out)
                    by_label[(key, value)] = name
                desired = out.setdefault(name, Desired(tier, key, {key: value}))
                desired.members.add(member)
                desired.nodes.add(node)
                member = name
    return out


def _name(
    type_name: str,
    key: str,
    value: str,
    tier: int,
    existing: Mapping[str, Mapping[str, str]],
    taken: Mapping[str, Desired],
) -> str:
    prefix = f"hypernode-{clean(type_name)}-tier{tier}"
    for name in sorted(existing):
        labels = existing[name]
        ours = labels.get(key) == value and labels.get(SOURCE_LABEL) == SOURCE
        if ours and name.startswith(prefix):
            return name
    for attempt in itertools.count():
        name = f"{prefix}-{stable_suffix(type_name, key, value, attempt)}"
        if name not in taken and name not in existing:
            return name
    raise AssertionError("unreachable")


def manifest(name: str, desired: Desired) -> dict[str, object]:
    """The HyperNode object (spec and labels) for `desired`; members sorted, exact names."""
    return {
        "apiVersion": "topology.volcano.sh/v1alpha1",
        "kind": "HyperNode",
        "metadata": {"name": name, "labels": {SOURCE_LABEL: SOURCE, **desired.labels}},
        "spec": {
            "tier": desired.tier,
            "tierName": desired.tier_name,
            "members": [
                {"type": desired.member_type, "selector": {"exactMatch": {"name": member}}}
                for member in sorted(desired.members)
            ],
        },
    }
