"""sim.apiserver.selectors: label and field selectors as the Kubernetes API server parses them.

Expected behaviour follows k8s.io/apimachinery: pkg/labels/selector.go (Parse, Requirement.Matches;
rows adapted from selector_test.go TestSelectorParse / TestSelectorMatches), metav1
LabelSelectorAsSelector, and pkg/fields/selector.go (ParseSelector, UnescapeValue).
"""

from __future__ import annotations

import pytest

from sim.apiserver.selectors import (
    FieldSelector,
    LabelSelector,
    Operator,
    Requirement,
    SelectorError,
    label_selector_from_dict,
    label_selector_from_set,
    parse_field_selector,
    parse_label_selector,
)

# --------------------------------------------------------------------------- label: parsing


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("", ""),
        ("x=a", "x=a"),
        ("x==a", "x==a"),
        ("x!=a", "x!=a"),
        ("x in (a,b)", "x in (a,b)"),
        ("x notin (b,a)", "x notin (a,b)"),
        ("x", "x"),
        ("!x", "!x"),
        ("x>1", "x>1"),
        ("x<10", "x<10"),
        # Requirements come out sorted by key, values sorted and de-duplicated, as in Go.
        ("z=c,y,x in (b,a,a)", "x in (a,b),y,z=c"),
        # Whitespace is tolerated around every token, and inside sets.
        ("  x  in  ( a , b )  ,  y  !=  c ", "x in (a,b),y!=c"),
        ("\tx=a,\ny", "x=a,y"),
        # A comma inside parentheses belongs to the set; empty entries are the empty value.
        ("x in (foo,,baz),y,z notin ()", "x in (,baz,foo),y,z notin ()"),
        ("x in (,a)", "x in (,a)"),
        ("x in (a,)", "x in (,a)"),
        # `key=` / `key==` and `key in ()` mean the empty value (parseExactValue, parseValues).
        ("x=", "x="),
        ("x==", "x=="),
        ("x in ()", "x in ()"),
        ("x=,y=a", "x=,y=a"),
        # in/notin are operators only where an operator is expected.
        ("in in (in,notin)", "in in (in,notin)"),
        ("example.com/app=web", "example.com/app=web"),
        ("app.kubernetes.io/name=my_app-1.0", "app.kubernetes.io/name=my_app-1.0"),
    ],
)
def test_parse_label_selector(text: str, canonical: str) -> None:
    assert str(parse_label_selector(text)) == canonical


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("x in (a", "found '', expected: ',' or ')'"),
        ("x in (a b)", "found 'b', expected: ',' or ')'"),
        ("x in a", "expected: '('"),
        ("x notin", "expected: '('"),
        ("=x", "found '=', expected: !, identifier, or 'end of string'"),
        ("x,", "expected: identifier after ','"),
        ("x,,y", "expected: identifier after ','"),
        ("x=a=b", "found '=', expected: ',' or 'end of string'"),
        ("x=a b", "found 'b', expected: ',' or 'end of string'"),
        ("x y", "found 'y', expected: in, notin, =, ==, !=, gt, lt"),
        ("x=(a)", "found '(', expected: identifier"),
        ("!", "found '', expected: identifier"),
        ("!x=a", "found '=', expected: ',' or 'end of string'"),
        ("x>a", "the value must be an integer"),
        ("x>99999999999999999999", "the value must be an integer"),
        ("x<-1", "a valid label must be an empty string or consist of"),  # values are label values
        ("x=" + "a" * 64, "must be no more than 63 characters"),
        ("x=-a", "a valid label must be an empty string"),
        ("x in (a,-b)", "a valid label must be an empty string"),
        ("a" * 64, "name part must be no more than 63 characters"),
        ("-x=a", "name part must consist of alphanumeric characters"),
        ("x%y", "name part must consist of alphanumeric characters"),
        ("/x", "prefix part must be non-empty"),
        ("x/", "name part must be non-empty"),
        ("Example.com/x", "prefix part a lowercase RFC 1123 subdomain"),
        ("a/b/c", "a qualified name must consist of"),
    ],
)
def test_invalid_label_selectors(text: str, message: str) -> None:
    with pytest.raises(SelectorError) as info:
        parse_label_selector(text)
    assert f'"{text}"' in str(info.value)
    assert message in str(info.value)


# --------------------------------------------------------------------------- label: matching

LABELS = {"app": "web", "tier": "front", "version": "3", "empty": ""}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", True),
        ("app=web", True),
        ("app==web", True),
        ("app=db", False),
        ("missing=web", False),
        ("empty=", True),
        ("missing=", False),
        ("app!=db", True),
        ("app!=web", False),
        ("missing!=web", True),  # != matches objects that lack the key
        ("app in (db,web)", True),
        ("app in (db, cache)", False),
        ("missing in (web)", False),
        ("app notin (db,cache)", True),
        ("app notin (web)", False),
        ("missing notin (web)", True),  # so does notin
        ("app", True),
        ("missing", False),
        ("!missing", True),
        ("!app", False),
        ("version>2", True),
        ("version>3", False),
        ("version<4", True),
        ("app>1", False),  # not an integer: no match
        ("missing<4", False),
        ("app=web,tier=front", True),
        ("app=web,tier=back", False),
        ("app=web,!missing,tier in (front),version notin (1,2)", True),
    ],
)
def test_label_selector_matches(text: str, expected: bool) -> None:
    assert parse_label_selector(text).matches(LABELS) is expected


def test_label_selector_matches_objects_without_labels() -> None:
    assert parse_label_selector("").matches(None)
    assert parse_label_selector("a!=b,c notin (d),!e").matches(None)
    assert not parse_label_selector("a").matches(None)
    assert not parse_label_selector("a=b").matches({})


def test_empty_and_nothing_selectors() -> None:
    assert parse_label_selector("").empty
    assert LabelSelector.everything().matches({"a": "b"})
    assert not parse_label_selector("a").empty
    nothing = LabelSelector.nothing()
    assert not nothing.empty
    assert not nothing.matches({})
    assert not nothing.matches({"a": "b"})


def test_requires_exact_match() -> None:
    selector = parse_label_selector("app=web,tier in (front),version in (1,2),x!=y")
    assert selector.requires_exact_match("app") == "web"
    assert selector.requires_exact_match("tier") == "front"
    assert selector.requires_exact_match("version") is None
    assert selector.requires_exact_match("x") is None
    assert selector.requires_exact_match("absent") is None


def test_requirements_are_exposed() -> None:
    selector = parse_label_selector("b notin (y,x),a")
    assert selector.requirements == (
        Requirement("a", Operator.EXISTS),
        Requirement("b", Operator.NOT_IN, ("x", "y")),
    )


# --------------------------------------------------------------------------- label: structured


def test_label_selector_from_dict() -> None:
    selector = label_selector_from_dict(
        {
            "matchLabels": {"app": "web"},
            "matchExpressions": [
                {"key": "tier", "operator": "In", "values": ["front", "edge"]},
                {"key": "env", "operator": "NotIn", "values": ["prod"]},
                {"key": "team", "operator": "Exists"},
                {"key": "legacy", "operator": "DoesNotExist", "values": []},
            ],
        }
    )
    assert str(selector) == "app=web,env notin (prod),!legacy,team,tier in (edge,front)"
    assert selector.matches({"app": "web", "tier": "edge", "team": "a"})
    assert not selector.matches({"app": "web", "tier": "edge", "team": "a", "env": "prod"})
    assert not selector.matches({"app": "web", "tier": "edge", "team": "a", "legacy": "1"})
    assert not selector.matches({"app": "web", "tier": "edge"})


def test_label_selector_from_dict_empty_and_nil() -> None:
    # metav1.LabelSelectorAsSelector: {} selects everything, nil selects nothing.
    assert label_selector_from_dict({}).matches({"a": "b"})
    assert label_selector_from_dict({"matchLabels": {}, "matchExpressions": []}).empty
    assert not label_selector_from_dict(None).matches({"a": "b"})


@pytest.mark.parametrize(
    ("selector", "message"),
    [
        ({"matchExpressions": [{"key": "a", "operator": "Equals", "values": ["b"]}]}, "Equals"),
        ({"matchExpressions": [{"key": "a", "operator": "In", "values": []}]}, "can't be empty"),
        ({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["b"]}]}, "empty"),
        ({"matchExpressions": [{"key": "-a", "operator": "Exists"}]}, 'label key "-a"'),
        ({"matchLabels": {"a": "b c"}}, 'invalid value "b c"'),
        ({"matchLabels": {"a": 1}}, "expected a string"),
        ({"matchLabels": ["a"]}, "matchLabels must be an object"),
    ],
)
def test_label_selector_from_dict_errors(selector: dict[str, object], message: str) -> None:
    with pytest.raises(SelectorError, match=message):
        label_selector_from_dict(selector)


def test_label_selector_from_set() -> None:
    selector = label_selector_from_set({"app": "web", "tier": "front"})
    assert str(selector) == "app=web,tier=front"
    assert selector.matches({"app": "web", "tier": "front", "x": "y"})
    assert not selector.matches({"app": "web"})
    assert label_selector_from_set(None).empty
    assert label_selector_from_set({}).matches(None)


# --------------------------------------------------------------------------- field selectors

POD_FIELDS = {
    "metadata.name": "web-0",
    "metadata.namespace": "default",
    "spec.nodeName": "",
    "status.phase": "Pending",
}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", True),
        ("metadata.name=web-0", True),
        ("metadata.name==web-0", True),
        ("metadata.name=web-1", False),
        ("metadata.name!=web-1", True),
        ("spec.nodeName=", True),  # unscheduled pods
        ("spec.nodeName!=", False),  # scheduled pods
        ("status.phase!=Succeeded,status.phase!=Failed", True),
        ("status.phase!=Succeeded,status.phase!=Pending", False),
        ("metadata.namespace=default,metadata.name=web-0", True),
        ("status.podIP=", True),  # a field the caller did not provide compares as ""
        ("status.podIP!=", False),
        (",metadata.name=web-0,", True),  # empty terms are skipped
    ],
)
def test_field_selector_matches(text: str, expected: bool) -> None:
    assert parse_field_selector(text).matches(POD_FIELDS) is expected


@pytest.mark.parametrize(
    ("text", "field", "value"),
    [
        (r"metadata.name=a\,b", "metadata.name", "a,b"),
        (r"metadata.name=a\=b", "metadata.name", "a=b"),
        (r"metadata.name=a\\b", "metadata.name", "a\\b"),
        # "!=" and "==" are tried before "=" at each position.
        ("metadata.name==x", "metadata.name", "x"),
        # No trimming: whitespace belongs to the name or the value, as in Go.
        ("metadata.name = x", "metadata.name ", " x"),
    ],
)
def test_field_selector_values(text: str, field: str, value: str) -> None:
    (requirement,) = parse_field_selector(text).requirements
    assert (requirement.field, requirement.value) == (field, value)


def test_field_selector_escaped_comma_does_not_split_terms() -> None:
    selector = parse_field_selector(r"metadata.name=a\,b,status.phase=Pending")
    assert selector.fields() == {"metadata.name", "status.phase"}
    assert selector.matches({"metadata.name": "a,b", "status.phase": "Pending"})
    assert str(selector) == r"metadata.name=a\,b,status.phase=Pending"


def test_field_selector_fields_and_exact_match() -> None:
    selector = parse_field_selector("spec.nodeName=node-1,status.phase!=Failed,bogus=x")
    assert selector.fields() == {"spec.nodeName", "status.phase", "bogus"}
    assert selector.requires_exact_match("spec.nodeName") == "node-1"
    assert selector.requires_exact_match("status.phase") is None
    assert parse_field_selector("").empty
    assert parse_field_selector("").fields() == set()
    assert FieldSelector().matches({})


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("metadata.name", "invalid selector: 'metadata.name'; can't understand 'metadata.name'"),
        ("a=b,c", "can't understand 'c'"),
        ("a=b=c", "unescaped character in value: ="),
        ("a=b,c=d=e", "unescaped character in value: ="),
        (r"a=b\x", "invalid escape sequence: \\x"),
        ("a=b\\", "invalid escape sequence: \\"),
    ],
)
def test_invalid_field_selectors(text: str, message: str) -> None:
    with pytest.raises(SelectorError) as info:
        parse_field_selector(text)
    assert f"'{text}'" in str(info.value)
    assert message in str(info.value)
