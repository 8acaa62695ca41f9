"""Wiring of `vulcan controllers`: client, leader election, the selected controllers, and the
/healthz, /readyz and /metrics server.

Controllers run only while this instance leads (Lease `vulcan-controllers`). Each leadership
term builds everything afresh from the API server — informers, work queues, event recorder — and
tears it down when the term ends, so a new leader (or a restarted process) starts from what is
stored, never from memory. /readyz: a leader is ready once its informers have synced, a standby
once it has seen who leads.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
from collections.abc import Sequence
from typing import Any

from core.kube.client import NAMESPACES, ApiError, KubeClient
from core.kube.events import EventRecorder
from core.kube.flags import options_from_args
from core.kube.leader import LeaderElectionConfig, LeaderElector, default_identity
from core.serving import start_app
from podgroup_controller.flags import scheduler_names
from podgroup_controller.health import build_app
from podgroup_controller.informers import SharedInformers
from podgroup_controller.metrics import ControllerMetrics
from podgroup_controller.podgroups import PodGroupController
from podgroup_controller.queues import QueueController
from podgroup_controller.reconcile import ControllerOptions
from podgroup_controller.selection import PODGROUP, QUEUE, select_controllers

log = logging.getLogger("vulcan.controllers")

COMPONENT = "vulcan-controllers"  # reportingController of our Events
CONTROLLERS = {PODGROUP: PodGroupController, QUEUE: QueueController}
AVAILABLE = tuple(CONTROLLERS)


class ControllerManager:
    """The selected controllers, run one leadership term at a time (`run`)."""

    def __init__(
        self,
        client: KubeClient,
        enabled: Sequence[str],
        options: ControllerOptions,
        metrics: ControllerMetrics | None = None,
        identity: str | None = None,
    ) -> None:
        self.client = client
        self.enabled = tuple(enabled)
        self.options = options
        self.metrics = metrics or ControllerMetrics()
        self.identity = identity or default_identity()
        self.leading = False
        self.informers: SharedInformers | None = None
        self.controllers: dict[str, Any] = {}

    def ready(self) -> tuple[bool, str]:
        """Ready while leading once the informers have synced."""
        if not self.leading or self.informers is None or not self.informers.synced:
            return False, "informers not synced"
        return True, "ok"

    async def run(self) -> None:
        """One term: informers, recorder and controllers from scratch, until cancelled."""
        informers = SharedInformers(self.client)
        recorder = EventRecorder(self.client, COMPONENT, self.identity)
        controllers = {
            name: CONTROLLERS[name](self.client, informers, recorder, self.metrics, self.options)
            for name in self.enabled
        }
        self.informers, self.controllers, self.leading = informers, controllers, True
        self.metrics.leader.set(1)
        informers.start()
        events = asyncio.create_task(recorder.run(), name="events")
        try:
            async with asyncio.TaskGroup() as group:
                await informers.wait_synced()
                log.info("informers synced", extra={"controllers": list(controllers)})
                for name, controller in controllers.items():
                    group.create_task(controller.run(), name=name)
        finally:
            self.leading = False
            self.metrics.leader.set(0)
            await informers.stop()
            # The events of the last reconciles still go out (briefly: we may be shutting down).
            with contextlib.suppress(Exception):
                await asyncio.wait_for(recorder.flush(), 2.0)
            events.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await events


async def _check_lease_namespace(client: KubeClient, namespace: str) -> None:
    """A Lease cannot be created in a namespace that does not exist: say so, or this instance
    would wait forever without a word (the elector only logs at debug level)."""
    try:
        await client.get(NAMESPACES, namespace)
    except ApiError as exc:
        if exc.not_found:
            log.warning(
                "the leader-election namespace does not exist: this instance cannot lead "
                "until it does (--leader-elect-resource-namespace)",
                extra={"namespace": namespace},
            )
        else:
            log.warning("could not read the leader-election namespace", extra={"error": str(exc)})


def options_of(args: argparse.Namespace) -> ControllerOptions:
    return ControllerOptions(
        scheduler_names=scheduler_names(args),
        inherit_owner_annotations=args.inherit_owner_annotations,
        podgroup_workers=args.worker_threads_for_podgroup,
        queue_workers=args.worker_threads_for_queue,
        max_retries=args.max_requeue_num,
    )


async def run(args: argparse.Namespace) -> int:
    enabled = select_controllers(args.controllers, AVAILABLE)
    client = await KubeClient.connect(options_from_args(args))
    manager = ControllerManager(client, enabled, options_of(args))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    failed: list[BaseException] = []

    async def term() -> None:
        # A controller that crashes must not leave this instance holding the Lease idle:
        # exit, and let the Deployment (or `vulcan sim up`) restart us.
        try:
            await manager.run()
        except asyncio.CancelledError:
            raise
        except BaseException as exc:
            log.exception("controllers failed")
            failed.append(exc)
            stop.set()

    election = LeaderElectionConfig.from_args(args)
    elector: LeaderElector | None = None
    if election.leader_elect:
        await _check_lease_namespace(client, election.resource_namespace)
        elector = election.elector(client, manager.identity, on_started_leading=term)
        main = asyncio.create_task(elector.run(), name="leader-election")
    else:
        main = asyncio.create_task(term(), name="controllers")

    def ready() -> tuple[bool, str]:
        if manager.leading or elector is None:
            return manager.ready()
        holder = elector.leader
        if holder and holder != manager.identity:
            return True, f"standby (leader: {holder})"
        return False, "not leading yet"

    runner, port = await start_app(
        build_app(ready, manager.metrics.registry),
        args.bind_address,
        args.port,
        shutdown_timeout=2.0,
    )
    print(f"vulcan controllers listening on http://{args.bind_address}:{port}", flush=True)
    log.info(
        "controllers starting",
        extra={"controllers": list(enabled), "schedulers": list(manager.options.scheduler_names)},
    )
    try:
        await stop.wait()
    finally:
        main.cancel()  # steps down and releases the Lease, so a standby takes over at once
        with contextlib.suppress(asyncio.CancelledError):
            await main
        await runner.cleanup()
        await client.close()
    return 1 if failed else 0
