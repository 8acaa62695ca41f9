"""`topology.volcano.sh/v1alpha1` HyperNode: a network performance domain (NVLink island, ToR,
spine) holding nodes or other HyperNodes, with Volcano's schema (volcano-sh/apis
`pkg/apis/topology/v1alpha1/hypernode_types.go`)."""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field

from core.api.base import DNS1123_SUBDOMAIN, KubeModel, KubeObject, cel

TOPOLOGY_GROUP = "topology.volcano.sh"
TOPOLOGY_VERSION = "v1alpha1"
TOPOLOGY_API_VERSION = f"{TOPOLOGY_GROUP}/{TOPOLOGY_VERSION}"

MEMBER_NODE = "Node"
MEMBER_HYPERNODE = "HyperNode"
MemberType = Literal["Node", "HyperNode"]

# Volcano's CEL rules on a member's selector, with its messages.
_ONE_OF = (
    (
        "has(self.exactMatch) || has(self.regexMatch) || has(self.labelMatch)",
        "Either ExactMatch or RegexMatch or LabelMatch must be specified",
    ),
    (
        "(has(self.exactMatch) ? 1 : 0) + (has(self.regexMatch) ? 1 : 0) + "
        "(has(self.labelMatch) ? 1 : 0) <= 1",
        "Only one of ExactMatch, RegexMatch, or LabelMatch can be specified",
    ),
)


class ExactMatch(KubeModel):
    name: str = Field(min_length=1, max_length=253, pattern=DNS1123_SUBDOMAIN)


class RegexMatch(KubeModel):
    pattern: str = Field(min_length=1)


class LabelSelectorRequirement(KubeModel):
    key: str
    operator: str
    values: list[str] | None = None


class LabelSelector(KubeModel):
    """metav1.LabelSelector."""

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-map-type": "atomic"})

    match_labels: dict[str, str] | None = None
    match_expressions: list[LabelSelectorRequirement] | None = None


class MemberSelector(KubeModel):
    model_config = ConfigDict(json_schema_extra=cel(*_ONE_OF))

    exact_match: ExactMatch | None = None
    regex_match: RegexMatch | None = None
    label_match: LabelSelector | None = None


class MemberSpec(KubeModel):
    type: MemberType
    selector: MemberSelector = Field(default_factory=MemberSelector)


class HyperNodeSpec(KubeModel):
    tier: int = Field(ge=0)
    tier_name: str | None = Field(default=None, max_length=253)
    members: list[MemberSpec] | None = Field(default=None, min_length=1)


class Condition(KubeModel):
    """metav1.Condition."""

    type: str
    status: Literal["True", "False", "Unknown"]
    observed_generation: int | None = Field(default=None, ge=0)
    last_transition_time: str
    reason: str
    message: str


class HyperNodeStatus(KubeModel):
    conditions: list[Condition] | None = None
    node_count: int | None = Field(default=None, ge=0)


class HyperNode(KubeObject):
    spec: HyperNodeSpec
    status: HyperNodeStatus | None = None
