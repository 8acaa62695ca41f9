"""The extender's wire encoding: PascalCase, integer scores, fragments equal to plain JSON."""

from __future__ import annotations

import random
from typing import Any

import orjson
import pytest

from extender.protocol import (
    BadRequest,
    above_lowest,
    host_priority_list,
    parse_binding_args,
    parse_extender_args,
    preemption_result,
)


@pytest.mark.parametrize(
    ("names", "scores"),
    [
        (["a", "b"], [0, 10]),
        (['quote"and\\slash', "ünïcode"], [3, 7]),
        (["n"], [12]),  # outside 0..10: still exact (plain encoding)
        ([], []),
    ],
)
def test_host_priority_list_is_plain_json(names: list[str], scores: list[int]) -> None:
    encoded = host_priority_list(names, scores)
    assert orjson.loads(encoded) == [
        {"Host": n, "Score": s} for n, s in zip(names, scores, strict=True)
    ]


def test_host_priority_list_bytes_equal_orjson_for_any_names_and_scores() -> None:
    rng = random.Random(7)
    alphabet = ["a", "z", "0", "-", ".", '"', "\\", "\n", "\x00", "é", "🙂", ","]
    scores: list[Any] = [*range(11), 11, -1, 5.0, 5.5, True, 100]
    for size in (1, 2, 3, 10, 200):
        for _ in range(30):
            names = [
                "".join(
                    rng.choice(alphabet[:5] if rng.random() < 0.9 else alphabet)
                    for _ in range(rng.randrange(0, 12))
                )
                for _ in range(size)
            ]
            values = [rng.choice(scores[:11] if rng.random() < 0.9 else scores) for _ in names]
            assert host_priority_list(names, values) == orjson.dumps(
                [{"Host": n, "Score": int(s)} for n, s in zip(names, values, strict=True)]
            )


def test_scores_are_always_integers() -> None:
    encoded = host_priority_list(["n"], [5.0])  # type: ignore[list-item]
    assert encoded == b'[{"Host":"n","Score":5}]'


def test_args_parsing_is_case_insensitive_and_strict_on_types() -> None:
    args = parse_extender_args({"pod": {"metadata": {"name": "p"}}, "nodenames": ["a"]})
    assert args.node_names == ["a"] and args.pod.namespace == "default" and args.cache_mode
    with pytest.raises(BadRequest, match="NodeNames must be a list of strings"):
        parse_extender_args({"Pod": {"metadata": {"name": "p"}}, "NodeNames": ["a", 1]})
    binding = parse_binding_args({"PodName": "p", "PodNamespace": "ns", "PodUID": "", "Node": "n"})
    assert (binding.pod_uid, binding.node) == ("", "n")


def test_preemption_result_meta_form() -> None:
    assert orjson.loads(preemption_result({"n": (["u1"], 2)})) == {
        "NodeNameToMetaVictims": {"n": {"Pods": [{"UID": "u1"}], "NumPDBViolations": 2}}
    }


def _choices(totals: dict[str, int]) -> set[str]:
    best = max(totals.values())
    return {name for name, total in totals.items() if total == best}


def test_above_lowest_changes_no_choice_of_kube_scheduler() -> None:
    """kube-scheduler adds `score × weight × 10` to each node's in-tree total and nothing for a
    node the answer omits; the nodes it may pick (the highest totals, ties broken at random)
    are the same with the whole answer and with the one relative to the lowest score."""
    rng = random.Random(7)
    for _ in range(2_000):
        names = [f"n{i}" for i in range(rng.randint(1, 12))]
        scores = [rng.randint(0, 10) for _ in names]
        weight = rng.randint(1, 5)
        in_tree = {name: rng.choice((0, 50, 100, 1_200)) for name in names}
        kept, relative = above_lowest(names, scores)
        assert all(0 < score <= 10 for score in relative)
        assert kept == [n for n, s in zip(names, scores, strict=True) if s > min(scores)]
        whole = {n: in_tree[n] + s * weight * 10 for n, s in zip(names, scores, strict=True)}
        sent = dict(in_tree)
        for name, score in zip(kept, relative, strict=True):
            sent[name] += score * weight * 10
        assert _choices(whole) == _choices(sent)


def test_above_lowest_of_equal_scores_is_empty() -> None:
    assert above_lowest(["a", "b"], [7, 7]) == ([], [])
    assert above_lowest([], []) == ([], [])
    assert above_lowest(["a", "b", "c"], [3, 9, 3]) == (["b"], [6])
