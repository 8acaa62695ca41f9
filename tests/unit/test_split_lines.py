"""core.kube.client.split_lines: a watch's events, one per line, whatever the chunks the
stream arrived in."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator

import orjson

from core.kube.client import split_lines


async def arriving(chunks: list[bytes]) -> AsyncIterator[bytes]:
    for chunk in chunks:
        yield chunk


async def lines_of(chunks: list[bytes]) -> list[bytes]:
    return [line async for line in split_lines(arriving(chunks))]


async def test_events_are_whole_whatever_the_cuts() -> None:
    events = [
        orjson.dumps({"type": "ADDED", "object": {"metadata": {"name": f"p{i}"}, "n": "x" * i}})
        for i in range(40)
    ]
    stream = b"".join(event + b"\n" for event in events)
    rng = random.Random(5)
    for _ in range(200):
        cuts = sorted(rng.sample(range(1, len(stream)), rng.randint(0, 30)))
        chunks = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True)]
        assert await lines_of(chunks) == events


async def test_blank_lines_are_skipped_and_a_last_line_without_newline_is_kept() -> None:
    chunks = [b'{"a":1}\n\n', b"  \n", b'{"b"', b":2}\n", b'{"c":3}']
    assert await lines_of(chunks) == [b'{"a":1}', b'{"b":2}', b'{"c":3}']
    assert await lines_of([]) == []
    assert await lines_of([b"\n", b" "]) == []
