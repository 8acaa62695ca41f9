"""Kubernetes' PodTemplate rules that matter for scheduling (split from `core.api.validation`):
containers, their resources, restart policy and overhead, as a Job's task templates are checked.
Separate because they judge a Kubernetes pod, not a Volcano kind.
"""

from __future__ import annotations

from collections.abc import Mapping

from core.api.errors import FieldError
from core.api.validation_common import _resource_list_errors, dns1123_label_errors
from core.resources import QuantityError, parse_quantity


def _container_errors(container: object, path: str, names: set[str]) -> list[FieldError]:
    if not isinstance(container, dict):
        return [FieldError(path, "Invalid value: must be an object")]
    errors = []
    name = container.get("name")
    if not isinstance(name, str) or not name:
        errors.append(FieldError(f"{path}.name", "Required value"))
    else:
        errors += [
            FieldError(f"{path}.name", f'Invalid value: "{name}": {m}')
            for m in dns1123_label_errors(name)
        ]
        if name in names:
            errors.append(FieldError(f"{path}.name", f'Duplicate value: "{name}"'))
        names.add(name)
    if not container.get("image"):
        errors.append(FieldError(f"{path}.image", "Required value"))
    resources = container.get("resources") or {}
    if not isinstance(resources, dict):
        return [*errors, FieldError(f"{path}.resources", "Invalid value: must be an object")]
    requests = resources.get("requests") or {}
    limits = resources.get("limits") or {}
    for part, values in (("requests", requests), ("limits", limits)):
        if not isinstance(values, dict):
            errors.append(
                FieldError(f"{path}.resources.{part}", "Invalid value: must be an object")
            )
    if not isinstance(requests, dict) or not isinstance(limits, dict):
        return errors
    errors += _resource_list_errors(requests, f"{path}.resources.requests")
    errors += _resource_list_errors(limits, f"{path}.resources.limits")
    for name_, request in requests.items():
        if name_ not in limits:
            continue
        try:
            if parse_quantity(request).exact > parse_quantity(limits[name_]).exact:
                errors.append(
                    FieldError(
                        f"{path}.resources.requests[{name_}]",
                        f'Invalid value: "{request}": must be less than or equal to {name_} limit'
                        f" of {limits[name_]}",
                    )
                )
        except QuantityError:
            pass  # already reported above
    return errors


def validate_pod_template(template: Mapping[str, object], path: str) -> list[FieldError]:
    """The parts of Kubernetes' PodTemplate validation that matter for scheduling."""
    spec = template.get("spec")
    if not isinstance(spec, dict):
        return [FieldError(f"{path}.spec", "Required value")]
    errors: list[FieldError] = []
    containers = spec.get("containers")
    if not isinstance(containers, list) or not containers:
        errors.append(FieldError(f"{path}.spec.containers", "Required value"))
        containers = []
    names: set[str] = set()
    for index, container in enumerate(containers):
        errors += _container_errors(container, f"{path}.spec.containers[{index}]", names)
    for index, container in enumerate(spec.get("initContainers") or []):
        errors += _container_errors(container, f"{path}.spec.initContainers[{index}]", names)
    policy = spec.get("restartPolicy")
    if policy is not None and policy not in ("Always", "OnFailure", "Never"):
        errors.append(
            FieldError(
                f"{path}.spec.restartPolicy",
                f'Unsupported value: "{policy}": supported values: "Always", "OnFailure", "Never"',
            )
        )
    errors += _resource_list_errors(spec.get("overhead"), f"{path}.spec.overhead")  # type: ignore[arg-type]
    return errors


def _cpu_is_integer(container: object) -> bool:
    if not isinstance(container, dict):
        return True
    requests = (container.get("resources") or {}).get("requests") or {}
    if "cpu" not in requests:
        return True
    try:
        return parse_quantity(requests["cpu"]).milli_value() % 1000 == 0
    except QuantityError:
        return True  # reported elsewhere
