"""What a HyperNode member selects: node names by exact name, regex or label selector, and the
member HyperNodes by exact name or regex (a label selector applies to nodes only, as in
Volcano); and every node below a HyperNode through its member HyperNodes (`nodes_below`). Pure
functions, shared by admission, the status writer and placement (`core.hypernode_tree`)."""

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
        if isinstance(names, Mapping | set | frozenset):  # a lookup, not a walk of every name
            return {wanted} if wanted in names else set()
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
    names = hypernodes if isinstance(hypernodes, Mapping) else list(hypernodes)
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


def nodes_below(
    name: str,
    hypernodes: Mapping[str, HyperNode],
    node_labels: Mapping[str, Mapping[str, str]],
    known: dict[str, frozenset[str]] | None = None,
) -> frozenset[str]:
    """Every node in `name`'s subtree (a cycle, refused by admission, is cut where it closes).
    `known`: subtrees resolved already (name -> nodes), filled as it goes, so resolving a
    whole tree visits each HyperNode once."""
    return _below(name, hypernodes, node_labels, frozenset(), {} if known is None else known)[0]


def _below(
    name: str,
    hypernodes: Mapping[str, HyperNode],
    node_labels: Mapping[str, Mapping[str, str]],
    seen: frozenset[str],
    known: dict[str, frozenset[str]],
) -> tuple[frozenset[str], bool]:
    """(the nodes, whether a cycle was cut below: then the answer depends on the path and is
    not kept in `known`)."""
    if name in known:
        return known[name], False
    hypernode = hypernodes.get(name)
    if hypernode is None:
        return frozenset(), False
    if name in seen:
        return frozenset(), True
    out = direct_nodes(hypernode, node_labels)
    cut = False
    for child in child_hypernodes(hypernode, hypernodes):
        nodes, child_cut = _below(child, hypernodes, node_labels, seen | {name}, known)
        out |= nodes
        cut = cut or child_cut
    found = frozenset(out)
    if not cut:
        known[name] = found
    return found, cut
