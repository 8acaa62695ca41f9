"""What the admission rules of every kind share (split from `core.api.validation`, which heads
them): the `ClusterView` they may consult, Kubernetes' name, duration and quantity checks with
their messages, the networkTopology rule, and the cycle search for dependency graphs. Separate so
each kind's rules can import it without importing one another.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from core.api import keys
from core.api.base import DNS1123_LABEL, DNS1123_SUBDOMAIN
from core.api.errors import FieldError
from core.api.scheduling import NetworkTopologySpec, Queue
from core.api.topology import HyperNode
from core.resources import QuantityError, parse_quantity

_LABEL_RE = re.compile(DNS1123_LABEL)
_SUBDOMAIN_RE = re.compile(DNS1123_SUBDOMAIN)
_QUALIFIED_NAME_RE = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DURATION_RE = re.compile(r"^[-+]?(0|((\d+(\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h))+)$")
_LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc')"
)
_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com')"
)
_QUALIFIED_MSG = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
    "with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc')"
)


@dataclass(slots=True)
class ClusterView:
    """What admission may consult about the cluster. `queues=None` means "unknown": skip."""

    queues: Mapping[str, Queue] | None = None
    scheduler_names: tuple[str, ...] = (keys.DEFAULT_SCHEDULER_NAME,)
    max_queue_depth: int = 5
    allocated_pods: Mapping[str, int] = field(default_factory=dict)
    podgroups_by_queue: Mapping[str, Sequence[str]] | None = None
    """`namespace/name` of the PodGroups in each queue; None means "unknown": skip the check."""
    hypernodes: Mapping[str, HyperNode] | None = None
    """The other HyperNodes by name, for the tree rules; None means "unknown": skip them."""
    node_labels: Mapping[str, Mapping[str, str]] | None = None
    """Node name -> labels, to report HyperNode members that select no node; None: unknown."""


# --------------------------------------------------------------------------------- helpers


def dns1123_label_errors(value: str) -> list[str]:
    errors = []
    if len(value) > 63:
        errors.append("must be no more than 63 characters")
    if not _LABEL_RE.match(value):
        errors.append(_LABEL_MSG)
    return errors


def dns1123_subdomain_errors(value: str) -> list[str]:
    errors = []
    if len(value) > 253:
        errors.append("must be no more than 253 characters")
    if not _SUBDOMAIN_RE.match(value):
        errors.append(_SUBDOMAIN_MSG)
    return errors


def qualified_name_errors(value: str) -> list[str]:
    """Kubernetes' IsQualifiedName for a name without a prefix (what Volcano checks)."""
    errors = []
    if not value:
        return ["name part must be non-empty"]
    if len(value) > 63:
        errors.append("name part must be no more than 63 characters")
    if not _QUALIFIED_NAME_RE.match(value):
        errors.append(_QUALIFIED_MSG)
    return errors


def is_go_duration(value: str) -> bool:
    return bool(_DURATION_RE.match(value))


def _network_topology_errors(nt: NetworkTopologySpec | None, path: str) -> list[FieldError]:
    if nt is not None and nt.highest_tier_allowed is not None and nt.highest_tier_name:
        return [
            FieldError(
                path,
                "must not specify 'highestTierAllowed' and 'highestTierName' in networkTopology "
                "simultaneously",
            )
        ]
    return []


def _resource_list_errors(resources: Mapping[str, object] | None, path: str) -> list[FieldError]:
    """Quantities must parse and be non-negative (Volcano's queue and pod rules)."""
    errors = []
    for name, amount in (resources or {}).items():
        try:
            quantity = parse_quantity(amount)  # type: ignore[arg-type]
        except QuantityError as exc:
            errors.append(FieldError(f"{path}[{name}]", str(exc)))
            continue
        if quantity.milli_value() < 0:
            errors.append(FieldError(f"{path}[{name}]", f'Invalid value: "{amount}": must be >= 0'))
    return errors


def find_cycle(graph: Mapping[str, Iterable[str]]) -> list[str] | None:
    """A cycle in a directed graph as a list of vertices, or None when it is a DAG."""
    white, grey, black = 0, 1, 2
    color = dict.fromkeys(graph, white)
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        color[node] = grey
        stack.append(node)
        for nxt in graph.get(node, ()):
            if color.get(nxt, white) == grey:
                return [*stack[stack.index(nxt) :], nxt]
            if color.get(nxt, white) == white and nxt in graph:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        color[node] = black
        return None

    for vertex in graph:
        if color[vertex] == white:
            found = visit(vertex)
            if found:
                return found
    return None
