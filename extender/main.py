"""Wiring of the extender process: client, cache, plugin framework, binder, HTTP server."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import logging
import signal
import sys
from dataclasses import dataclass

from core.cache import ClusterCache
from core.controller.manager import LeaseNamespaceWatch
from core.kube.client import KubeClient
from core.kube.flags import options_from_args
from core.kube.leader import LeaderElectionConfig, LeaderElector
from extender.binder import Binder
from extender.conf_reload import (
    BuiltConf,
    ConfMetrics,
    ConfReloader,
    build_conf,
    lease_recorder,
    read_conf,
)
from extender.debug_view import add_debug_routes
from extender.gang_hold import check_timeouts
from extender.gang_options import EventRate, GangOptions, PassPacing
from extender.gang_server import GangExtenderServer
from extender.gangs import GangScheduler
from extender.leader_label import LeaderLabel
from extender.ledger import GangLedger
from extender.metrics import ExtenderMetrics
from extender.queues import QueueCollector
from extender.server import ExtenderServer, serve
from extender.ungrouped import scheduler_names, served_pods
from extender.webhook_serving import WebhookServing
from plugins.builtin.overcommit import OvercommitPlugin
from plugins.framework.config import ConfigError
from plugins.framework.policy import Policy

log = logging.getLogger("vulcan.extender")

# Connections to the API server: a 1,000-member gang's Bindings then go out 250 at a time
# instead of 100 (its partial window in bench/gang_admission.py: 0.6-0.85 s -> 0.45-0.55 s).
API_SERVER_CONNECTIONS = 250


@dataclass(slots=True)
class Extender:
    client: KubeClient
    cache: ClusterCache
    server: ExtenderServer
    gangs: GangScheduler
    background: list[asyncio.Task[None]] = dataclasses.field(default_factory=list)

    @classmethod
    async def build(cls, args: argparse.Namespace) -> Extender:
        try:
            conf = build_conf(read_conf(args.config), lambda s: _apply_overcommit_flag(args, s))
        except ConfigError as exc:
            raise ConfigError(f"{args.config}: {exc}" if args.config else str(exc)) from None
        # Everything the conf decides is read before connecting: a bad argument fails first.
        policy, framework = conf.policy, conf.framework
        # A gang's commit sends all its Bindings at once: Go's clients multiplex them over
        # HTTP/2 (250 streams per connection by default), ours need a connection each.
        options = dataclasses.replace(
            options_from_args(args, "extender"), connections=API_SERVER_CONNECTIONS
        )
        client = await KubeClient.connect(options)
        cache = ClusterCache()
        metrics = ExtenderMetrics()
        binder = Binder(client)
        ledger = GangLedger(cache.bump_node)
        gangs = GangScheduler(
            cache,
            ledger,
            client,
            binder.bind,
            options=GangOptions(
                gang_timeout=args.gang_timeout,
                backoff=args.gang_backoff,
                member_reach_timeout=args.member_reach_timeout,
                stranded_gang_after=args.stranded_gang_after,
                pipelined_wait=args.pipelined_wait,
                events=EventRate(args.event_qps, args.event_burst),
                pacing=PassPacing(
                    min_pass_interval=args.min_pass_interval,
                    idle_ratio=args.pass_idle_ratio,
                    plain_pod_delay=args.plain_pod_pass_delay,
                ),
                bind_marker=args.bind_marker or None,
                served=served_pods(args),
                memo=args.scheduler_memo,
            ),
            policy=policy,
            placement=framework.gang_placement,
            metrics=metrics.gangs,
            observe_pass=metrics.schedule_pass_duration.observe,
        )
        gangs.runner.counter = metrics.memo_divergences
        gangs.runner.breach_counter = metrics.accounting_breaches
        metrics.registry.register(QueueCollector(lambda: gangs.queue_pass))
        warning = check_timeouts(args.gang_timeout, args.scheduler_bind_timeout)
        if warning:
            log.warning(warning)
        server = GangExtenderServer(
            cache,
            framework,
            binder,
            ledger=ledger,
            metrics=metrics,
            gangs=gangs,
            scheduler_names=scheduler_names(args.scheduler_name),
        )
        if args.enable_debug_endpoints:
            add_debug_routes(server.app, gangs)
        extender = cls(client, cache, server, gangs)
        conf_metrics = ConfMetrics(metrics.registry)
        if args.config and args.config_reload_period > 0:
            reloader = ConfReloader(
                args.config,
                conf,
                extender.use_conf,
                conf_metrics,
                adjust=lambda s: _apply_overcommit_flag(args, s),
                record=lease_recorder(args, gangs.recorder),
                period=args.config_reload_period,
            )
            extender.background.append(asyncio.create_task(reloader.run(), name="conf-reload"))
        else:
            conf_metrics.active(conf.hash)
        return extender

    def use_conf(self, conf: BuiltConf) -> None:
        """A reloaded conf: the gang passes' session, node order and queue policy, and the
        framework filter/prioritize score with (its remembered scores dropped)."""
        self.gangs.use_conf(conf.policy, conf.framework.gang_placement)
        self.server.framework = conf.framework
        self.server.memo.clear()


def _apply_overcommit_flag(args: argparse.Namespace, session: Policy) -> None:
    """The deprecated `--overcommit-factor` flag, when given, overrides the overcommit
    plugin's `overcommit-factor` argument; without the plugin in the conf there is no
    overcommit rule, and the flag says so instead of adding one."""
    if args.overcommit_factor is None:
        return
    log.warning(
        "--overcommit-factor is deprecated: set the overcommit plugin's overcommit-factor "
        "argument in --config instead"
    )
    plugin = session.plugins.get("overcommit")
    if not isinstance(plugin, OvercommitPlugin):
        log.warning("--overcommit-factor ignored: the scheduler conf has no overcommit plugin")
        return
    plugin.factor = float(args.overcommit_factor)


async def run(args: argparse.Namespace) -> int:
    webhooks = WebhookServing.from_args(args)  # bad webhook flags or certificate: fail first
    try:
        extender = await Extender.build(args)
    except ConfigError as exc:
        print(f"vulcan extender: --config {exc}", file=sys.stderr, flush=True)
        return 2
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    # All pods, finished ones too (as Volcano's cache): PodGroup status counts Succeeded and
    # Failed members; finished pods hold no node capacity (PodRecord.occupies_node).
    extender.server.metrics.gc_pauses.install()
    extender.cache.start(extender.client)
    election = LeaderElectionConfig.from_args(args)
    leading: asyncio.Task[None] | None = None
    elector: LeaderElector | None = None
    if election.leader_elect:
        # A standby keeps its cache warm; only the leader schedules (the gang ledger is this
        # process's memory) and only it is in the Services: by its pod's label (every synced
        # replica ready: extender/leader_label.py), else by being the only one ready.
        # Losing the Lease ends the process with status 1 ("leaderelection lost", as
        # kube-scheduler): a restart rebuilds everything from the API server.
        namespace = LeaseNamespaceWatch(extender.client, election.resource_namespace)
        if not await namespace.check():
            extender.background.append(asyncio.create_task(namespace.run()))

        label = (
            LeaderLabel(extender.client, args.pod_namespace, args.pod_name)
            if args.pod_name and args.pod_namespace
            else None
        )

        async def lead() -> None:
            extender.gangs.start()
            if label is not None:  # the Services reach it from here on
                await label.lead()
            await asyncio.Event().wait()

        elector = election.elector(
            extender.client, on_started_leading=lead, on_stopped_leading=stop.set
        )

        async def elect() -> None:
            if label is not None:  # a restarted leader's pod still says "true": not before
                await label.step_aside()
            await elector.run()

        if label is None:
            extender.server.is_leader = lambda: elector.is_leader
        else:
            extender.server.not_ready = lambda: label.problem
        leading = asyncio.create_task(elect(), name="leader-election")
    else:
        extender.gangs.start()
    runner, port = await serve(extender.server, args.bind_address, args.port)
    print(f"vulcan extender listening on http://{args.bind_address}:{port}/v1", flush=True)
    try:
        # Until a kept certificate is ready the webhooks wait (retrying); a stop meanwhile ends it.
        starting = asyncio.ensure_future(webhooks.start(extender.client, extender.cache))
        stopping = asyncio.ensure_future(stop.wait())
        await asyncio.wait((starting, stopping), return_when=asyncio.FIRST_COMPLETED)
        if not starting.done():
            starting.cancel()
        elif starting.exception() is not None:
            stopping.cancel()
            starting.result()  # a failure to serve ends the process, as before
        await stopping
    finally:
        for task in extender.background:
            task.cancel()
        if leading is not None:
            leading.cancel()  # steps down and releases the Lease
            with contextlib.suppress(asyncio.CancelledError):
                await leading
        # Drain in-flight requests (binds) before going away.
        await runner.cleanup()
        await webhooks.stop()
        await extender.gangs.stop()
        await extender.cache.stop()
        await extender.client.close()
        extender.server.metrics.gc_pauses.uninstall()
    if elector is not None and elector.lost:
        print("vulcan extender: leaderelection lost", file=sys.stderr, flush=True)
        return 1
    return 0
