"""A CRD's structural schema applied on write, in the API server's order: defaults, pruning of
unknown fields, then validation (OpenAPI keywords and `x-kubernetes-validations` CEL rules).

Errors are Kubernetes' `StatusCause`s: {reason, message, field}, with messages phrased as the
real API server phrases them (`spec.x in body must be of type integer: "3"`).
"""

from __future__ import annotations

import copy
import re
from functools import lru_cache
from typing import Any

Cause = dict[str, str]

_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "boolean": (bool,),
    "number": (int, float),
    "integer": (int,),
}


def _type_ok(value: Any, expected: str) -> bool:
    if isinstance(value, bool) and expected in ("integer", "number"):
        return False
    if expected == "integer" and isinstance(value, float):
        return value.is_integer()
    return isinstance(value, _TYPES.get(expected, (object,)))


def _show(value: Any) -> str:
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, dict | list):
        return f'"{type(value).__name__ if isinstance(value, list) else "object"}"'
    return str(value)


def _gotype(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "null"


class SchemaResult:
    __slots__ = ("causes", "unknown")

    def __init__(self) -> None:
        self.causes: list[Cause] = []
        self.unknown: list[str] = []


def apply_schema(obj: dict[str, Any], schema: dict[str, Any] | None) -> SchemaResult:
    """Default, prune and validate `obj` in place against a CRD's openAPIV3Schema."""
    result = SchemaResult()
    if not schema:
        return result
    for key, sub in (schema.get("properties") or {}).items():
        if key in ("metadata", "apiVersion", "kind"):
            continue  # the API server owns these
        if key not in obj and "default" in sub:
            obj[key] = copy.deepcopy(sub["default"])
        if key in obj:
            walked = _walk(obj[key], sub, key, result)
            if walked is _DROP:
                del obj[key]
            else:
                obj[key] = walked
    for key in list(obj):
        if key not in (schema.get("properties") or {}) and key not in (
            "metadata",
            "apiVersion",
            "kind",
        ):
            result.unknown.append(key)
            del obj[key]
    return result


def _walk(value: Any, schema: dict[str, Any], path: str, result: SchemaResult) -> Any:
    causes = result.causes
    if value is None:
        # JSON null for an optional field is dropped (Kubernetes prunes nulls without nullable).
        return None if schema.get("nullable") else _DROP
    if schema.get("x-kubernetes-int-or-string"):
        if not isinstance(value, int | str) or isinstance(value, bool):
            causes.append(
                _invalid(
                    path, value, f'{path} in body must be of type int-or-string: "{_gotype(value)}"'
                )
            )
            return value
        if isinstance(value, str) and "pattern" in schema and not _match(schema["pattern"], value):
            causes.append(
                _invalid(path, value, f"{path} in body should match '{schema['pattern']}'")
            )
        return value
    if schema.get("x-kubernetes-preserve-unknown-fields") and "properties" not in schema:
        if schema.get("type") and not _type_ok(value, schema["type"]):
            causes.append(
                _invalid(
                    path,
                    value,
                    f'{path} in body must be of type {schema["type"]}: "{_gotype(value)}"',
                )
            )
        return value
    expected = schema.get("type")
    if expected and not _type_ok(value, expected):
        causes.append(
            _invalid(path, value, f'{path} in body must be of type {expected}: "{_gotype(value)}"')
        )
        return value
    if expected == "integer" and isinstance(value, float):
        value = int(value)
    _check_scalar(value, schema, path, causes)
    if isinstance(value, dict):
        value = _walk_object(value, schema, path, result)
    elif isinstance(value, list):
        if "minItems" in schema and len(value) < schema["minItems"]:
            causes.append(
                _invalid(
                    path,
                    len(value),
                    f"{path} in body should have at least {schema['minItems']} items",
                )
            )
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            causes.append(
                {
                    "reason": "FieldValueTooMany",
                    "field": path,
                    "message": f"Too many: {len(value)}: must have at most "
                    f"{schema['maxItems']} items",
                }
            )
        items = schema.get("items")
        if isinstance(items, dict):
            kept = []
            for index, item in enumerate(value):
                walked = _walk(item, items, f"{path}[{index}]", result)
                if walked is not _DROP:
                    kept.append(walked)
            value = kept
    _check_cel(value, schema, path, causes)
    return value


_DROP = object()


def _walk_object(
    value: dict[str, Any], schema: dict[str, Any], path: str, result: SchemaResult
) -> dict[str, Any]:
    properties = schema.get("properties")
    if properties is not None:
        for key, sub in properties.items():
            if key not in value and "default" in sub:
                value[key] = copy.deepcopy(sub["default"])
        for key in list(value):
            sub = properties.get(key)
            if sub is None:
                if not schema.get("x-kubernetes-preserve-unknown-fields"):
                    result.unknown.append(f"{path}.{key}")
                    del value[key]
                continue
            walked = _walk(value[key], sub, f"{path}.{key}", result)
            if walked is _DROP:
                del value[key]
            else:
                value[key] = walked
    elif isinstance(schema.get("additionalProperties"), dict):
        sub = schema["additionalProperties"]
        for key in list(value):
            walked = _walk(value[key], sub, f"{path}[{key}]", result)
            if walked is _DROP:
                del value[key]
            else:
                value[key] = walked
    for key in schema.get("required") or ():
        if key not in value:
            result.causes.append(
                {
                    "reason": "FieldValueRequired",
                    "message": "Required value",
                    "field": f"{path}.{key}",
                }
            )
    return value


def _check_scalar(value: Any, schema: dict[str, Any], path: str, causes: list[Cause]) -> None:
    if "enum" in schema and value not in schema["enum"]:
        supported = ", ".join(_show(v) for v in schema["enum"])
        causes.append(
            {
                "reason": "FieldValueNotSupported",
                "field": path,
                "message": f"Unsupported value: {_show(value)}: supported values: {supported}",
            }
        )
    if isinstance(value, int | float) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            causes.append(
                _invalid(
                    path,
                    value,
                    f"{path} in body should be greater than or equal to {schema['minimum']}",
                )
            )
        if "maximum" in schema and value > schema["maximum"]:
            causes.append(
                _invalid(
                    path,
                    value,
                    f"{path} in body should be less than or equal to {schema['maximum']}",
                )
            )
    if isinstance(value, str):
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            causes.append(
                {
                    "reason": "FieldValueTooLong",
                    "field": path,
                    "message": f"Too long: may not be more than {schema['maxLength']} bytes",
                }
            )
        if "minLength" in schema and len(value) < schema["minLength"]:
            causes.append(
                _invalid(
                    path,
                    value,
                    f"{path} in body should be at least {schema['minLength']} chars long",
                )
            )
        if "pattern" in schema and not _match(schema["pattern"], value):
            causes.append(
                _invalid(path, value, f"{path} in body should match '{schema['pattern']}'")
            )


def _invalid(path: str, value: Any, detail: str) -> Cause:
    return {
        "reason": "FieldValueInvalid",
        "field": path,
        "message": f"Invalid value: {_show(value)}: {detail}",
    }


@lru_cache(maxsize=256)
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def _match(pattern: str, value: str) -> bool:
    return _compiled(pattern).search(value) is not None


# ---------------------------------------------------------------------------- CEL rules


@lru_cache(maxsize=256)
def _cel_program(rule: str) -> Any:
    import celpy  # a dependency of the embedded API server only

    env = celpy.Environment()
    return env.program(env.compile(rule))


def _check_cel(value: Any, schema: dict[str, Any], path: str, causes: list[Cause]) -> None:
    rules = schema.get("x-kubernetes-validations")
    if not rules:
        return
    import celpy

    activation = {"self": celpy.json_to_cel(value)}
    for rule in rules:
        try:
            ok = bool(_cel_program(rule["rule"]).evaluate(activation))
        except Exception as exc:  # a rule that cannot evaluate is reported, as Kubernetes does
            causes.append(
                {
                    "reason": "FieldValueInvalid",
                    "field": path,
                    "message": f"Invalid value: {_show(value)}: rule evaluation failed: {exc}",
                }
            )
            continue
        if not ok:
            message = rule.get("message") or f"failed rule: {rule['rule']}"
            # kube-apiserver v1.36 omits the value here ("spec: Invalid value: duplicated task
            # name found"), as a real one answered for vulcan's Job CRD.
            causes.append(
                {
                    "reason": "FieldValueInvalid",
                    "field": path,
                    "message": f"Invalid value: {message}",
                }
            )
