"""Leader election on a `coordination.k8s.io/v1` Lease, with client-go's leaderelection rules.

- Acquire: create the Lease if it is missing; take it over when it is released (empty holder) or
  expired; every write carries the resourceVersion that was read, so of two contenders racing
  for the same Lease only one write succeeds (the other gets 409).
- Expiry is judged like client-go: from when *this* process last saw the record change, plus the
  record's leaseDurationSeconds — never from the holder's renewTime, whose clock may be skewed.
- While leading, renew every `retry_period`; if no renewal succeeds within `renew_deadline` of
  the last good one, step down: `on_started_leading`'s task is cancelled, `is_leader` turns
  False and `on_stopped_leading` runs. Since renew_deadline < lease_duration, a leader stops
  acting before anyone else may take over.
- On clean shutdown (cancel `run()`, or `release()`) the holder is cleared so another instance
  takes over at once (client-go's ReleaseOnCancel).
- `lost` tells a step-down because renewals failed (or another holder appeared) from one asked
  for: vulcan's commands then exit non-zero with "leaderelection lost", as kube-scheduler and
  kube-controller-manager do, and a clean stop exits 0. The elector itself would contend again.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import inspect
import logging
import math
import random
import socket
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from core.kube.client import LEASES, ApiError, KubeClient
from core.kube.events import micro_time
from core.kube.flags import add_leader_election_flags

__all__ = ["LeaderElectionConfig", "LeaderElector", "add_leader_election_flags", "default_identity"]

log = logging.getLogger("vulcan.kube.leader")

JITTER = 0.2  # followers poll every retry_period * (1 + up to 20%), so they do not stampede

StartedCallback = Callable[[], Awaitable[Any]]
StoppedCallback = Callable[[], Any]
NewLeaderCallback = Callable[[str], Any]


class LeaderElector:
    def __init__(
        self,
        client: KubeClient,
        namespace: str,
        name: str,
        identity: str,
        *,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        on_started_leading: StartedCallback | None = None,
        on_stopped_leading: StoppedCallback | None = None,
        on_new_leader: NewLeaderCallback | None = None,
        release_on_cancel: bool = True,
    ) -> None:
        if not identity:
            raise ValueError("leader election needs a non-empty identity")
        if not lease_duration > renew_deadline > retry_period > 0:
            raise ValueError(
                "leader election needs lease_duration > renew_deadline > retry_period > 0"
            )
        self.client = client
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.on_started_leading = on_started_leading
        self.on_stopped_leading = on_stopped_leading
        self.on_new_leader = on_new_leader
        self.release_on_cancel = release_on_cancel
        self.leading = asyncio.Event()  # set exactly while is_leader
        self._observed_spec: dict[str, Any] | None = None
        self._observed_at = 0.0  # loop time the observed record last changed
        self._observed_holder = ""
        self._leading_task: asyncio.Task[Any] | None = None
        self.lost = False  # the last term ended because the Lease was lost, not released
        self._stopping = False
        self._stop = asyncio.Event()

    @property
    def is_leader(self) -> bool:
        return self.leading.is_set()

    @property
    def leader(self) -> str:
        """The holder this instance last saw ("" when none)."""
        return self._observed_holder

    # ------------------------------------------------------------------------ the loop

    async def run(self) -> None:
        """Contend, lead, and after losing the lease contend again — until `release()` or
        cancellation (which steps down, and releases if `release_on_cancel`)."""
        try:
            while not self._stopping:
                await self._acquire()
                if self._stopping:
                    break
                await self._start_leading()
                await self._renew_until_lost()
                if not self._stopping:
                    self.lost = True
                    log.error("leaderelection lost", extra={"lease": self.name})
                await self._step_down("lost the lease")
        except asyncio.CancelledError:
            await self._step_down("cancelled")
            # After a loss the Lease is not ours: do not spend renew_deadline on an API server
            # that may be the reason it was lost.
            if self.release_on_cancel and not self.lost:
                await self._release_lease()
            raise
        finally:
            self.leading.clear()

    async def _acquire(self) -> None:
        loop = asyncio.get_running_loop()
        while not self._stopping:
            try:
                async with asyncio.timeout(self.renew_deadline):
                    if await self._try_acquire_or_renew():
                        return
            except (ApiError, TimeoutError) as exc:
                log.debug("could not acquire lease", extra={"lease": self.name, "error": str(exc)})
            delay = self.retry_period * (1 + random.uniform(0, JITTER))
            await self._sleep_until(loop.time() + delay)

    async def _renew_until_lost(self) -> None:
        loop = asyncio.get_running_loop()
        last_good = loop.time()  # when the write that made us leader started (or earlier)
        while not self._stopping:
            deadline = last_good + self.renew_deadline
            await self._sleep_until(min(deadline, loop.time() + self.retry_period))
            if self._stopping or loop.time() >= deadline:
                return
            started = loop.time()
            try:
                async with asyncio.timeout_at(deadline):
                    renewed = await self._try_acquire_or_renew()
            except TimeoutError:
                return
            except ApiError as exc:
                log.debug("lease renewal failed", extra={"lease": self.name, "error": str(exc)})
                continue
            if renewed:
                # Measured from the start of the write: a follower cannot have seen it earlier.
                last_good = started
            elif self._observed_holder not in ("", self.identity):
                return  # someone else holds it: no point retrying until the deadline

    async def _sleep_until(self, when: float) -> None:
        delay = when - asyncio.get_running_loop().time()
        if delay > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), delay)

    # ------------------------------------------------------------------------ one attempt

    async def _try_acquire_or_renew(self) -> bool:
        """One read-modify-write of the Lease. True when we hold it afterwards."""
        loop = asyncio.get_running_loop()
        now_wall = micro_time()
        path = LEASES.path(self.namespace, self.name)
        try:
            # retry=False: this loop is the retry, paced by retry_period and renew_deadline.
            lease = await self.client.request("GET", path, retry=False)
        except ApiError as exc:
            if not exc.not_found:
                raise
            if self._stopping:
                return False
            spec = self._spec(now_wall, acquire_time=now_wall, transitions=0)
            body = {
                "apiVersion": LEASES.api_version,
                "kind": LEASES.kind,
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": spec,
            }
            try:
                await self.client.request(
                    "POST", LEASES.path(self.namespace), body=body, retry=False
                )
            except ApiError as create_exc:
                if create_exc.conflict:
                    return False  # another contender created it first
                raise
            self._observe(spec, loop.time())
            return True

        spec = lease.get("spec") or {}
        self._observe(spec, loop.time())
        holder = spec.get("holderIdentity") or ""
        if holder and holder != self.identity and not self._expired(spec, loop.time()):
            return False
        if self._stopping:
            return False  # release() ran while we were reading: do not take the lease back
        if holder == self.identity:
            new_spec = self._spec(
                now_wall,
                acquire_time=spec.get("acquireTime") or now_wall,
                transitions=int(spec.get("leaseTransitions") or 0),
            )
        else:
            new_spec = self._spec(
                now_wall,
                acquire_time=now_wall,
                transitions=int(spec.get("leaseTransitions") or 0) + 1,
            )
        # Keep the object's other spec fields (e.g. strategy, preferredHolder) as they are.
        lease["spec"] = {**spec, **new_spec}
        try:
            await self.client.request("PUT", path, body=lease, retry=False)
        except ApiError as exc:
            if exc.conflict:
                return False  # someone wrote in between: our read is stale, re-read next time
            raise
        self._observe(lease["spec"], loop.time())
        return True

    def _spec(self, now: str, *, acquire_time: str, transitions: int) -> dict[str, Any]:
        return {
            "holderIdentity": self.identity,
            # An int32 on the wire; round up so followers never wait less than configured.
            "leaseDurationSeconds": max(1, math.ceil(self.lease_duration)),
            "acquireTime": acquire_time,
            "renewTime": now,
            "leaseTransitions": transitions,
        }

    def _observe(self, spec: dict[str, Any], now: float) -> None:
        if spec != self._observed_spec:
            self._observed_spec = dict(spec)
            self._observed_at = now
        holder = spec.get("holderIdentity") or ""
        if holder != self._observed_holder:
            self._observed_holder = holder
            log.debug("lease holder changed", extra={"lease": self.name, "holder": holder})
            if holder and self.on_new_leader is not None:
                try:
                    self.on_new_leader(holder)
                except Exception:
                    log.exception("on_new_leader failed")

    def _expired(self, spec: dict[str, Any], now: float) -> bool:
        duration = spec.get("leaseDurationSeconds") or self.lease_duration
        return now >= self._observed_at + float(duration)

    # ------------------------------------------------------------------------ transitions

    async def _start_leading(self) -> None:
        log.info(
            "became leader",
            extra={"lease": f"{self.namespace}/{self.name}", "identity": self.identity},
        )
        self.leading.set()
        self.lost = False
        if self.on_started_leading is not None:
            # A task, as client-go runs OnStartedLeading in a goroutine: it may run the
            # component for as long as we lead, and is cancelled when we stop leading.
            self._leading_task = asyncio.create_task(
                self._run_started(self.on_started_leading), name=f"leading-{self.name}"
            )

    @staticmethod
    async def _run_started(callback: StartedCallback) -> None:
        try:
            await callback()
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("on_started_leading failed")

    async def _step_down(self, why: str) -> None:
        if not self.leading.is_set():
            return
        self.leading.clear()
        log.info(
            "stopped leading",
            extra={"lease": f"{self.namespace}/{self.name}", "identity": self.identity, "why": why},
        )
        task, self._leading_task = self._leading_task, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self.on_stopped_leading is not None:
            try:
                result = self.on_stopped_leading()
                if inspect.isawaitable(result):
                    await result
            except Exception:
                log.exception("on_stopped_leading failed")

    async def release(self) -> None:
        """Stop contending, step down, and clear the Lease's holder if we hold it, so another
        instance can take over at once. `run()` returns afterwards."""
        self._stopping = True
        self._stop.set()
        was_leader = self.is_leader
        await self._step_down("released")
        if was_leader:
            await self._release_lease()

    async def _release_lease(self) -> None:
        try:
            # Bounded: a shutdown must not hang on an unreachable API server.
            async with asyncio.timeout(self.renew_deadline):
                for _ in range(3):  # a renewal racing with us may make the first PUT conflict
                    if await self._try_release():
                        return
        except (ApiError, TimeoutError) as exc:
            # Followers will take over once it expires; nothing more to do.
            log.info("could not release lease", extra={"lease": self.name, "error": str(exc)})

    async def _try_release(self) -> bool:
        """Clear the holder if it is us. True when done (or nothing to do)."""
        path = LEASES.path(self.namespace, self.name)
        lease = await self.client.request("GET", path, retry=False)
        spec = lease.get("spec") or {}
        if spec.get("holderIdentity") != self.identity:
            return True  # not ours (any more): nothing to release
        now = micro_time()
        # client-go's release: empty holder, 1 s duration, fresh times, same transitions.
        lease["spec"] = {
            **spec,
            "holderIdentity": "",
            "leaseDurationSeconds": 1,
            "acquireTime": now,
            "renewTime": now,
        }
        try:
            await self.client.request("PUT", path, body=lease, retry=False)
        except ApiError as exc:
            if exc.conflict:
                return False
            raise
        log.info("released lease", extra={"lease": f"{self.namespace}/{self.name}"})
        return True


# ---------------------------------------------------------------------------- configuration


@dataclass(slots=True)
class LeaderElectionConfig:
    """The Kubernetes component flags (`--leader-elect*`) in one place."""

    leader_elect: bool = True
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    resource_name: str = "vulcan"
    resource_namespace: str = "vulcan-system"

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> LeaderElectionConfig:
        return cls(
            leader_elect=args.leader_elect,
            lease_duration=args.leader_elect_lease_duration,
            renew_deadline=args.leader_elect_renew_deadline,
            retry_period=args.leader_elect_retry_period,
            resource_name=args.leader_elect_resource_name,
            resource_namespace=args.leader_elect_resource_namespace,
        )

    def elector(
        self, client: KubeClient, identity: str | None = None, **callbacks: Any
    ) -> LeaderElector:
        return LeaderElector(
            client,
            self.resource_namespace,
            self.resource_name,
            identity or default_identity(),
            lease_duration=self.lease_duration,
            renew_deadline=self.renew_deadline,
            retry_period=self.retry_period,
            **callbacks,
        )


def default_identity() -> str:
    """hostname_uuid, as kube-scheduler does: unique even for two processes on one host."""
    return f"{socket.gethostname()}_{uuid.uuid4()}"
