"""What a hollow kubelet knows about pods: slim views decoded from the pod informer, the
simulated container runtime state of each pod it runs, and the small parsers and allocators
around them. No I/O here; `sim.kubelet.hollow` drives it."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from typing import Any

from core.durations import parse_duration
from core.records import pod_group_key
from sim.kubelet.keys import SIM_DURATION, SIM_EXIT_CODE, SIM_POD_IP, SIM_TERMINATION

log = logging.getLogger("vulcan.sim.kubelet")

RUNNING, SUCCEEDED, FAILED, PENDING = "Running", "Succeeded", "Failed", "Pending"
TERMINAL_PHASES = frozenset({SUCCEEDED, FAILED})
# Phases that count a pod as present in its gang: a member that finished successfully does
# not stall the others (otherwise members with different run times would deadlock as soon as
# the first completed), as Volcano's gang readiness counts Succeeded tasks too.
GANG_PRESENT_PHASES = frozenset({RUNNING, SUCCEEDED})

FOREVER_WORDS = frozenset({"inf", "infinity", "forever"})


class PodView:
    """The fields of a pod the hollow kubelets read, decoded once per watch event."""

    __slots__ = (
        "container_id",
        "containers",
        "deleting",
        "duration",
        "exit_code",
        "grace",
        "group",
        "init_containers",
        "key",
        "name",
        "namespace",
        "node",
        "phase",
        "pod_ip",
        "restart_count",
        "restart_policy",
        "running_since",
        "rv",
        "sim_pod_ip",
        "start_time",
        "termination",
        "uid",
    )

    def __init__(self, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        spec = obj.get("spec") or {}
        status = obj.get("status") or {}
        annotations = meta.get("annotations") or {}
        self.namespace: str = meta.get("namespace") or ""
        self.name: str = meta["name"]
        self.key = f"{self.namespace}/{self.name}"
        self.rv: str = meta.get("resourceVersion", "")
        self.uid: str = meta.get("uid", "")
        self.node: str = spec.get("nodeName") or ""
        self.phase: str = status.get("phase") or PENDING
        self.deleting = bool(meta.get("deletionTimestamp"))
        # The grace period the API server gave the deletion (the kubelet waits that long for
        # the containers to stop before it kills them).
        grace = meta.get("deletionGracePeriodSeconds")
        self.grace: float = float(grace) if isinstance(grace, int | float) else 0.0
        self.termination: str | None = annotations.get(SIM_TERMINATION)
        self.restart_policy: str = spec.get("restartPolicy") or "Always"
        self.containers: tuple[tuple[str, str], ...] = tuple(
            (c.get("name", ""), c.get("image", "")) for c in spec.get("containers") or ()
        )
        self.init_containers: tuple[tuple[str, str], ...] = tuple(
            (c.get("name", ""), c.get("image", "")) for c in spec.get("initContainers") or ()
        )
        self.duration: str | None = annotations.get(SIM_DURATION)
        self.exit_code: str | None = annotations.get(SIM_EXIT_CODE)
        self.sim_pod_ip: str | None = annotations.get(SIM_POD_IP) or None
        self.group = pod_group_key(self.namespace, meta, spec)
        # What an earlier hollow kubelet reported, so a restarted sim adopts running pods.
        self.pod_ip: str | None = status.get("podIP")
        self.start_time: str | None = status.get("startTime")
        first = (status.get("containerStatuses") or [{}])[0]
        running = (first.get("state") or {}).get("running") or {}
        self.running_since: str | None = running.get("startedAt")
        self.restart_count = int(first.get("restartCount") or 0)
        self.container_id: str | None = first.get("containerID")

    @property
    def terminal(self) -> bool:
        return self.phase in TERMINAL_PHASES

    @property
    def gang_present(self) -> bool:
        return self.phase in GANG_PRESENT_PHASES and not self.deleting


class PodGroupView:
    __slots__ = ("key", "min_member", "rv")

    def __init__(self, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        self.key = f"{meta.get('namespace') or ''}/{meta['name']}"
        self.rv: str = meta.get("resourceVersion", "")
        try:
            self.min_member = max(1, int((obj.get("spec") or {}).get("minMember") or 1))
        except (TypeError, ValueError):
            self.min_member = 1


# --------------------------------------------------------------------------- annotations


def parse_sim_duration(text: str | None, default: float | None) -> float | None:
    """Seconds a pod's containers run, from the `vulcan.sh/sim-duration` annotation (Go
    duration, or `inf`/`forever` = None: until deleted); `default` when absent or invalid."""
    if text is None:
        return default
    if text.strip().lower() in FOREVER_WORDS:
        return None
    try:
        seconds = parse_duration(text)
    except (ValueError, TypeError) as exc:  # argparse.ArgumentTypeError is a ValueError
        log.warning("ignoring invalid %s %r: %s", SIM_DURATION, text, exc)
        return default
    if not math.isfinite(seconds):
        return None if seconds > 0 else default
    return max(0.0, seconds)


def termination_delay(view: PodView) -> float:
    """Seconds a deleted pod's containers take to stop: its `vulcan.sh/sim-termination-duration`
    (SIGTERM handled that long; `forever`: ignored), at most its deletion grace period, after
    which the kubelet kills them. 0 without the annotation: a container that exits on SIGTERM."""
    seconds = parse_sim_duration(view.termination, 0.0)
    limit = max(0.0, view.grace)
    return limit if seconds is None else min(seconds, limit)


def parse_exit_code(text: str | None, default: int) -> int:
    if text is None:
        return default
    try:
        return int(text.strip())
    except ValueError:
        log.warning("ignoring invalid %s %r", SIM_EXIT_CODE, text)
        return default


# ------------------------------------------------------------------------------ runtime

# Container states of a pod the hollow kubelet runs.
CREATING = "creating"  # bound, containers being created (start_delay)
STARTED = "running"  # containers running; the run-time clock may be ticking
BACKOFF = "backoff"  # exited, waiting out the restart backoff (CrashLoopBackOff)
TERMINATED = "terminated"  # the pod reached a terminal phase


class PodRun:
    """The simulated container runtime's state for one pod (all its containers share one
    lifecycle). `version` counts changes the API has not necessarily seen yet; the status
    worker writes the status of the newest version and records it in `written`."""

    __slots__ = (
        "backoff",
        "clock_since",
        "container_id",
        "containers",
        "deleting",
        "duration",
        "exit_code",
        "fixed_ip",
        "group",
        "init_containers",
        "key",
        "last_terminated",
        "name",
        "namespace",
        "node",
        "phase",
        "pod_ip",
        "remaining",
        "restart_count",
        "restart_policy",
        "start_time",
        "started_at",
        "state",
        "stop_timer",
        "terminated",
        "timer",
        "transitions",
        "uid",
        "version",
        "written",
    )

    def __init__(
        self, view: PodView, default_duration: float | None, default_exit_code: int, now: float
    ) -> None:
        self.key = view.key
        self.uid = view.uid
        self.namespace = view.namespace
        self.name = view.name
        self.node = view.node
        self.restart_policy = view.restart_policy
        self.containers = view.containers
        self.init_containers = view.init_containers
        self.group = view.group
        self.duration = parse_sim_duration(view.duration, default_duration)
        self.exit_code = parse_exit_code(view.exit_code, default_exit_code)
        self.state = CREATING
        self.phase = PENDING
        self.deleting = view.deleting
        self.start_time = now  # when the kubelet first acknowledged the pod (status.startTime)
        self.started_at = now  # when the current containers started
        self.restart_count = 0
        self.container_id = ""
        self.pod_ip: str | None = None
        self.fixed_ip: str | None = view.sim_pod_ip
        # Seconds of run time left; None = runs until deleted. The clock ticks only while
        # `clock_since` (loop time) is set, so paused time (gang incomplete, node down) is free.
        self.remaining: float | None = self.duration
        self.clock_since: float | None = None
        self.timer: asyncio.TimerHandle | None = None
        # Set while a deleted pod's containers are stopping (SIGTERM sent, grace period running).
        self.stop_timer: asyncio.TimerHandle | None = None
        self.backoff: float | None = None
        self.last_terminated: dict[str, Any] | None = None
        self.terminated: dict[str, Any] | None = None
        self.transitions: dict[str, tuple[str, str]] = {}
        self.version = 0
        self.written = 0

    def cancel_timer(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def changed(self) -> None:
        self.version += 1


class IpPool:
    """Pod IPs from 10.244.0.0/16 (the usual cluster CIDR), unique among the pods one set of
    hollow kubelets runs; released when a pod is forgotten."""

    __slots__ = ("_next", "_used")

    SIZE = 1 << 16

    def __init__(self) -> None:
        self._next = 1
        self._used: set[int] = set()

    @staticmethod
    def _text(index: int) -> str:
        return f"10.244.{index >> 8}.{index & 255}"

    def allocate(self) -> str:
        for _ in range(self.SIZE):
            index = self._next
            self._next = self._next % (self.SIZE - 1) + 1
            # .0 and .255 of each /24 look like network/broadcast addresses; skip them.
            if (index & 255) in (0, 255) or index in self._used:
                continue
            self._used.add(index)
            return self._text(index)
        raise RuntimeError("pod IP pool 10.244.0.0/16 exhausted")

    def claim(self, ip: str) -> bool:
        """Mark an address an earlier run assigned as in use; False if it is not ours or taken."""
        parts = ip.split(".")
        if len(parts) != 4 or parts[:2] != ["10", "244"]:
            return False
        try:
            index = (int(parts[2]) << 8) | int(parts[3])
        except ValueError:
            return False
        if index in self._used:
            return False
        self._used.add(index)
        return True

    def release(self, ip: str | None) -> None:
        if not ip:
            return
        parts = ip.split(".")
        if len(parts) == 4 and parts[:2] == ["10", "244"]:
            with contextlib.suppress(ValueError):
                self._used.discard((int(parts[2]) << 8) | int(parts[3]))


def node_ip(index: int) -> str:
    """The InternalIP of the index-th hollow node: 10.0.x.y, stable across sim restarts."""
    return f"10.0.{(index // 250) & 255}.{index % 250 + 2}"
