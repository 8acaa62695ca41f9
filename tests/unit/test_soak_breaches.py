"""bench.soak: each accounting invariant the extender's passes broke (its /debug/invariants) is
a soak violation of its kind, each reported once however often the soak looks."""

from __future__ import annotations

from typing import Any

from bench.soak import _breaches
from bench.soak_checker import Checker


class _Extender:
    """The extender's debug view as the soak reads it."""

    def __init__(self) -> None:
        self.books: dict[str, Any] = {"breaches": 0, "recent": []}

    async def extender_debug(self, path: str) -> dict[str, Any]:
        assert path == "/debug/invariants"
        return self.books


def _breach(n: int) -> dict[str, str]:
    return {
        "kind": "inqueue-over-capability",
        "subject": "q",
        "job": f"ns/job-{n}",
        "detail": "cpu: allocated 10 + inqueue 11 - elastic 0 > realCapability 20",
    }


async def test_each_breach_is_one_violation_of_its_kind() -> None:
    checker, extender = Checker(), _Extender()
    seen = await _breaches(checker, extender, 0, 1.0)  # type: ignore[arg-type]
    assert (seen, checker.violations) == (0, [])
    extender.books = {"breaches": 2, "recent": [_breach(1), _breach(2)]}
    seen = await _breaches(checker, extender, seen, 2.0)  # type: ignore[arg-type]
    seen = await _breaches(checker, extender, seen, 3.0)  # type: ignore[arg-type]
    assert seen == 2
    assert [(v.kind, v.subject) for v in checker.violations] == [
        ("inqueue-over-capability", "q"),
        ("inqueue-over-capability", "q"),
    ]
    assert checker.violations[1].detail.startswith("booking of ns/job-2: cpu: allocated 10")
    extender.books = {"breaches": 3, "recent": [_breach(1), _breach(2), _breach(3)]}
    assert await _breaches(checker, extender, seen, 4.0) == 3  # type: ignore[arg-type]
    assert [v.detail.split(":")[0] for v in checker.violations] == [
        "booking of ns/job-1",
        "booking of ns/job-2",
        "booking of ns/job-3",
    ]
