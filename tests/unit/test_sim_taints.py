"""sim.taints: toleration matching with Kubernetes' ToleratesTaint rules."""

from __future__ import annotations

from typing import Any

import pytest

from sim.taints import (
    NO_EXECUTE,
    NO_SCHEDULE,
    matching_toleration,
    tolerates,
    toleration_tolerates,
    untolerated,
)

GPU = {"key": "gpu", "value": "a100", "effect": NO_SCHEDULE}


@pytest.mark.parametrize(
    ("toleration", "expected"),
    [
        ({"key": "gpu", "operator": "Equal", "value": "a100", "effect": NO_SCHEDULE}, True),
        ({"key": "gpu", "value": "a100", "effect": NO_SCHEDULE}, True),  # Equal is the default
        ({"key": "gpu", "operator": "Equal", "value": "h100", "effect": NO_SCHEDULE}, False),
        ({"key": "gpu", "operator": "Exists", "effect": NO_SCHEDULE}, True),
        ({"key": "gpu", "operator": "Exists"}, True),  # empty effect: every effect
        ({"key": "gpu", "operator": "Exists", "effect": NO_EXECUTE}, False),
        ({"key": "cpu", "operator": "Exists"}, False),
        ({"operator": "Exists"}, True),  # empty key with Exists: every taint
        ({"operator": "Exists", "effect": NO_EXECUTE}, False),
        ({"key": "gpu", "operator": "Equal"}, False),  # empty value against "a100"
        ({"key": "gpu", "operator": "Gt", "value": "1"}, False),  # unknown operator
    ],
)
def test_toleration_tolerates(toleration: dict[str, Any], expected: bool) -> None:
    assert toleration_tolerates(toleration, GPU) is expected
    assert tolerates([toleration], GPU) is expected


def test_equal_matches_empty_values() -> None:
    taint = {"key": "dedicated", "effect": NO_SCHEDULE}
    assert toleration_tolerates({"key": "dedicated", "operator": "Equal", "value": ""}, taint)
    assert toleration_tolerates({"key": "dedicated"}, taint)


def test_no_tolerations_tolerate_nothing() -> None:
    assert not tolerates([], GPU)


def test_matching_toleration_is_the_first_match() -> None:
    first = {"key": "gpu", "operator": "Exists", "tolerationSeconds": 5}
    second = {"operator": "Exists"}
    assert matching_toleration([{"key": "x"}, first, second], GPU) is first
    assert matching_toleration([{"key": "x"}], GPU) is None


def test_untolerated_returns_the_first_untolerated_taint_of_the_effects() -> None:
    not_ready = {"key": "node.kubernetes.io/not-ready", "effect": NO_EXECUTE}
    soft = {"key": "soft", "effect": "PreferNoSchedule"}
    taints = [soft, GPU, not_ready]
    assert untolerated([], taints, {NO_SCHEDULE, NO_EXECUTE}) == GPU
    assert untolerated([], taints, {NO_EXECUTE}) == not_ready
    tolerate_gpu = [{"key": "gpu", "operator": "Exists"}]
    assert untolerated(tolerate_gpu, taints, {NO_SCHEDULE}) is None
    assert untolerated(tolerate_gpu, taints, {NO_SCHEDULE, NO_EXECUTE}) == not_ready
    assert untolerated([{"operator": "Exists"}], taints, {NO_SCHEDULE, NO_EXECUTE}) is None


def test_untolerated_returns_a_copy() -> None:
    found = untolerated([], [GPU], {NO_SCHEDULE})
    assert found == GPU
    assert found is not GPU
