"""The controller manager: client, leader election, the selected controllers, and the /healthz,
/readyz and /metrics server.

Controllers run only while this instance leads (one Lease for all of them). Each leadership
term builds everything afresh from the API server — informers, work queues, event recorder —
and tears it down when the term ends, so a new leader (or a restarted process) starts from what
is stored, never from memory. /readyz: a leader is ready once its informers have synced and its
controllers have started (a reconciler's `start` returned: the built-in queues exist), a
standby once it has seen who leads.

A controller is anything with `name` and `async run()`, built for each term by its factory from
the term's client, shared informers, event recorder and metrics.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import sys
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from core.controller.health import build_app
from core.controller.informers import SharedInformers
from core.controller.metrics import ControllerMetrics
from core.controller.selection import select_controllers
from core.kube.client import NAMESPACES, ApiError, KubeClient
from core.kube.events import CORE_API, EventRecorder
from core.kube.flags import options_from_args
from core.kube.leader import LeaderElectionConfig, LeaderElector, default_identity
from core.serving import start_app

log = logging.getLogger("vulcan.controllers")

COMPONENT = "vulcan-controllers"  # reportingController of our Events


class Controller(Protocol):
    async def run(self) -> None: ...


ControllerFactory = Callable[
    [KubeClient, SharedInformers, EventRecorder, ControllerMetrics], Controller
]


class ControllerManager:
    """The given controllers (name -> factory), run one leadership term at a time (`run`)."""

    def __init__(
        self,
        client: KubeClient,
        factories: Mapping[str, ControllerFactory],
        metrics: ControllerMetrics | None = None,
        identity: str | None = None,
    ) -> None:
        self.client = client
        self.factories = dict(factories)
        self.enabled = tuple(self.factories)
        self.metrics = metrics or ControllerMetrics()
        self.identity = identity or default_identity()
        self.leading = False
        self.informers: SharedInformers | None = None
        self.controllers: dict[str, Any] = {}

    def ready(self) -> tuple[bool, str]:
        """Ready while leading once the informers have synced and every controller has started
        (what its start does is done: the built-in queues exist, so a user's first PodGroup
        in queue `default` is not refused by the admission webhook for a missing queue)."""
        if not self.leading or self.informers is None or not self.informers.synced:
            return False, "informers not synced"
        starting = sorted(n for n, c in self.controllers.items() if not getattr(c, "started", True))
        if starting:
            return False, f"controllers starting: {', '.join(starting)}"
        return True, "ok"

    async def run(self) -> None:
        """One term: informers, recorder and controllers from scratch, until cancelled."""
        informers = SharedInformers(self.client)
        # Volcano's controllers record core/v1 Events (client-go's tools/record).
        recorder = EventRecorder(self.client, COMPONENT, self.identity, api=CORE_API)
        controllers = {
            name: factory(self.client, informers, recorder, self.metrics)
            for name, factory in self.factories.items()
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


class LeaseNamespaceWatch:
    """Whether the leader-election namespace exists. A Lease cannot be created in a namespace
    that does not exist, and the elector only logs that at debug level: while it is missing
    this instance says so in /readyz and, every `interval`, in the log, until it appears."""

    def __init__(self, client: KubeClient, namespace: str, interval: float = 30.0) -> None:
        self.client = client
        self.namespace = namespace
        self.interval = interval
        self.missing = False

    async def check(self) -> bool:
        """True when the namespace exists (or cannot be read: then the elector will say why)."""
        try:
            await self.client.get(NAMESPACES, self.namespace)
        except ApiError as exc:
            if exc.not_found:
                log.warning(
                    "the leader-election namespace does not exist: this instance cannot lead "
                    "until it does (--leader-elect-resource-namespace)",
                    extra={"namespace": self.namespace},
                )
                self.missing = True
                return False
            log.warning("could not read the leader-election namespace", extra={"error": str(exc)})
        if self.missing:
            log.info(
                "the leader-election namespace exists now", extra={"namespace": self.namespace}
            )
        self.missing = False
        return True

    async def run(self) -> None:
        while not await self.check():
            await asyncio.sleep(self.interval)

    def reason(self) -> str:
        return f"cannot lead: the leader-election namespace {self.namespace} does not exist"


async def run(
    args: argparse.Namespace,
    available: Mapping[str, ControllerFactory],
    *,
    describe: Mapping[str, Any] | None = None,
) -> int:
    """`vulcan controllers`: the controllers of `available` that `--controllers` selects, under
    leader election, until SIGINT/SIGTERM. `describe`: extra fields for the start-up log."""
    enabled = select_controllers(args.controllers, tuple(available))
    client = await KubeClient.connect(options_from_args(args, "controllers"))
    manager = ControllerManager(client, {name: available[name] for name in enabled})
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
    lease_namespace: LeaseNamespaceWatch | None = None
    namespace_watch: asyncio.Task[None] | None = None
    if election.leader_elect:
        lease_namespace = LeaseNamespaceWatch(client, election.resource_namespace)
        if not await lease_namespace.check():
            namespace_watch = asyncio.create_task(lease_namespace.run(), name="lease-namespace")
        # Losing the Lease ends the process with status 1 ("leaderelection lost"), as
        # kube-controller-manager does: the next term starts from what is stored anyway, and a
        # process that lost contact with the API server is restarted rather than left standing.
        elector = election.elector(
            client, manager.identity, on_started_leading=term, on_stopped_leading=stop.set
        )
        main = asyncio.create_task(elector.run(), name="leader-election")
    else:
        main = asyncio.create_task(term(), name="controllers")

    def ready() -> tuple[bool, str]:
        if manager.leading or elector is None:
            return manager.ready()
        if lease_namespace is not None and lease_namespace.missing:
            return False, lease_namespace.reason()
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
    log.info("controllers starting", extra={"controllers": list(enabled), **(describe or {})})
    try:
        await stop.wait()
    finally:
        if namespace_watch is not None:
            namespace_watch.cancel()
        main.cancel()  # steps down and releases the Lease, so a standby takes over at once
        with contextlib.suppress(asyncio.CancelledError):
            await main
        await runner.cleanup()
        await client.close()
    if elector is not None and elector.lost:
        print("vulcan controllers: leaderelection lost", file=sys.stderr, flush=True)
        return 1
    return 1 if failed else 0
