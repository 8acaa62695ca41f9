"""The embedded API server's CEL cost estimate for CRD rules equals kube-apiserver's.

Every expected factor below was read from a real kube-apiserver v1.36.2 (POST of the same CRD
with dryRun=All); for each kind of construct the "too big" bound is refused with that exact
factor and the "fits" bound (also accepted by the real server) passes.
"""

from __future__ import annotations

from typing import Any

import pytest

from core.api.crds import all_crds
from sim.apiserver.cel_cost import decl_of, rule_cost
from sim.apiserver.crd_cel_budget import cost_error_message, validate_crd_cel_cost


def S(**kw: Any) -> dict[str, Any]:
    return {"type": "string", **kw}


def L(items: dict[str, Any], **kw: Any) -> dict[str, Any]:
    return {"type": "array", "items": items, **kw}


def O(props: dict[str, Any], **kw: Any) -> dict[str, Any]:  # noqa: E743
    return {"type": "object", "properties": props, **kw}


def M(values: dict[str, Any], **kw: Any) -> dict[str, Any]:
    return {"type": "object", "additionalProperties": values, **kw}


INT = {"type": "integer"}
HINT = (
    "(try simplifying the rule, or adding maxItems, maxProperties, and maxLength where "
    "arrays, maps, and strings are declared)"
)
A_LE_B = {"x-kubernetes-validations": [{"rule": "self.a <= self.b", "message": "m"}]}

# name: (schema of spec for a bound n, rule, n refused, factor the real server gave, n that fits)
CONSTRUCTS: dict[str, tuple[Any, str, int, str, int]] = {
    "all": (
        lambda n: O({"xs": L(S(maxLength=1000), maxItems=n), "y": S(maxLength=1000)}),
        "self.xs.all(x, x == self.y)",
        100000,
        "4.1x",
        10000,
    ),
    "exists": (
        lambda n: O({"xs": L(S(maxLength=1000), maxItems=n), "y": S(maxLength=1000)}),
        "self.xs.exists(x, x == self.y)",
        100000,
        "4.1x",
        10000,
    ),
    "exists_one": (
        lambda n: O({"xs": L(O({"name": S(maxLength=63)}), maxItems=n)}),
        "self.xs.all(t, self.xs.exists_one(u, u.name == t.name))",
        1000,
        "3.2x",
        200,
    ),
    "exists_one_has": (
        lambda n: O({"xs": L(O({"name": S(maxLength=63)}), maxItems=n)}),
        "self.xs.all(t, self.xs.exists_one(u, has(u.name) && u.name == t.name))",
        600,
        "1.188420x",
        200,
    ),
    "map": (
        lambda n: O({"xs": L(S(maxLength=1000), maxItems=n)}),
        "self.xs.map(x, x + 'a').all(y, y.size() < 5)",
        30000,
        "1.260001x",
        3000,
    ),
    "filter": (
        lambda n: O({"xs": L(INT, maxItems=n)}),
        "self.xs.filter(x, x > 1).size() < 3",
        3000000,
        "4.5x",
        500000,
    ),
    "matches": (
        lambda n: O({"s": S(maxLength=n)}),
        "self.s.matches('^[a-z]+$')",
        20000000,
        "1.6x",
        200000,
    ),
    "contains": (
        lambda n: O({"s": S(maxLength=200000), "t": S(maxLength=n)}),
        "self.s.contains(self.t)",
        3000,
        "9.6x",
        300,
    ),
    "startsWith_endsWith": (
        lambda n: O({"xs": L(S(maxLength=n), maxItems=10000)}),
        "self.xs.all(x, x.startsWith('abc') && x.endsWith(x))",
        40000,
        "16.0x",
        400,
    ),
    "string_concat": (
        lambda n: O({"xs": L(S(maxLength=n), maxItems=1000)}),
        "self.xs.all(x, x + x == 'ab')",
        50000,
        "4.0x",
        5000,
    ),
    "map_keys_and_index": (
        lambda n: O({"m": M(S(maxLength=1000), maxProperties=n), "y": S(maxLength=1000)}),
        "self.m.all(k, self.m[k] == self.y && k != 'x')",
        100000,
        "4.1x",
        1000,
    ),
    "in_list": (
        lambda n: O({"xs": L(S(maxLength=50), maxItems=n), "ys": L(S(maxLength=50), maxItems=n)}),
        "self.xs.all(x, x in self.ys)",
        5000,
        "2.5x",
        1000,
    ),
    "nested_lists": (
        lambda n: O({"xs": L(L(S(maxLength=63), maxItems=n), maxItems=n), "q": S(maxLength=63)}),
        "self.xs.all(y, y.all(z, z != self.q))",
        1000,
        "3.2x",
        300,
    ),
    "rule_under_two_lists": (
        lambda n: O(
            {"xs": L(O({"ys": L(O({"a": INT, "b": INT}, **A_LE_B), maxItems=n)}), maxItems=3000)}
        ),
        "true",
        2000,
        "3.0x",
        200,
    ),
    "int_or_string": (
        lambda n: O(
            {
                "q": {"x-kubernetes-int-or-string": True, "maxLength": 1000},
                "xs": L(S(maxLength=10), maxItems=n),
            }
        ),
        "self.xs.all(x, string(self.q) == x)",
        100000,
        "4.1x",
        1000,
    ),
    "ternary": (
        lambda n: O(
            {
                "xs": L(S(maxLength=2000), maxItems=n),
                "f": {"type": "boolean"},
                "y": S(maxLength=2000),
            }
        ),
        "self.xs.all(x, self.f ? x == self.y : x.size() > 2)",
        100000,
        "8.1x",
        10000,
    ),
    "enum": (
        lambda n: O({"xs": L(S(enum=["alpha", "beta"]), maxItems=n)}),
        "self.xs.all(x, x == 'alpha' || x == 'beta')",
        10000000,
        "7.0x",
        1000000,
    ),
    "lowerAscii": (
        lambda n: O({"xs": L(S(maxLength=1000), maxItems=n)}),
        "self.xs.all(x, x.lowerAscii() == 'a')",
        100000,
        "4.1x",
        10000,
    ),
    "string_without_maxLength": (
        lambda n: O({"xs": L(S(), maxItems=n), "y": S()}),
        "self.xs.all(x, x == self.y)",
        100,
        "3.1x",
        30,
    ),
}


def crd_with(spec_schema: dict[str, Any], rule: str) -> dict[str, Any]:
    spec_schema = {**spec_schema, "x-kubernetes-validations": [{"rule": rule, "message": "m"}]}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "things.cal.example.com"},
        "spec": {
            "group": "cal.example.com",
            "scope": "Namespaced",
            "names": {"kind": "Thing", "plural": "things", "singular": "thing"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {"type": "object", "properties": {"spec": spec_schema}}
                    },
                }
            ],
        },
    }


def _factors(causes: list[dict[str, str]]) -> list[str]:
    return [c["message"] for c in causes]


@pytest.mark.parametrize("name", sorted(CONSTRUCTS))
def test_each_construct_is_refused_with_the_real_servers_factor_and_fits_when_bounded(
    name: str,
) -> None:
    schema_for, rule, too_big, factor, fits = CONSTRUCTS[name]
    causes = validate_crd_cel_cost(crd_with(schema_for(too_big), rule))
    assert causes, "refused by kube-apiserver"
    first = causes[0]
    assert first["reason"] == "FieldValueForbidden"
    assert first["field"].startswith("spec.validation.openAPIV3Schema.properties[spec]")
    assert first["field"].endswith(".x-kubernetes-validations[0].rule")
    assert first["message"] == (
        f"Forbidden: estimated rule cost exceeds budget by factor of {factor} {HINT}"
    )
    assert validate_crd_cel_cost(crd_with(schema_for(fits), rule)) == []


def test_unbounded_quadratic_rule_gets_kube_apiservers_three_causes() -> None:
    """The old Job CRD's task-name rule: nothing bounds the list or the names."""
    schema = O({"tasks": L(O({"name": S()}))})
    rule = "self.tasks.all(t, self.tasks.exists_one(u, u.name == t.name))"
    causes = validate_crd_cel_cost(crd_with(schema, rule))
    hint = HINT
    rule_field = "spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule"
    assert causes == [
        {
            "reason": "FieldValueForbidden",
            "field": rule_field,
            "message": "Forbidden: estimated rule cost exceeds budget by factor of more than "
            f"100x {hint}",
        },
        {
            "reason": "FieldValueForbidden",
            "field": rule_field,
            "message": "Forbidden: contributed to estimated rule cost total exceeding cost limit "
            "for entire OpenAPIv3 schema",
        },
        {
            "reason": "FieldValueForbidden",
            "field": "spec.validation.openAPIV3Schema",
            "message": "Forbidden: x-kubernetes-validations estimated rule cost total for entire "
            f"OpenAPIv3 schema exceeds budget by factor of more than 100x {hint}",
        },
    ]


def test_cheap_rule_under_an_unbounded_list_counts_toward_the_crd_total() -> None:
    """A rule of cost 9 under an unbounded list runs ~1M times (3 MiB / 3 bytes): under the
    per-rule limit, but named among the rules that make the total too large, as kube-apiserver
    did for the old Job CRD."""
    decl = decl_of(O({"a": INT, "b": INT}))
    assert decl is not None
    rule = "!has(self.a) || !has(self.b) || self.a <= self.b"
    assert rule_cost(rule, decl) == 9
    assert decl.min_size == 2  # "{}": no required fields


@pytest.mark.parametrize(
    ("rule", "expected"),
    [
        ("true", 0),
        ("self.a <= self.b", 5),  # two selects (2 each) and the call
        ("has(self.a)", 1),  # has() is free in Kubernetes; only `self` costs
        ("self.s == 'x'", 3),  # string equality: 0.1 x the shorter side (1), rounded up
        ("self.s == self.s", 2 + 2 + 26),  # 63 runes x 4 bytes = 252 -> 26
        ("size(self.s) > 3", 4),
        ("self.xs.all(x, x == 'a')", 2 + 1 + 10 * (2 + 3)),  # range + result + n x (body + 3)
    ],
)
def test_rule_cost_units(rule: str, expected: int) -> None:
    decl = decl_of(O({"a": INT, "b": INT, "s": S(maxLength=63), "xs": L(S(), maxItems=10)}))
    assert decl is not None
    assert rule_cost(rule, decl) == expected


def test_vulcans_crds_fit_and_the_unbounded_ones_did_not() -> None:
    for crd in all_crds():
        assert validate_crd_cel_cost(crd) == [], crd["metadata"]["name"]
    job = next(c for c in all_crds() if c["metadata"]["name"] == "jobs.batch.volcano.sh")
    spec = job["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    unique_names = spec["x-kubernetes-validations"][0]["rule"]
    assert "exists_one" in unique_names
    assert rule_cost(unique_names, decl_of(spec)) == 541_829  # 5% of the per-rule budget

    # The same rule under every flow's patch.jobSpec: 6.9x over, as kube-apiserver v1.36.2 said.
    flow = next(c for c in all_crds() if c["metadata"]["name"] == "jobflows.flow.volcano.sh")
    flow_spec = flow["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    patch = flow_spec["properties"]["flows"]["items"]["properties"]["patch"]
    patch["properties"]["jobSpec"]["x-kubernetes-validations"] = [
        {"rule": unique_names, "message": "duplicated task name found"}
    ]
    (cause,) = validate_crd_cel_cost(flow)
    assert cause["field"] == (
        "spec.validation.openAPIV3Schema.properties[spec].properties[flows].items.properties"
        "[patch].properties[jobSpec].x-kubernetes-validations[0].rule"
    )
    assert "exceeds budget by factor of 6.9x" in cause["message"]

    spec["properties"]["tasks"].pop("maxItems")
    spec["x-kubernetes-validations"] = [
        {
            "rule": "self.tasks.all(t, self.tasks.exists_one(u, u.name == t.name))",
            "message": "duplicated task name found",
        }
    ]
    fields = [c["field"] for c in validate_crd_cel_cost(job)]
    assert fields[0] == (
        "spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule"
    )
    assert fields[-1] == "spec.validation.openAPIV3Schema"


def test_factor_wording() -> None:
    assert "of 1.188420x " in cost_error_message("c", 11_884_200, 10_000_000)
    assert "of 22.9x " in cost_error_message("c", 229_000_000, 10_000_000)
    assert "of more than 100x " in cost_error_message("c", 1_000_000_001, 10_000_000)


def test_the_parser_gives_cel_gos_shape() -> None:
    from sim.apiserver.cel_parse import (
        Call,
        CelSyntaxError,
        Ident,
        ListLit,
        Literal,
        Macro,
        Select,
        parse,
    )

    assert parse("has(self.a)") == Select(Ident("self"), "a", test_only=True)
    assert parse("!!x") == Ident("x")  # cel-go drops pairs of the same unary operator
    assert parse("-1") == Literal(-1, "int")
    assert parse("self.xs.all(x, x > 1u)") == Macro(
        "all", Select(Ident("self"), "xs"), "x", (Call("_>_", (Ident("x"), Literal(1, "uint"))),)
    )
    assert parse("a ? b : c[0]") == Call(
        "_?_:_", (Ident("a"), Ident("b"), Call("_[_]", (Ident("c"), Literal(0, "int"))))
    )
    assert parse("'x' in [r'\\d', b'y']") == Call(
        "@in",
        (Literal("x", "string"), ListLit((Literal("\\d", "string"), Literal(b"y", "bytes")))),
    )
    assert parse("s.startsWith('a')") == Call("startsWith", (Literal("a", "string"),), Ident("s"))
    for broken in ("has(x)", "a &&", "(a", "a.1"):
        with pytest.raises(CelSyntaxError):
            parse(broken)
