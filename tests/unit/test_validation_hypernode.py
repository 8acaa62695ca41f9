"""HyperNode admission: Volcano's selector and regex rules, label selectors, tier, and the tree
rules (cycles, a member's tier below its parent's) against the other HyperNodes."""

from __future__ import annotations

from typing import Any

import pytest

from core.api.admission import decode
from core.api.errors import FieldError, InvalidObject
from core.api.topology import HyperNode
from core.api.validation import ClusterView, validate
from core.api.validation_hypernode import unmatched_members


def hn(name: str, tier: int, *members: dict[str, Any]) -> HyperNode:
    _, obj = decode(
        {
            "apiVersion": "topology.volcano.sh/v1alpha1",
            "kind": "HyperNode",
            "metadata": {"name": name},
            "spec": {"tier": tier, "members": list(members)},
        }
    )
    assert isinstance(obj, HyperNode)
    return obj


def node(name: str) -> dict[str, Any]:
    return {"type": "Node", "selector": {"exactMatch": {"name": name}}}


def child(name: str) -> dict[str, Any]:
    return {"type": "HyperNode", "selector": {"exactMatch": {"name": name}}}


def view(*others: HyperNode) -> ClusterView:
    return ClusterView(hypernodes={h.metadata.name or "": h for h in others})


def test_a_well_formed_tree_is_admitted() -> None:
    s0 = hn("s0", 1, node("n0"), {"type": "Node", "selector": {"regexMatch": {"pattern": "^n1"}}})
    s1 = hn("s1", 1, {"type": "Node", "selector": {"labelMatch": {"matchLabels": {"r": "1"}}}})
    spine = hn("spine", 2, child("s0"), child("s1"))
    assert validate(spine, view(s0, s1)) == []
    assert validate(s0, view(s1, spine)) == []


def test_a_member_with_no_selector_or_two_is_refused_with_volcanos_words() -> None:
    none = hn("a", 1, {"type": "Node", "selector": {}})
    both = hn(
        "b",
        1,
        {"type": "Node", "selector": {"exactMatch": {"name": "n"}, "regexMatch": {"pattern": "n"}}},
    )
    assert validate(none) == [
        FieldError(
            "spec.members[0].selector",
            "Either ExactMatch or RegexMatch or LabelMatch must be specified",
        )
    ]
    assert validate(both) == [
        FieldError(
            "spec.members[0].selector",
            "Only one of ExactMatch, RegexMatch, or LabelMatch can be specified",
        )
    ]


def test_an_invalid_regex_names_the_pattern() -> None:
    errors = validate(hn("a", 1, {"type": "Node", "selector": {"regexMatch": {"pattern": "n[("}}}))
    assert [e.field for e in errors] == ["spec.members[0].selector.regexMatch.pattern"]
    assert 'Invalid value: "n[(": member regexMatch pattern is invalid' in errors[0].reason


@pytest.mark.parametrize(
    ("expression", "field", "reason"),
    [
        (
            {"key": "r", "operator": "Has", "values": ["1"]},
            "operator",
            'Unsupported value: "Has": supported values: "In", "NotIn", "Exists", "DoesNotExist"',
        ),
        ({"key": "r", "operator": "In"}, "values", "Required value"),
        ({"key": "r", "operator": "Exists", "values": ["1"]}, "values", "Forbidden"),
        ({"key": "bad key", "operator": "Exists"}, "key", 'Invalid value: "bad key"'),
    ],
)
def test_an_invalid_label_selector_names_the_expression(
    expression: dict[str, Any], field: str, reason: str
) -> None:
    member = {"type": "Node", "selector": {"labelMatch": {"matchExpressions": [expression]}}}
    errors = validate(hn("a", 1, member))
    assert len(errors) == 1
    assert errors[0].field == f"spec.members[0].selector.labelMatch.matchExpressions[0].{field}"
    assert errors[0].reason.startswith(reason)


def test_tier_zero_is_volcanos_and_members_must_be_present() -> None:
    assert validate(hn("a", 0, node("n"))) == []  # Volcano's schema admits tier 0
    bare = HyperNode.model_validate({"metadata": {"name": "a"}, "spec": {"tier": 1}}, strict=False)
    assert validate(bare) == [FieldError("spec.members", "member must have at least one member")]


def test_the_schema_refuses_a_negative_tier_and_an_unknown_member_type() -> None:
    with pytest.raises(InvalidObject) as info:
        hn("a", -1, {"type": "Rack", "selector": {"exactMatch": {"name": "n"}}})
    fields = {e.field for e in info.value.errors}
    assert fields == {"spec.tier", "spec.members[0].type"}


def test_a_cycle_of_hypernodes_is_refused_naming_it() -> None:
    a = hn("a", 3, child("b"))
    b = hn("b", 2, child("c"))
    c = hn("c", 1, child("a"))  # closes a -> b -> c -> a; also a's tier is above c's
    errors = validate(c, view(a, b))
    cycle = [e for e in errors if e.field == "spec.members"]
    assert cycle == [FieldError("spec.members", "HyperNodes form a cycle: c -> a -> b -> c")]


def test_a_hypernode_listing_itself_is_a_cycle() -> None:
    errors = validate(hn("a", 1, child("a")), view())
    assert errors == [FieldError("spec.members", "HyperNodes form a cycle: a -> a")]


def test_a_member_hypernode_must_be_on_a_lower_tier() -> None:
    low = hn("low", 2, node("n"))
    errors = validate(hn("top", 2, child("low")), view(low))
    assert errors == [
        FieldError(
            "spec.members[0]",
            'member HyperNode "low" has tier 2, not below this HyperNode\'s tier 2',
        )
    ]


def test_a_child_raised_to_its_parents_tier_is_refused() -> None:
    parent = hn("spine", 2, child("tor"))
    errors = validate(hn("tor", 2, node("n")), view(parent))
    assert [e.field for e in errors] == ["spec.tier"]
    assert 'parent HyperNode "spine" has tier 2' in errors[0].reason


def test_a_regex_hypernode_member_counts_for_the_tree_rules() -> None:
    tors = [hn(f"tor-{i}", 1, node(f"n{i}")) for i in range(2)]
    spine = hn("spine", 1, {"type": "HyperNode", "selector": {"regexMatch": {"pattern": "^tor-"}}})
    errors = validate(spine, view(*tors))
    assert [e.field for e in errors] == ["spec.members[0]", "spec.members[0]"]


def test_members_matching_nothing_are_allowed_and_reported() -> None:
    h = hn(
        "a",
        1,
        node("n0"),
        node("ghost"),
        {"type": "Node", "selector": {"labelMatch": {"matchLabels": {"rack": "9"}}}},
        child("missing"),
    )
    assert validate(h, view()) == []
    labels = {"n0": {"rack": "1"}}
    assert unmatched_members(h, labels, {}) == [
        "spec.members[1]",
        "spec.members[2]",
        "spec.members[3]",
    ]
