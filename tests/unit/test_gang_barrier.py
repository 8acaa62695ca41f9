"""extender.barrier: held binds are committed all at once on quorum, and fail all together on
timeout, release or disconnect (gang-design.md §9.3 item 3, extender-protocol.md §5.5-§5.7).

The tests wait on the barrier's own events and on the fake commit's calls (no sleeps); timeouts
are tiny values passed to the barrier.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from extender.barrier import BindBarrier
from extender.binder import BindError
from extender.gang_hold import GangRequirement, check_timeouts
from extender.protocol import BindingArgs

KEY = "ns/pg"


class Signal:
    """Futures resolved when a predicate over recorded state becomes true; poked on every
    change, so a test can await "three members are held" without polling."""

    def __init__(self) -> None:
        self._waiters: list[tuple[Callable[[], bool], asyncio.Future[None]]] = []

    def poke(self) -> None:
        for predicate, future in self._waiters:
            if not future.done() and predicate():
                future.set_result(None)
        self._waiters = [(p, f) for p, f in self._waiters if not f.done()]

    async def until(self, predicate: Callable[[], bool]) -> None:
        if predicate():
            return
        future = asyncio.get_running_loop().create_future()
        self._waiters.append((predicate, future))
        await future


class Events:
    def __init__(self, signal: Signal) -> None:
        self.signal = signal
        self.seen: list[tuple[str, str, str]] = []

    def __call__(self, key: str, reason: str, message: str) -> None:
        self.seen.append((key, reason, message))
        self.signal.poke()

    def reasons(self, key: str = KEY) -> list[str]:
        return [reason for k, reason, _ in self.seen if k == key]

    def message(self, reason: str, key: str = KEY) -> str:
        return next(m for k, r, m in self.seen if k == key and r == reason)


class FakeCommit:
    """Binder.bind stand-in: records calls; per pod it can fail or wait on a gate."""

    def __init__(self, signal: Signal) -> None:
        self.signal = signal
        self.calls: list[BindingArgs] = []
        self.bound: list[str] = []
        self.fail: dict[str, str] = {}
        self.gate: asyncio.Event | None = None  # when set, every commit waits for it

    @property
    def called(self) -> list[str]:
        return [f"{a.pod_namespace}/{a.pod_name}" for a in self.calls]

    async def __call__(self, args: BindingArgs) -> None:
        pod = f"{args.pod_namespace}/{args.pod_name}"
        self.calls.append(args)
        self.signal.poke()
        if self.gate is not None:
            await self.gate.wait()
        if pod in self.fail:
            raise BindError(self.fail[pod])
        self.bound.append(pod)
        self.signal.poke()


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Rig:
    def __init__(self, **options: object) -> None:
        self.signal = Signal()
        self.events = Events(self.signal)
        self.commit = FakeCommit(self.signal)
        self.clock = Clock()
        self.barrier = BindBarrier(
            self.commit,
            clock=self.clock,
            on_event=self.events,
            **options,  # type: ignore[arg-type]
        )

    def start(
        self, group: GangRequirement, name: str, task: str | None = None, *, uid: str = ""
    ) -> asyncio.Task[None]:
        namespace, _ = group.key.split("/")
        args = BindingArgs(name, namespace, uid or f"uid-{name}", f"node-{name}")
        return asyncio.create_task(self.barrier.hold(group, args, task))

    async def held(self, count: int, key: str = KEY) -> None:
        await self.signal.until(lambda: self.barrier.held(key) == count)

    async def committed(self, count: int) -> None:
        await self.signal.until(lambda: len(self.commit.calls) == count)


def gang(min_member: int = 4, key: str = KEY, **fields: object) -> GangRequirement:
    return GangRequirement(key=key, min_member=min_member, **fields)  # type: ignore[arg-type]


async def outcome(task: asyncio.Task[None]) -> BaseException | None:
    """The task's exception (or None), awaited without raising."""
    try:
        await task
    except BaseException as exc:
        return exc
    return None


# ------------------------------------------------------------------------------ quorum


async def test_members_are_held_until_quorum_then_bound_together() -> None:
    rig = Rig()
    held = [rig.start(gang(), f"p{i}") for i in range(3)]
    await rig.held(3)
    assert rig.commit.calls == []
    assert not any(task.done() for task in held)
    assert rig.barrier.holds() == {KEY: 3}

    # Every commit waits on the gate: all four start before any finishes, i.e. one burst.
    rig.commit.gate = asyncio.Event()
    last = rig.start(gang(), "p3")
    await rig.committed(4)
    assert sorted(rig.commit.called) == ["ns/p0", "ns/p1", "ns/p2", "ns/p3"]
    assert rig.barrier.held(KEY) == 0
    rig.commit.gate.set()

    assert await asyncio.gather(*held, last) == ["bound"] * 4
    assert sorted(rig.commit.bound) == ["ns/p0", "ns/p1", "ns/p2", "ns/p3"]
    assert rig.events.reasons() == ["Holding"] + ["Held"] * 4 + ["Committed"]
    assert rig.barrier.committed(KEY)


async def test_min_task_member_must_be_met_too() -> None:
    rig = Rig()
    need = gang(4, min_task_member={"master": 1, "worker": 3})
    workers = [rig.start(need, f"w{i}", "worker") for i in range(4)]
    await rig.held(4)
    # Four members hold binds, but no master yet.
    assert rig.commit.calls == []

    master = rig.start(need, "m0", "master")
    assert await asyncio.gather(*workers, master) == ["bound"] * 5
    assert sorted(rig.commit.bound) == ["ns/m0", "ns/w0", "ns/w1", "ns/w2", "ns/w3"]


async def test_members_beyond_quorum_bind_at_once() -> None:
    rig = Rig()
    first = [rig.start(gang(2), f"p{i}") for i in range(2)]
    await asyncio.gather(*first)

    await rig.barrier.hold(gang(2), BindingArgs("p2", "ns", "uid-p2", "node-p2"), None)
    assert rig.commit.bound[-1] == "ns/p2"
    assert rig.barrier.held(KEY) == 0


async def test_already_bound_members_count_toward_quorum() -> None:
    # After an extender restart two members are bound already; two more complete the gang.
    rig = Rig()
    need = gang(
        4, already_bound=2, min_task_member={"worker": 3}, already_bound_per_task={"worker": 2}
    )
    first = rig.start(need, "w2", "worker")
    await rig.held(1)
    assert rig.commit.calls == []

    second = rig.start(need, "w3", "worker")
    assert await asyncio.gather(first, second) == ["bound", "bound"]
    assert sorted(rig.commit.bound) == ["ns/w2", "ns/w3"]


async def test_quorum_already_met_by_bound_members_binds_the_first_hold() -> None:
    rig = Rig()
    await rig.barrier.hold(gang(2, already_bound=2), BindingArgs("p2", "ns", "u", "node-a"), None)
    assert rig.commit.bound == ["ns/p2"]


# ------------------------------------------------------------------------------ timeout


async def test_timeout_fails_every_held_member_and_backs_off() -> None:
    rig = Rig(backoff=30.0)
    need = gang(4, min_task_member={"master": 1, "worker": 3}, timeout=0.01)
    tasks = [rig.start(need, "m0", "master")] + [
        rig.start(need, f"w{i}", "worker") for i in range(2)
    ]
    results = [await outcome(task) for task in tasks]

    expected = (
        "gang ns/pg: timed out after 0.01s waiting for members: "
        "3/4 members hold binds (task worker 2/3)"
    )
    assert all(isinstance(r, BindError) and str(r) == expected for r in results)
    assert all(r.result == "gang_timeout" for r in results)  # the binds_total label
    assert rig.commit.calls == []
    assert rig.barrier.held(KEY) == 0
    assert rig.events.message("TimedOut") == expected
    assert rig.barrier.backing_off(KEY) == 30.0


async def test_default_timeout_applies_when_the_group_has_none() -> None:
    rig = Rig(default_timeout=0.01)
    error = await outcome(rig.start(gang(2), "p0"))
    assert isinstance(error, BindError)
    assert (
        str(error)
        == "gang ns/pg: timed out after 0.01s waiting for members: 1/2 members hold binds"
    )


async def test_max_timeout_caps_the_group_timeout() -> None:
    rig = Rig(max_timeout=0.01)
    error = await outcome(rig.start(gang(2, timeout=3600.0), "p0"))
    assert isinstance(error, BindError) and "timed out after 0.01s" in str(error)


async def test_timeout_message_counts_bound_members() -> None:
    rig = Rig(default_timeout=0.01)
    error = await outcome(rig.start(gang(4, already_bound=2), "p2"))
    assert str(error) == (
        "gang ns/pg: timed out after 0.01s waiting for members: "
        "3/4 members hold binds or are bound (2 bound)"
    )


async def test_binds_during_backoff_fail_at_once_and_hold_again_after_it() -> None:
    rig = Rig(default_timeout=0.01, backoff=5.0)
    await outcome(rig.start(gang(2), "p0"))
    assert rig.barrier.backing_off(KEY) == 5.0

    rig.clock.now += 2.0
    with pytest.raises(BindError, match="backing off for 3s after a timeout"):
        await rig.barrier.hold(gang(2), BindingArgs("p0", "ns", "u", "n"), None)
    assert rig.barrier.held(KEY) == 0

    rig.clock.now += 3.0
    assert rig.barrier.backing_off(KEY) == 0.0
    again = [rig.start(gang(2), f"p{i}") for i in range(2)]
    assert await asyncio.gather(*again) == ["bound", "bound"]
    assert rig.commit.calls and rig.barrier.committed(KEY)


# ------------------------------------------------------------------------------ disconnect, release


async def test_a_held_member_going_away_releases_the_whole_hold() -> None:
    rig = Rig()
    tasks = [rig.start(gang(), f"p{i}") for i in range(3)]
    await rig.held(3)

    tasks[1].cancel()
    results = [await outcome(task) for task in tasks]

    assert isinstance(results[1], asyncio.CancelledError)
    for result in (results[0], results[2]):
        assert isinstance(result, BindError)
        assert str(result) == "gang ns/pg: released: member ns/p1 went away"
    assert rig.commit.calls == []
    assert rig.barrier.held(KEY) == 0
    assert "Released" in rig.events.reasons()
    # A release is not a timeout: no backoff, the gang may gather again at once.
    assert rig.barrier.backing_off(KEY) == 0.0


async def test_release_fails_held_members() -> None:
    rig = Rig()
    tasks = [rig.start(gang(), f"p{i}") for i in range(2)]
    await rig.held(2)

    rig.barrier.release(KEY, "PodGroup deleted")
    results = [await outcome(task) for task in tasks]
    assert [str(r) for r in results] == ["gang ns/pg: released: PodGroup deleted"] * 2
    assert all(isinstance(r, BindError) for r in results)
    assert rig.commit.calls == []
    assert rig.barrier.holds() == {}


async def test_release_of_an_unknown_group_does_nothing() -> None:
    rig = Rig()
    rig.barrier.release("ns/other", "gone")
    assert rig.events.seen == []


async def test_a_started_commit_is_not_interrupted_by_release_or_disconnect() -> None:
    rig = Rig()
    rig.commit.gate = asyncio.Event()
    tasks = [rig.start(gang(3), f"p{i}") for i in range(3)]
    await rig.committed(3)

    # The burst is under way: neither a release nor a caller going away stops it.
    rig.barrier.release(KEY, "PodGroup deleted")
    tasks[0].cancel()
    rig.commit.gate.set()
    results = [await outcome(task) for task in tasks]

    assert isinstance(results[0], asyncio.CancelledError)
    assert results[1:] == [None, None]
    assert sorted(rig.commit.bound) == ["ns/p0", "ns/p1", "ns/p2"]
    assert "Released" not in rig.events.reasons()


# ------------------------------------------------------------------------------ commit failures


async def test_partial_commit_failure_fails_only_the_failed_member() -> None:
    rig = Rig()
    rig.commit.fail["ns/p2"] = "pod ns/p2 not found"
    tasks = [rig.start(gang(3), f"p{i}") for i in range(3)]
    results = [await outcome(task) for task in tasks]

    assert results[:2] == [None, None]
    assert isinstance(results[2], BindError) and str(results[2]) == "pod ns/p2 not found"
    assert rig.events.message("CommitFailed") == (
        "1 of 3 bindings failed: ns/p2: pod ns/p2 not found"
    )
    # The bound members run as a gang: the failed member's retry joins them at once.
    assert rig.barrier.committed(KEY)
    del rig.commit.fail["ns/p2"]
    await rig.barrier.hold(gang(3), BindingArgs("p2", "ns", "uid-p2", "node-p2"), None)
    assert sorted(rig.commit.bound) == ["ns/p0", "ns/p1", "ns/p2"]


async def test_a_burst_where_every_commit_failed_needs_quorum_again() -> None:
    rig = Rig()
    rig.commit.fail.update({"ns/p0": "gone", "ns/p1": "gone"})
    results = [await outcome(t) for t in [rig.start(gang(2), f"p{i}") for i in range(2)]]
    assert [str(r) for r in results] == ["gone", "gone"]
    assert not rig.barrier.committed(KEY)

    rig.start(gang(2), "p0")
    await rig.held(1)
    assert len(rig.commit.calls) == 2  # the new member is held, not bound alone


async def test_an_unexpected_commit_exception_becomes_a_bind_error() -> None:
    async def broken(args: BindingArgs) -> None:
        raise RuntimeError("boom")

    barrier = BindBarrier(broken)
    with pytest.raises(BindError, match="binding ns/p0 failed: RuntimeError"):
        await barrier.hold(gang(1), BindingArgs("p0", "ns", "u", "n"), None)


# ------------------------------------------------------------------------------ retries, state


async def test_a_retried_bind_supersedes_the_held_one() -> None:
    rig = Rig()
    old = rig.start(gang(2), "p0", uid="u0")
    await rig.held(1)

    # kube-scheduler gave up on the first request, forgot the pod, and binds it again elsewhere.
    namespace_args = BindingArgs("p0", "ns", "u0", "node-b")
    newer = asyncio.create_task(rig.barrier.hold(gang(2), namespace_args, None))
    error = await outcome(old)
    assert isinstance(error, BindError)
    assert str(error) == "ns/p0: superseded by a newer bind request"
    assert rig.barrier.held(KEY) == 1  # replaced, not counted twice

    other = rig.start(gang(2), "p1")
    assert await asyncio.gather(newer, other) == ["bound", "bound"]
    # The superseded request was never bound; the newer one was, on its own node.
    assert sorted((a.pod_name, a.node) for a in rig.commit.calls) == [
        ("p0", "node-b"),
        ("p1", "node-p1"),
    ]


async def test_the_superseded_request_going_away_does_not_release_the_group() -> None:
    rig = Rig()
    old = rig.start(gang(3), "p0")
    other = rig.start(gang(3), "p1")
    await rig.held(2)
    newer = rig.start(gang(3), "p0")
    await rig.signal.until(lambda: rig.events.reasons().count("Held") == 3)

    # The old handler is cancelled (its connection closed) right as it is superseded: it was
    # answered already, so the group keeps its held members.
    old.cancel()
    await outcome(old)
    assert rig.barrier.held(KEY) == 2
    assert "Released" not in rig.events.reasons()

    assert await asyncio.gather(newer, other, rig.start(gang(3), "p2")) == ["bound"] * 3


async def test_superseding_keeps_task_counts_exact() -> None:
    rig = Rig()
    need = gang(2, min_task_member={"worker": 2})
    old = rig.start(need, "w0", "worker")
    await rig.held(1)
    again = rig.start(need, "w0", "worker")
    assert isinstance(await outcome(old), BindError)
    await rig.held(1)
    # One worker held (not two): the quorum still waits for a second worker.
    assert rig.commit.calls == []

    assert await asyncio.gather(again, rig.start(need, "w1", "worker")) == ["bound", "bound"]


async def test_forget_resets_the_committed_state() -> None:
    rig = Rig()
    await asyncio.gather(*[rig.start(gang(2), f"p{i}") for i in range(2)])
    assert rig.barrier.committed(KEY)

    rig.barrier.forget(KEY)
    assert not rig.barrier.committed(KEY)
    rig.start(gang(2), "p2")
    await rig.held(1)
    assert len(rig.commit.calls) == 2


async def test_a_failing_event_hook_does_not_break_binding() -> None:
    def hook(key: str, reason: str, message: str) -> None:
        raise ValueError("metrics down")

    barrier = BindBarrier(FakeCommit(Signal()), on_event=hook)
    await barrier.hold(gang(1), BindingArgs("p0", "ns", "u", "n"), None)


async def test_many_groups_are_independent() -> None:
    rig = Rig()
    keys = [f"ns/pg{g}" for g in range(100)]
    tasks = {key: [rig.start(gang(4, key), f"{key[3:]}-{i}") for i in range(3)] for key in keys}
    await rig.signal.until(lambda: sum(rig.barrier.holds().values()) == 300)
    assert rig.barrier.holds() == dict.fromkeys(keys, 3)
    assert rig.commit.calls == []

    # Completing the even groups binds exactly those; the odd ones stay held.
    even, odd = keys[::2], keys[1::2]
    for key in even:
        tasks[key].append(rig.start(gang(4, key), f"{key[3:]}-3"))
    await asyncio.gather(*(t for key in even for t in tasks[key]))
    assert len(rig.commit.bound) == 200
    assert {pod.split("-")[0] for pod in rig.commit.bound} == {f"ns/{k[3:]}" for k in even}
    assert rig.barrier.holds() == dict.fromkeys(odd, 3)

    # Releasing one odd group leaves the others held.
    rig.barrier.release(odd[0], "test")
    released = [await outcome(t) for t in tasks[odd[0]]]
    assert all(isinstance(r, BindError) for r in released)
    assert rig.barrier.holds() == dict.fromkeys(odd[1:], 3)

    for key in odd[1:]:
        tasks[key].append(rig.start(gang(4, key), f"{key[3:]}-3"))
    await asyncio.gather(*(t for key in odd[1:] for t in tasks[key]))
    assert len(rig.commit.bound) == 396
    assert rig.barrier.holds() == {}


# ------------------------------------------------------------------------------ check_timeouts


def test_check_timeouts() -> None:
    assert check_timeouts(300.0, 330.0) is None
    equal = check_timeouts(300.0, 300.0)
    assert equal is not None and "300s is not longer than the gang timeout 300s" in equal
    # Unset httpTimeout means kube-scheduler's 5s.
    unset = check_timeouts(60.0, None)
    assert unset is not None and "unset (5s)" in unset
    assert check_timeouts(3.0, None) is None
