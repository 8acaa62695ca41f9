"""kube-apiserver's CEL cost budget for a CustomResourceDefinition's validation rules.

A CRD is refused (422 Invalid) when one rule's estimated cost, times the number of times it can
run, exceeds 10,000,000 (`StaticEstimatedCostLimit`), or when all its rules together exceed
100,000,000 (`StaticEstimatedCRDCostLimit`); the causes name each rule with the field path and
wording kube-apiserver uses (learned from apiextensions-apiserver's validation and checked
against a real kube-apiserver v1.36.2). The number of runs is the product of the `maxItems` /
`maxProperties` of the enclosing lists and maps, or, when one of them is unbounded, how often the
rule's node fits in a 3 MiB request.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import orjson

from sim.apiserver.cel_cost import U64, Decl, decl_of, max_cardinality, rule_cost
from sim.apiserver.cel_parse import CelSyntaxError

STATIC_ESTIMATED_COST_LIMIT = 10_000_000
STATIC_ESTIMATED_CRD_COST_LIMIT = 100_000_000
_HINT = (
    "(try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, "
    "maps, and strings are declared)"
)


@dataclass(slots=True)
class _Total:
    total: int = 0
    most_expensive: list[tuple[int, str]] = field(default_factory=list)

    def observe(self, path: str, cost: int) -> None:
        self.total = min(self.total + cost, U64)
        if cost < STATIC_ESTIMATED_CRD_COST_LIMIT // 100:  # under 1% of the budget: not named
            return
        self.most_expensive.append((cost, path))
        self.most_expensive.sort(key=lambda item: -item[0])
        del self.most_expensive[4:]


def cost_error_message(cost_name: str, cost: int, limit: int) -> str:
    """Kubernetes' getCostErrorMessage."""
    factor = cost / limit
    if factor > 100.0:
        shown = "more than 100x"
    elif factor < 1.5:
        shown = f"{factor:f}x"
    else:
        shown = f"{factor:.1f}x"
    return f"{cost_name} exceeds budget by factor of {shown} {_HINT}"


def _forbidden(path: str, detail: str) -> dict[str, str]:
    return {"reason": "FieldValueForbidden", "field": path, "message": f"Forbidden: {detail}"}


def validate_crd_cel_cost(crd: dict[str, Any]) -> list[dict[str, str]]:
    """The 422 causes kube-apiserver would give for the rules of `crd`'s schemas (empty when
    they fit). A CRD with one version is reported under `spec.validation`, as the real server
    does; with several, under `spec.versions[i].schema`."""
    versions = (crd.get("spec") or {}).get("versions") or []
    if not isinstance(versions, list):
        return []
    # Every embedded API server validates the same few CRDs when it starts: remember them.
    return [dict(c) for c in _cached_causes(orjson.dumps(versions))]


@lru_cache(maxsize=64)
def _cached_causes(versions_json: bytes) -> tuple[dict[str, str], ...]:
    versions = orjson.loads(versions_json)
    causes: list[dict[str, str]] = []
    for index, version in enumerate(versions):
        schema = ((version or {}).get("schema") or {}).get("openAPIV3Schema")
        if not isinstance(schema, dict):
            continue
        base = "spec.validation" if len(versions) == 1 else f"spec.versions[{index}].schema"
        causes += schema_cost_causes(schema, f"{base}.openAPIV3Schema")
    return tuple(causes)


def schema_cost_causes(schema: dict[str, Any], path: str) -> list[dict[str, str]]:
    """Cost causes for one openAPIV3Schema whose root is at `path`."""
    total = _Total()
    causes: list[dict[str, str]] = []
    _walk(schema, path, 1, True, total, causes)
    if total.total > STATIC_ESTIMATED_CRD_COST_LIMIT:
        for _, rule_path in total.most_expensive:
            causes.append(
                _forbidden(
                    rule_path,
                    "contributed to estimated rule cost total exceeding cost limit for entire "
                    "OpenAPIv3 schema",
                )
            )
        message = cost_error_message(
            "x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema",
            total.total,
            STATIC_ESTIMATED_CRD_COST_LIMIT,
        )
        causes.append(_forbidden(path, message))
    return causes


def _walk(
    schema: dict[str, Any],
    path: str,
    cardinality: int | None,
    root: bool,
    total: _Total,
    causes: list[dict[str, str]],
) -> None:
    """Children first, then the node's own rules, as kube-apiserver orders its errors.
    `cardinality` is None when an enclosing list or map is unbounded."""
    values = schema.get("additionalProperties")
    if isinstance(values, dict):
        bound = schema.get("maxProperties")
        child = None if cardinality is None or bound is None else cardinality * max(bound, 0)
        _walk(values, f"{path}.additionalProperties", child, False, total, causes)
    for name, prop in (schema.get("properties") or {}).items():
        if isinstance(prop, dict):
            _walk(prop, f"{path}.properties[{name}]", cardinality, False, total, causes)
    items = schema.get("items")
    if isinstance(items, dict):
        bound = schema.get("maxItems")
        child = None if cardinality is None or bound is None else cardinality * max(bound, 0)
        _walk(items, f"{path}.items", child, False, total, causes)
    rules = schema.get("x-kubernetes-validations") or []
    if not rules:
        return
    decl = decl_of(schema, resource_root=root)
    if decl is None:
        return
    for index, rule in enumerate(rules):
        text = (rule or {}).get("rule") if isinstance(rule, dict) else None
        if not text:
            continue
        rule_path = f"{path}.x-kubernetes-validations[{index}].rule"
        try:
            cost = _expression_cost(text, decl, cardinality)
        except CelSyntaxError:
            continue  # the rule's own compilation error is reported elsewhere
        if cost > STATIC_ESTIMATED_COST_LIMIT:
            message = cost_error_message("estimated rule cost", cost, STATIC_ESTIMATED_COST_LIMIT)
            causes.append(_forbidden(rule_path, message))
        total.observe(rule_path, cost)


def _expression_cost(rule: str, decl: Decl, cardinality: int | None) -> int:
    runs = cardinality if cardinality is not None else max_cardinality(decl)
    cost = rule_cost(rule, decl)
    return 0 if cost == 0 else min(cost * runs, U64)
