"""Leader election on a Lease in the embedded API server: two contenders, crash takeover,
clean release, step-down when renewals fail, and the --leader-elect* flags."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import re
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from kubernetes_asyncio.client import Configuration

from core.durations import parse_duration
from core.kube.client import LEASES, ApiError, KubeClient
from core.kube.leader import LeaderElectionConfig, LeaderElector, add_leader_election_flags
from sim.apiserver.server import EmbeddedApiServer
from tests.helpers import until

NS = "default"
LEASE = "vulcan-test"
LEASE_DURATION, RENEW_DEADLINE, RETRY_PERIOD = 1.5, 1.0, 0.2
MICRO_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")


class Contest:
    """Electors on separate clients, their tasks, and a watchdog that samples `is_leader`."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.electors: dict[str, LeaderElector] = {}
        self.clients: dict[str, KubeClient] = {}
        self.tasks: dict[str, asyncio.Task[None]] = {}
        self.log: list[str] = []  # "start:a", "stop:a" in the order they happened
        self.both_leading = 0
        self.samples = 0
        self._watchdog: asyncio.Task[None] | None = None

    def add(self, identity: str, **kwargs: Any) -> LeaderElector:
        client = KubeClient(Configuration(host=self.url))

        async def started() -> None:
            self.log.append(f"start:{identity}")
            self._check()
            await asyncio.Event().wait()  # "runs the component" until cancelled

        def stopped() -> None:
            self.log.append(f"stop:{identity}")

        elector = LeaderElector(
            client,
            NS,
            LEASE,
            identity,
            lease_duration=LEASE_DURATION,
            renew_deadline=RENEW_DEADLINE,
            retry_period=RETRY_PERIOD,
            on_started_leading=started,
            on_stopped_leading=stopped,
            **kwargs,
        )
        self.clients[identity] = client
        self.electors[identity] = elector
        return elector

    def start(self, identity: str) -> None:
        self.tasks[identity] = asyncio.create_task(self.electors[identity].run())
        if self._watchdog is None:
            self._watchdog = asyncio.create_task(self._watch())

    def _check(self) -> None:
        self.samples += 1
        if sum(e.is_leader for e in self.electors.values()) > 1:
            self.both_leading += 1

    async def _watch(self) -> None:
        while True:
            self._check()
            await asyncio.sleep(0.005)

    async def crash(self, identity: str) -> None:
        """Cancel the task: with release_on_cancel=False the Lease is left as it was."""
        task = self.tasks.pop(identity)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    async def first_leader(self, timeout: float = 10) -> LeaderElector:
        waits = {asyncio.create_task(e.leading.wait()): e for e in self.electors.values()}
        done, pending = await asyncio.wait(
            waits, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
        )
        for task in pending:
            task.cancel()
        assert done, "nobody became leader"
        return waits[next(iter(done))]

    async def close(self) -> None:
        for identity in list(self.tasks):
            await self.crash(identity)
        if self._watchdog is not None:
            self._watchdog.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watchdog
        for client in self.clients.values():
            await client.close()


@pytest_asyncio.fixture
async def contest(apiserver: EmbeddedApiServer) -> AsyncIterator[Contest]:
    c = Contest(apiserver.url)
    yield c
    await c.close()
    assert c.both_leading == 0, "two electors led at the same time"


async def lease(contest: Contest) -> dict[str, Any]:
    client = next(iter(contest.clients.values()))
    return (await client.request("GET", LEASES.path(NS, LEASE), retry=False))["spec"]


async def test_one_leads_and_the_other_takes_over_after_a_crash(contest: Contest) -> None:
    contest.add("a", release_on_cancel=False)
    contest.add("b", release_on_cancel=False)
    contest.start("a")
    contest.start("b")
    leader = await contest.first_leader()
    follower = next(e for e in contest.electors.values() if e is not leader)
    spec = await lease(contest)
    assert spec["holderIdentity"] == leader.identity
    assert spec["leaseDurationSeconds"] == 2  # 1.5 s rounded up: an int32 on the wire
    assert spec["leaseTransitions"] == 0
    assert MICRO_TIME.match(spec["renewTime"]) and MICRO_TIME.match(spec["acquireTime"])
    # The leader keeps renewing; the follower does not get in meanwhile.
    await until(lambda: follower.leader == leader.identity)
    first_renew = spec["renewTime"]
    await asyncio.sleep(3 * RETRY_PERIOD)
    assert leader.is_leader and not follower.is_leader
    assert (await lease(contest))["renewTime"] > first_renew

    loop = asyncio.get_running_loop()
    crashed_at = loop.time()
    await contest.crash(leader.identity)
    assert not leader.is_leader and contest.log[-1] == f"stop:{leader.identity}"
    await asyncio.wait_for(follower.leading.wait(), 10)
    took = loop.time() - crashed_at
    # Not before the lease could have expired, and within about one lease duration.
    assert 1.0 < took < 2 + 4 * RETRY_PERIOD
    spec = await lease(contest)
    assert spec["holderIdentity"] == follower.identity and spec["leaseTransitions"] == 1
    assert contest.samples > 50


async def test_a_clean_release_hands_over_at_once(contest: Contest) -> None:
    contest.add("a")
    contest.add("b")
    contest.start("a")
    leader = await contest.first_leader()
    contest.start("b")
    follower = contest.electors["b"]
    await until(lambda: follower.leader == "a")
    loop = asyncio.get_running_loop()
    released_at = loop.time()
    await contest.crash("a")  # cancel with release_on_cancel=True: a clean shutdown
    assert not leader.is_leader and not leader.lost
    await asyncio.wait_for(follower.leading.wait(), 10)
    assert loop.time() - released_at < LEASE_DURATION  # no waiting for expiry
    spec = await lease(contest)
    assert spec["holderIdentity"] == "b" and spec["leaseTransitions"] == 1
    assert contest.log == ["start:a", "stop:a", "start:b"]


async def test_release_stops_run_and_clears_the_holder(contest: Contest) -> None:
    elector = contest.add("a")
    contest.start("a")
    await asyncio.wait_for(elector.leading.wait(), 10)
    await elector.release()
    await asyncio.wait_for(contest.tasks.pop("a"), 5)  # run() returns
    spec = await lease(contest)
    assert spec["holderIdentity"] == "" and not elector.is_leader and not elector.lost
    assert contest.log == ["start:a", "stop:a"]


async def test_a_leader_that_cannot_renew_steps_down_within_the_renew_deadline(
    contest: Contest, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = contest.add("a")
    b = contest.add("b")
    contest.start("a")
    await asyncio.wait_for(a.leading.wait(), 10)
    contest.start("b")
    await until(lambda: b.leader == "a")

    async def unavailable(*args: Any, **kwargs: Any) -> Any:
        raise ApiError(503, "ServiceUnavailable", "etcd is down")

    loop = asyncio.get_running_loop()
    monkeypatch.setattr(contest.clients["a"], "request", unavailable)
    broken_at = loop.time()
    await until(lambda: "stop:a" in contest.log, 5)
    assert not a.is_leader
    assert a.lost  # what the commands turn into exit status 1 ("leaderelection lost")
    # The last good renewal was before the breakage, so the deadline had passed by then.
    assert loop.time() - broken_at <= RENEW_DEADLINE + 0.5
    # The follower takes over once the lease expires — after a stopped acting, never before.
    await asyncio.wait_for(b.leading.wait(), 10)
    assert contest.log == ["start:a", "stop:a", "start:b"]
    monkeypatch.undo()  # a recovers, finds b holding the lease and stays a follower
    await asyncio.sleep(3 * RETRY_PERIOD)
    assert not a.is_leader and a.leader == "b"


async def test_a_renewal_that_hangs_counts_as_failed(
    contest: Contest, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = contest.add("a")
    contest.start("a")
    await asyncio.wait_for(a.leading.wait(), 10)

    async def hang(*args: Any, **kwargs: Any) -> Any:
        await asyncio.Event().wait()

    monkeypatch.setattr(contest.clients["a"], "request", hang)
    await until(lambda: "stop:a" in contest.log, 5)
    assert not a.is_leader


async def test_racing_for_an_expired_lease_only_one_wins(contest: Contest) -> None:
    contest.add("a")
    contest.add("b")
    client = contest.clients["a"]
    await client.create(
        LEASES,
        {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": LEASE, "namespace": NS},
            "spec": {
                "holderIdentity": "crashed-pod",
                "leaseDurationSeconds": 1,
                "renewTime": "2020-01-01T00:00:00.000000Z",
                "acquireTime": "2020-01-01T00:00:00.000000Z",
                "leaseTransitions": 4,
            },
        },
    )
    contest.start("a")
    contest.start("b")
    winner = await contest.first_leader()
    await asyncio.sleep(3 * RETRY_PERIOD)
    assert sum(e.is_leader for e in contest.electors.values()) == 1
    spec = await lease(contest)
    assert spec["holderIdentity"] == winner.identity and spec["leaseTransitions"] == 5


def test_flags_and_config() -> None:
    parser = argparse.ArgumentParser()
    add_leader_election_flags(parser, default_name="vc-scheduler")
    defaults = LeaderElectionConfig.from_args(parser.parse_args([]))
    assert defaults == LeaderElectionConfig(resource_name="vc-scheduler")
    args = parser.parse_args(
        [
            "--leader-elect=false",
            "--leader-elect-lease-duration=30s",
            "--leader-elect-renew-deadline",
            "1m",
            "--leader-elect-retry-period=500ms",
            "--leader-elect-resource-name=x",
            "--leader-elect-resource-namespace",
            "kube-system",
        ]
    )
    assert LeaderElectionConfig.from_args(args) == LeaderElectionConfig(
        leader_elect=False,
        lease_duration=30.0,
        renew_deadline=60.0,
        retry_period=0.5,
        resource_name="x",
        resource_namespace="kube-system",
    )
    assert parser.parse_args(["--leader-elect"]).leader_elect is True
    assert parse_duration("1m30s") == 90 and parse_duration("2") == 2
    with pytest.raises(argparse.ArgumentTypeError):
        parse_duration("15 seconds")
    with pytest.raises(ValueError):
        LeaderElector(None, NS, LEASE, "a", lease_duration=5, renew_deadline=5)  # type: ignore[arg-type]
