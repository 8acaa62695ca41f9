"""A hollow kubelet's pods: acknowledging a pod bound to one of its nodes, starting its
containers (after `start_delay`), timing its run (paused while its node is down or its gang
incomplete), its exit and restarts with backoff per restartPolicy, its termination when
deleted, and the writes of its status and of the deletion's confirmation.

Separate from the node's own registration, status and leases (`sim.kubelet.node_agent`):
this is everything driven by pod events and per-pod timers. `HollowKubelets`
(`sim.kubelet.hollow`) combines the two and owns the shared state.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from typing import TYPE_CHECKING

from core.kube.client import PODS, STRATEGIC_MERGE_PATCH, ApiError
from core.timestamps import epoch_seconds
from sim.kubelet.pods import (
    BACKOFF,
    CREATING,
    FAILED,
    RUNNING,
    STARTED,
    SUCCEEDED,
    TERMINATED,
    PodRun,
    PodView,
    termination_delay,
)
from sim.kubelet.status import (
    CONTAINER_ID_SCHEME,
    never_started_state,
    pod_status,
    terminated_state,
)

if TYPE_CHECKING:
    from core.kube.client import KubeClient
    from core.kube.workqueue import WorkQueue
    from sim.kubelet.gang import GangTracker
    from sim.kubelet.node_agent import _Node
    from sim.kubelet.pods import IpPool

log = logging.getLogger("vulcan.sim.kubelet")

KILLED_EXIT_CODE = 137  # 128 + SIGKILL


class PodLifecycle:
    """The pod half of `HollowKubelets`: pod events, run timers, exits, deletion, status."""

    # Provided by HollowKubelets.
    client: KubeClient
    default_duration: float | None
    default_exit_code: int
    start_delay: float
    restart_backoff: tuple[float, float]
    _nodes: dict[str, _Node]
    _runs: dict[str, PodRun]
    _group_runs: dict[str, set[str]]
    _gang: GangTracker
    _ips: IpPool
    _pod_queue: WorkQueue[str]

    # -------------------------------------------------------------------------- pods

    def _pod_event(self, view: PodView) -> None:
        self._gang.set_pod(view.key, view.group if view.gang_present else None)
        run = self._runs.get(view.key)
        if run is not None and run.uid != view.uid:
            self._forget(run)  # replaced by a new pod of the same name
            run = None
        node = self._nodes.get(view.node)
        if node is None or node.gone:
            return  # bound elsewhere
        if run is None:
            if view.terminal and not view.deleting:
                return  # finished before this kubelet knew it: nothing left to run
            self._adopt(view, node)
            return
        if view.deleting and not run.deleting:
            run.deleting = True
            self._freeze(run)
            delay = termination_delay(view) if run.state == STARTED else 0.0
            if delay > 0:
                # SIGTERM sent: the pod runs on, holding its room, until its containers stop
                # (or are killed when the grace period ends), as a kubelet terminates a pod.
                run.stop_timer = asyncio.get_running_loop().call_later(
                    delay, self._containers_stopped, run
                )
            else:
                self._pod_queue.add(run.key)
        if view.terminal and run.state != TERMINATED:
            # Someone else ended the pod (the node lifecycle controller, for a lost node).
            self._freeze(run)
            run.state = TERMINATED
            run.phase = view.phase
            run.written = run.version

    def _pod_deleted(self, view: PodView) -> None:
        self._gang.set_pod(view.key, None)
        run = self._runs.get(view.key)
        if run is not None and run.uid == view.uid:
            self._forget(run)

    def _adopt(self, view: PodView, node: _Node) -> None:
        """Start tracking a pod bound to one of our nodes: a new one, or one an earlier hollow
        kubelet was running (a restarted sim carries on where the API says it was)."""
        now = time.time()
        run = PodRun(view, self.default_duration, self.default_exit_code, now)
        self._runs[run.key] = run
        node.runs.add(run.key)
        if run.group is not None:
            self._group_runs.setdefault(run.group, set()).add(run.key)
        if view.terminal:
            run.state = TERMINATED
            run.phase = view.phase
        elif view.phase == RUNNING:
            run.restart_count = view.restart_count
            run.start_time = epoch_seconds(view.start_time) or now
            run.container_id = view.container_id or ""
            if view.pod_ip and self._ips.claim(view.pod_ip):
                run.pod_ip = view.pod_ip
            started = epoch_seconds(view.running_since)
            if started is not None:
                run.state = STARTED
                run.started_at = started
                if run.duration is not None:
                    run.remaining = max(0.0, run.duration - (now - started))
            else:
                run.state = BACKOFF  # it was between restarts
                run.backoff = self.restart_backoff[0]
            if run.pod_ip is None:
                run.pod_ip = run.fixed_ip or self._ips.allocate()
                run.changed()
        log.debug("pod acknowledged", extra={"pod": run.key, "node": node.name})
        if not node.down:
            self._activate(run)

    def _activate(self, run: PodRun) -> None:
        """Set the run's timers going for its state (its node is up)."""
        if run.deleting:
            self._pod_queue.add(run.key)
            return
        if run.state == CREATING:
            if self.start_delay > 0:
                run.changed()  # report ContainerCreating meanwhile
                run.timer = asyncio.get_running_loop().call_later(
                    self.start_delay, self._start_containers, run
                )
            else:
                self._start_containers(run)
        elif run.state == STARTED:
            self._update_clock(run)
        elif run.state == BACKOFF:
            run.timer = asyncio.get_running_loop().call_later(
                run.backoff or 0.0, self._start_containers, run
            )
        if run.version != run.written:
            self._pod_queue.add(run.key)

    def _resume_pods(self, node: _Node, *, restored: bool) -> None:
        """The node came up: run its pods. After a failure, containers that were running died
        with the node: they exit as killed and restart or fail per restartPolicy."""
        for key in list(node.runs):
            run = self._runs[key]
            if restored and run.state == STARTED and not run.deleting:
                self._containers_exited(run, KILLED_EXIT_CODE)
            else:
                self._activate(run)

    def _start_containers(self, run: PodRun) -> None:
        run.timer = None
        if self._runs.get(run.key) is not run or run.deleting or self._nodes[run.node].down:
            return
        if run.state == BACKOFF:
            run.restart_count += 1
        run.state = STARTED
        run.started_at = time.time()
        run.container_id = CONTAINER_ID_SCHEME + secrets.token_hex(32)
        run.remaining = run.duration
        run.clock_since = None
        if run.pod_ip is None:
            run.pod_ip = run.fixed_ip or self._ips.allocate()
        run.changed()
        self._pod_queue.add(run.key)
        self._update_clock(run)

    def _update_clock(self, run: PodRun) -> None:
        """Start or pause the run-time clock: it ticks while the containers run, the node is
        up and the pod's gang (if any) is complete."""
        if run.remaining is None:
            return  # runs until deleted: nothing to time
        ticking = (
            run.state == STARTED
            and not run.deleting
            and not self._nodes[run.node].down
            and self._gang.satisfied(run.group)
        )
        loop = asyncio.get_running_loop()
        if ticking and run.clock_since is None:
            run.clock_since = loop.time()
            run.timer = loop.call_later(run.remaining, self._containers_exited, run)
        elif not ticking and run.clock_since is not None:
            run.remaining = max(0.0, run.remaining - (loop.time() - run.clock_since))
            run.clock_since = None
            run.cancel_timer()

    def _freeze(self, run: PodRun) -> None:
        """Stop every timer of the run, keeping the run time left."""
        if run.clock_since is not None and run.remaining is not None:
            elapsed = asyncio.get_running_loop().time() - run.clock_since
            run.remaining = max(0.0, run.remaining - elapsed)
        run.clock_since = None
        run.cancel_timer()

    def _gang_flipped(self, group: str) -> None:
        for key in self._group_runs.get(group, ()):
            run = self._runs.get(key)
            if run is not None:
                self._update_clock(run)

    def _containers_exited(self, run: PodRun, exit_code: int | None = None) -> None:
        """The containers exited: the pod ends, or restarts after a backoff, per its
        restartPolicy (Never: ends; OnFailure: restarts on non-zero; Always: restarts)."""
        run.cancel_timer()
        run.clock_since = None
        if run.remaining is not None:
            run.remaining = 0.0
        code = run.exit_code if exit_code is None else exit_code
        now = time.time()
        terminated = terminated_state(run, code, now)
        policy = run.restart_policy
        if policy == "Always" or (policy == "OnFailure" and code != 0):
            initial, maximum = self.restart_backoff
            ran = now - run.started_at
            # The kubelet's backoff doubles per crash and forgets a container that ran
            # for twice the maximum.
            if run.backoff is None or ran >= 2 * maximum:
                run.backoff = initial
            else:
                run.backoff = min(maximum, run.backoff * 2)
            run.last_terminated = terminated
            run.state = BACKOFF
            run.timer = asyncio.get_running_loop().call_later(
                run.backoff, self._start_containers, run
            )
            log.debug("containers exited; restarting", extra={"pod": run.key, "code": code})
        else:
            run.state = TERMINATED
            run.terminated = terminated
            run.phase = SUCCEEDED if code == 0 else FAILED
            log.debug("pod finished", extra={"pod": run.key, "phase": run.phase})
        run.changed()
        self._pod_queue.add(run.key)

    def _kill(self, run: PodRun) -> None:
        """A deleted pod's containers are killed and the pod ends Failed (a kubelet moves a
        deleted pod to a terminal phase before confirming the deletion)."""
        self._freeze(run)
        if run.state == STARTED:
            run.terminated = terminated_state(run, KILLED_EXIT_CODE, time.time())
        elif run.state == BACKOFF and run.last_terminated is not None:
            run.terminated = run.last_terminated
        else:
            run.terminated = never_started_state()
        run.state = TERMINATED
        run.phase = FAILED
        run.changed()

    def _containers_stopped(self, run: PodRun) -> None:
        run.stop_timer = None
        if self._runs.get(run.key) is run:
            self._pod_queue.add(run.key)

    def _forget(self, run: PodRun) -> None:
        self._freeze(run)
        if run.stop_timer is not None:
            run.stop_timer.cancel()
            run.stop_timer = None
        if self._runs.get(run.key) is run:
            del self._runs[run.key]
            node = self._nodes.get(run.node)
            if node is not None:
                node.runs.discard(run.key)
            if run.group is not None:
                members = self._group_runs.get(run.group)
                if members is not None:
                    members.discard(run.key)
                    if not members:
                        del self._group_runs[run.group]
        self._ips.release(run.pod_ip)
        run.pod_ip = None

    async def _sync_pod(self, key: str) -> None:
        run = self._runs.get(key)
        if run is None:
            return
        node = self._nodes[run.node]
        if node.down:
            return  # a down node's kubelet does nothing; coming back up re-queues its pods
        try:
            if run.deleting:
                if run.stop_timer is not None:
                    return  # still stopping: _containers_stopped queues it again
                if run.state != TERMINATED:
                    self._kill(run)
                if run.version != run.written:
                    await self._write_status(run, node)
                if self._runs.get(key) is run and not node.down:
                    await self.client.delete(
                        PODS, run.name, run.namespace, grace_period=0, uid=run.uid
                    )
                    log.debug("pod deletion confirmed", extra={"pod": key})
                return
            if run.version != run.written:
                await self._write_status(run, node)
        except ApiError as exc:
            if exc.not_found or exc.conflict:
                # Gone, or replaced by a new pod of the same name: nothing left to report.
                if self._runs.get(key) is run:
                    self._forget(run)
                return
            if exc.retryable:
                raise
            log.warning("pod status refused", extra={"pod": key, "error": str(exc)})
            run.written = run.version

    async def _write_status(self, run: PodRun, node: _Node) -> None:
        version = run.version
        body = {
            # The UID makes the patch fail (409) if the pod was replaced meanwhile.
            "metadata": {"uid": run.uid},
            "status": pod_status(run, node.ip, time.time()),
        }
        await self.client.patch(
            PODS,
            run.name,
            body,
            run.namespace,
            subresource="status",
            content_type=STRATEGIC_MERGE_PATCH,
        )
        run.written = max(run.written, version)
