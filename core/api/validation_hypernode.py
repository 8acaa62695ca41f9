"""Admission rules for a HyperNode: Volcano's `/hypernodes/validate` webhook and the CEL of its
CRD and ValidatingAdmissionPolicy (at least one member, exactly one selector per member, a regex
that compiles), plus what the tree needs and Volcano leaves to the scheduler: a label selector
that parses, no cycle of HyperNodes, and every member HyperNode on a tier below
its parent's. The tree rules need the other HyperNodes (`ClusterView.hypernodes`); without
them they are skipped, as the other kinds' cluster rules are.

Members that select no node are allowed; `unmatched_members` names them so the webhook can warn.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from core.api.errors import FieldError
from core.api.topology import HyperNode as HyperNodeModel
from core.api.topology import LabelSelector, MemberSelector
from core.api.topology_members import (
    SELECTOR_OPERATORS,
    child_hypernodes,
    member_hypernodes,
    member_nodes,
)
from core.api.validation_common import (
    ClusterView,
    dns1123_subdomain_errors,
    find_cycle,
    qualified_name_errors,
)

_LABEL_VALUE_RE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def _label_key_errors(key: str) -> list[str]:
    prefix, _, name = key.rpartition("/")
    errors = [f"prefix part {e}" for e in dns1123_subdomain_errors(prefix)] if prefix else []
    return errors + qualified_name_errors(name)


def _label_value_errors(value: str) -> list[str]:
    if len(value) > 63 or not _LABEL_VALUE_RE.match(value):
        return [
            "a valid label must be an empty string or consist of alphanumeric characters, '-', "
            "'_' or '.', and must start and end with an alphanumeric character (at most 63)"
        ]
    return []


def label_selector_errors(selector: LabelSelector, path: str) -> list[FieldError]:
    """Kubernetes' ValidateLabelSelector, with its field paths and words."""
    errors: list[FieldError] = []
    for key, value in (selector.match_labels or {}).items():
        for reason in _label_key_errors(key):
            errors.append(FieldError(f"{path}.matchLabels", f'Invalid value: "{key}": {reason}'))
        for reason in _label_value_errors(value):
            errors.append(FieldError(f"{path}.matchLabels", f'Invalid value: "{value}": {reason}'))
    for index, req in enumerate(selector.match_expressions or ()):
        where = f"{path}.matchExpressions[{index}]"
        for reason in _label_key_errors(req.key):
            errors.append(FieldError(f"{where}.key", f'Invalid value: "{req.key}": {reason}'))
        if req.operator not in SELECTOR_OPERATORS:
            supported = ", ".join(f'"{op}"' for op in SELECTOR_OPERATORS)
            errors.append(
                FieldError(
                    f"{where}.operator",
                    f'Unsupported value: "{req.operator}": supported values: {supported}',
                )
            )
        elif req.operator in ("In", "NotIn") and not req.values:
            errors.append(
                FieldError(
                    f"{where}.values",
                    "Required value: must be specified when `operator` is 'In' or 'NotIn'",
                )
            )
        elif req.operator in ("Exists", "DoesNotExist") and req.values:
            errors.append(
                FieldError(
                    f"{where}.values",
                    "Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                )
            )
        for value in req.values or ():
            for reason in _label_value_errors(value):
                errors.append(FieldError(f"{where}.values", f'Invalid value: "{value}": {reason}'))
    return errors


def _selector_errors(selector: MemberSelector, path: str) -> list[FieldError]:
    given = [
        s
        for s in (selector.exact_match, selector.regex_match, selector.label_match)
        if s is not None
    ]
    if not given:
        return [FieldError(path, "Either ExactMatch or RegexMatch or LabelMatch must be specified")]
    if len(given) > 1:
        return [
            FieldError(path, "Only one of ExactMatch, RegexMatch, or LabelMatch can be specified")
        ]
    if selector.regex_match is not None:
        pattern = selector.regex_match.pattern
        try:
            re.compile(pattern)
        except re.error as exc:
            return [
                FieldError(
                    f"{path}.regexMatch.pattern",
                    f'Invalid value: "{pattern}": member regexMatch pattern is invalid: {exc}',
                )
            ]
    if selector.label_match is not None:
        return label_selector_errors(selector.label_match, f"{path}.labelMatch")
    return []


def validate_hypernode(
    hypernode: HyperNodeModel, view: ClusterView | None = None
) -> list[FieldError]:
    spec = hypernode.spec
    errors: list[FieldError] = []
    if not spec.members:
        errors.append(FieldError("spec.members", "member must have at least one member"))
    for index, member in enumerate(spec.members or ()):
        errors += _selector_errors(member.selector, f"spec.members[{index}].selector")
    if errors or view is None or view.hypernodes is None:
        return errors
    return _tree_errors(hypernode, view.hypernodes)


def _tree_errors(
    hypernode: HyperNodeModel, others: Mapping[str, HyperNodeModel]
) -> list[FieldError]:
    name = hypernode.metadata.name or ""
    tree = {**others, name: hypernode}
    names = list(tree)
    errors: list[FieldError] = []
    for index, member in enumerate(hypernode.spec.members or ()):
        for child in sorted(member_hypernodes(member, names)):
            if child == name:
                continue  # reported as a cycle below
            tier = tree[child].spec.tier
            if tier >= hypernode.spec.tier:
                errors.append(
                    FieldError(
                        f"spec.members[{index}]",
                        f'member HyperNode "{child}" has tier {tier}, not below this '
                        f"HyperNode's tier {hypernode.spec.tier}",
                    )
                )
    for parent_name, parent in sorted(others.items()):
        if (
            parent_name != name
            and parent.spec.tier <= hypernode.spec.tier
            and name in child_hypernodes(parent, names)
        ):
            errors.append(
                FieldError(
                    "spec.tier",
                    f"Invalid value: {hypernode.spec.tier}: parent HyperNode "
                    f'"{parent_name}" has tier {parent.spec.tier}; a member\'s tier must '
                    "be below its parent's",
                )
            )
    graph = {n: sorted(child_hypernodes(h, names)) for n, h in tree.items()}
    cycle = find_cycle({name: graph[name], **graph})
    if cycle and name in cycle:
        errors.append(FieldError("spec.members", f"HyperNodes form a cycle: {' -> '.join(cycle)}"))
    return errors


def unmatched_members(
    hypernode: HyperNodeModel,
    node_labels: Mapping[str, Mapping[str, str]],
    hypernodes: Mapping[str, HyperNodeModel] | None = None,
) -> list[str]:
    """Paths of the members that select nothing that exists now (allowed: nodes may join
    later), so admission can warn about them."""
    names = list(hypernodes or ())
    out = []
    for index, member in enumerate(hypernode.spec.members or ()):
        if member.type == "Node":
            empty = not member_nodes(member, node_labels)
        else:
            empty = hypernodes is not None and not member_hypernodes(member, names)
        if empty:
            out.append(f"spec.members[{index}]")
    return out
