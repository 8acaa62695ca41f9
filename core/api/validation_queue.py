"""Volcano's Queue admission rules (split from `core.api.validation`): CREATE and UPDATE (weights,
capability >= deserved >= guarantee, state, the hierarchy annotations, the root queue, the place
in the queue tree) and DELETE. Separate because the queue tree checks are a family of their own.
"""

from __future__ import annotations

from collections.abc import Mapping

from core.api import keys
from core.api.errors import FieldError
from core.api.scheduling import Queue
from core.api.validation_common import (
    ClusterView,
    _resource_list_errors,
    dns1123_subdomain_errors,
)
from core.resources import parse_quantity

# ----------------------------------------------------------------------------------- Queue


def _quantity(amount: object) -> float:
    return parse_quantity(amount).exact  # type: ignore[arg-type, return-value]


def validate_queue(
    queue: Queue, view: ClusterView | None = None, old: Queue | None = None
) -> list[FieldError]:
    """CREATE (old=None) or UPDATE admission of a (defaulted) Queue."""
    name = queue.metadata.name or ""
    spec = queue.spec
    errors: list[FieldError] = []
    if name:
        errors += [
            FieldError("metadata.name", f'Invalid value: "{name}": {m}')
            for m in dns1123_subdomain_errors(name)
        ]
    if spec.weight <= 0:
        errors.append(
            FieldError("spec.weight", f"Invalid value: {spec.weight}: queue weight must be > 0")
        )
    capability = spec.capability or {}
    deserved = spec.deserved or {}
    guarantee = (spec.guarantee.resource if spec.guarantee else None) or {}
    bad = _resource_list_errors(capability, "spec.capability")
    bad += _resource_list_errors(deserved, "spec.deserved")
    bad += _resource_list_errors(guarantee, "spec.guarantee.resource")
    errors += bad
    if not bad:
        for resource, amount in guarantee.items():
            if resource not in deserved:
                errors.append(
                    FieldError(
                        f"spec.deserved[{resource}]",
                        f"deserved[{resource}] must be >= guarantee[{resource}]={amount}",
                    )
                )
            elif _quantity(deserved[resource]) < _quantity(amount):
                errors.append(
                    FieldError(
                        f"spec.deserved[{resource}]",
                        f"deserved[{resource}]={deserved[resource]} must be >= "
                        f"guarantee[{resource}]={amount}",
                    )
                )
        for resource, amount in deserved.items():
            if resource in capability and _quantity(amount) > _quantity(capability[resource]):
                errors.append(
                    FieldError(
                        f"spec.deserved[{resource}]",
                        f"deserved[{resource}]={amount} must be <= "
                        f"capability[{resource}]={capability[resource]}",
                    )
                )
    state = queue.status.state if queue.status else None
    if state is not None and state not in ("Open", "Closed"):
        errors.append(FieldError("status.state", "queue state must be in [Open Closed]"))
    errors += _hierarchy_annotation_errors(queue, view)
    if spec.parent and spec.parent == name:
        errors.append(FieldError("spec.parent", f"queue {name} cannot use itself as parent"))
    if (
        name == keys.ROOT_QUEUE
        and old is not None
        and _resource_fields(old) != _resource_fields(queue)
    ):
        errors.append(
            FieldError(
                "spec",
                "root queue's resource attributes (capability, deserved, guarantee) cannot be "
                "modified",
            )
        )
    if view is not None and view.queues is not None and name != keys.ROOT_QUEUE:
        errors += _queue_tree_errors(queue, view, old)
    return errors


def _resource_fields(queue: Queue) -> tuple[object, object, object]:
    spec = queue.spec
    return (spec.capability, spec.deserved, spec.guarantee.resource if spec.guarantee else None)


def _hierarchy_annotation_errors(queue: Queue, view: ClusterView | None) -> list[FieldError]:
    annotations = queue.metadata.annotations or {}
    path = annotations.get(keys.HIERARCHY)
    weights = annotations.get(keys.HIERARCHY_WEIGHTS)
    if not path and not weights:
        return []
    where = f"metadata.annotations[{keys.HIERARCHY_WEIGHTS}]"
    parts, weight_parts = (path or "").split("/"), (weights or "").split("/")
    if len(parts) != len(weight_parts):
        return [
            FieldError(
                where,
                f"{keys.HIERARCHY} must have the same length with {keys.HIERARCHY_WEIGHTS}",
            )
        ]
    errors = []
    for weight in weight_parts:
        try:
            ok = float(weight) > 0
        except ValueError:
            ok = False
        if not ok:
            errors.append(
                FieldError(
                    where, f"{keys.HIERARCHY_WEIGHTS} must be positive numbers, got {weight}"
                )
            )
    if view is not None and view.queues is not None and path:
        for other in view.queues.values():
            if other.metadata.name == queue.metadata.name:
                continue
            other_path = (other.metadata.annotations or {}).get(keys.HIERARCHY, "")
            if other_path.startswith(path + "/"):
                errors.append(
                    FieldError(
                        f"metadata.annotations[{keys.HIERARCHY}]",
                        f"{path} is not allowed to be in the sub path of {other_path} of queue "
                        f"{other.metadata.name}",
                    )
                )
    return errors


def _queue_tree_errors(queue: Queue, view: ClusterView, old: Queue | None) -> list[FieldError]:
    assert view.queues is not None
    name = queue.metadata.name or ""
    queues = dict(view.queues)
    queues[name] = queue
    parent = queue.spec.parent or keys.ROOT_QUEUE
    errors: list[FieldError] = []
    parent_changed = old is None or (old.spec.parent or keys.ROOT_QUEUE) != parent
    if parent_changed and parent != keys.ROOT_QUEUE:
        if parent not in view.queues:
            errors.append(
                FieldError("spec.parent", f'queues.scheduling.volcano.sh "{parent}" not found')
            )
            return errors
        depth, cursor, visited = 1, parent, {name}
        while cursor and cursor != keys.ROOT_QUEUE and cursor not in visited:
            visited.add(cursor)
            depth += 1
            cursor = queues[cursor].spec.parent or keys.ROOT_QUEUE if cursor in queues else ""
        if depth > view.max_queue_depth:
            errors.append(
                FieldError(
                    "spec.parent",
                    f"queue {name} exceeds the maximum allowed depth of {view.max_queue_depth}",
                )
            )
        has_children = any(
            (q.spec.parent or "") == parent for n, q in view.queues.items() if n != name
        )
        allocated = view.allocated_pods.get(parent, 0)
        if not has_children and allocated:
            errors.append(
                FieldError(
                    "spec.parent",
                    f"queue {parent} cannot be the parent queue of queue {name} because it has "
                    f"allocated Pods: {allocated}",
                )
            )
    # Capability may not exceed the nearest ancestor that sets it.
    for resource, amount in (queue.spec.capability or {}).items():
        cursor = parent
        seen = {name}
        while cursor in queues and cursor not in seen:
            seen.add(cursor)
            limit = (queues[cursor].spec.capability or {}).get(resource)
            if limit is not None:
                if _quantity(amount) > _quantity(limit):
                    errors.append(
                        FieldError(
                            f"spec.capability[{resource}]",
                            f"queue {name} capability[{resource}]={amount} exceeds its ancestor's "
                            f"capability={limit}",
                        )
                    )
                break
            cursor = queues[cursor].spec.parent or keys.ROOT_QUEUE
            if cursor == keys.ROOT_QUEUE and keys.ROOT_QUEUE not in queues:
                break
    # Siblings' guarantee and deserved must fit in the parent's.
    if parent in queues:
        parent_q = queues[parent]
        siblings = [
            q
            for n, q in queues.items()
            if n != parent and (q.spec.parent or keys.ROOT_QUEUE) == parent and n != keys.ROOT_QUEUE
        ]
        for label, getter in (
            (
                "guarantee",
                lambda q: (q.spec.guarantee.resource if q.spec.guarantee else None) or {},
            ),
            ("deserved", lambda q: q.spec.deserved or {}),
        ):
            limit = getter(parent_q)
            if not limit:
                continue
            total: dict[str, float] = {}
            for sibling in siblings:
                for resource, amount in getter(sibling).items():
                    total[resource] = total.get(resource, 0) + _quantity(amount)
            over = {r: v for r, v in total.items() if r in limit and v > _quantity(limit[r])}
            if over:
                errors.append(
                    FieldError(
                        f"spec.{label}",
                        f"parent queue {parent} validation failed: sum of children's {label} "
                        f"({_fmt(total)}) exceeds parent's {label} limit ({_fmt(limit)})",
                    )
                )
    return errors


def _fmt(resources: Mapping[str, object]) -> str:
    return ", ".join(f"{k}: {v}" for k, v in sorted(resources.items()))


def validate_queue_delete(queue: Queue, view: ClusterView | None = None) -> list[FieldError]:
    name = queue.metadata.name or ""
    if name == keys.DEFAULT_QUEUE:
        return [FieldError("metadata.name", "`default` queue can not be deleted")]
    if name == keys.ROOT_QUEUE:
        return [FieldError("metadata.name", "`root` queue can not be deleted")]
    if view is None:
        return []
    children = sorted(n for n, q in (view.queues or {}).items() if q.spec.parent == name)
    if children:
        return [
            FieldError(
                "metadata.name",
                f"queue {name} can not be deleted because it has {len(children)} child queues: "
                f"{', '.join(children)}",
            )
        ]
    return _queue_podgroup_errors(name, view)


def _queue_podgroup_errors(name: str, view: ClusterView) -> list[FieldError]:
    """A queue that still has PodGroups cannot go: its jobs would be left without a queue (the
    scheduler would hold them forever). Not a Volcano rule; Volcano only optionally checks
    allocated pods."""
    groups = sorted((view.podgroups_by_queue or {}).get(name) or ())
    if not groups:
        return []
    noun = "PodGroup" if len(groups) == 1 else "PodGroups"
    return [
        FieldError(
            "metadata.name",
            f"queue {name} can not be deleted because it has {len(groups)} {noun}: "
            f"{', '.join(groups)}",
        )
    ]
