"""The whole suite's options: `--scheduler-memo off` (or `check`) runs every scenario with the
extender's scheduling memo off (or checked), in process and in `vulcan sim up`'s extender: the
gang and queue scenarios must pass either way."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from extender import gang_options as gangs


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--scheduler-memo",
        choices=("on", "off", "check"),
        default=None,
        help="run the extender's scheduling passes with this memo mode (default: the product's)",
    )


@pytest.fixture(autouse=True)
def scheduler_memo(request: pytest.FixtureRequest) -> Iterator[str | None]:
    mode = request.config.getoption("--scheduler-memo")
    if mode is None:
        yield None
        return
    saved = gangs.DEFAULT_MEMO
    gangs.DEFAULT_MEMO = mode
    try:
        yield mode
    finally:
        gangs.DEFAULT_MEMO = saved
