"""What a HyperNode member selects: node names by exact name, regex or label selector, and the
member HyperNodes by exact name or regex (a label selector applies to nodes only, as in
Volcano). Pure functions, shared by admission, the status writer and placement."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from core.api.topology import MEMBER_HYPERNODE, MEMBER_NODE, HyperNode, LabelSelector, MemberSpec

SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


def _compile(pattern: str) -> re.Pattern[str] | None:
    try:
        return re.compile(pattern)
    except re.error:
        return None


def selector_matches(selector: LabelSelector, labels: Mapping[str, str]) -> bool:
    """metav1.LabelSelector semantics (the empty selector matches every label set)."""
    for key, value in (selector.match_labels or {}).items():
        if labels.get(key) != value:
            return False
    for req in selector.match_expressions or ():
        values = req.values or []
        present = req.key in labels
        if req.operator == "In" and not (present and labels[req.key] in values):
            return False
        if req.operator == "NotIn" and present and labels[req.key] in values:
            return False
        if req.operator == "Exists" and not present:
            return False
        if req.operator == "DoesNotExist" and present:
            return False
        if req.operator not in SELECTOR_OPERATORS:
            return False
    return True


def _names_matching(member: MemberSpec, names: Iterable[str]) -> set[str]:
    sel = member.selector
    if sel.exact_match is not None:
        wanted = sel.exact_match.name
        return {n for n in names if n == wanted}
    if sel.regex_match is not None:
        compiled = _compile(sel.regex_match.pattern)
        # Go's regexp.MatchString: a match anywhere in the name.
        return {n for n in names if compiled is not None and compiled.search(n)}
    return set()


def member_nodes(member: MemberSpec, node_labels: Mapping[str, Mapping[str, str]]) -> set[str]:
    """The nodes a `Node` member selects among `node_labels` (name -> labels)."""
    if member.type != MEMBER_NODE:
        return set()
    label_match = member.selector.label_match
    if label_match is not None:
        if not label_match.match_labels and not label_match.match_expressions:
            return set()  # Volcano: an empty labelMatch selects no node
        return {n for n, labels in node_labels.items() if selector_matches(label_match, labels)}
    return _names_matching(member, node_labels)


def member_hypernodes(member: MemberSpec, hypernodes: Iterable[str]) -> set[str]:
    """The HyperNodes a `HyperNode` member selects among the names given."""
    if member.type != MEMBER_HYPERNODE:
        return set()
    return _names_matching(member, hypernodes)


def child_hypernodes(hypernode: HyperNode, hypernodes: Iterable[str]) -> set[str]:
    names = list(hypernodes)
    out: set[str] = set()
    for member in hypernode.spec.members or ():
        out |= member_hypernodes(member, names)
    return out


def direct_nodes(hypernode: HyperNode, node_labels: Mapping[str, Mapping[str, str]]) -> set[str]:
    """Nodes selected by the HyperNode's own `Node` members (Volcano's status.nodeCount)."""
    out: set[str] = set()
    for member in hypernode.spec.members or ():
        out |= member_nodes(member, node_labels)
    return out
