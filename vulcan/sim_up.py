"""`vulcan sim up`: a whole cluster on one machine, no containers.

Processes, as in a real cluster, each talking to the API server over HTTP:
- `vulcan sim apiserver` (child process): the embedded API server;
- this process: the hollow kubelets (`sim.kubelet`), the node lifecycle controller
  (`sim.nodelifecycle`, the part of kube-controller-manager that taints NotReady nodes and
  evicts their pods) and kube-controller-manager's Deployment and ReplicaSet controllers
  (`sim.controllers`, `--workload-controllers`);
- `vulcan extender` (child, with `--with-extender`): vulcan's scheduler extender, which also
  serves vulcan's admission webhooks over HTTPS (a CA and certificate are made in the state
  directory, and the webhook configurations registered, as an installer does on a real cluster);
- `vulcan sim scheduler` (child): the kube-scheduler stand-in, configured by a real
  KubeSchedulerConfiguration (`--scheduler-config`, or one written here that points at the
  extender the way docs/architecture.md describes).
Children's logs go to files under the state directory. Ctrl-C (or SIGTERM) stops everything.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import importlib.util
import signal
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING

import aiohttp
import yaml

from core.api.keys import BINDING_MARKER, MARKERS, SCHEDULING_MARKER
from core.certs import ServingCerts, write_serving_certs
from core.kube.client import QUEUES, ApiError, KubeClient
from core.kube.flags import ClientOptions
from sim.scheduler.config import SIM_PROFILES
from vulcan.sim_rbac import install_rbac, write_tokens

if TYPE_CHECKING:  # imported for real in Cluster.start, where they are used
    from sim.controllers import WorkloadControllers
    from sim.kubelet import HollowKubelets
    from sim.nodelifecycle import NodeLifecycleController

READY_LINE = "cluster ready"
WEBHOOKS_LINE = "vulcan admission webhooks listening on"
# Volcano's built-in queues, as its scheduler creates them (Volcano's scheduler, at start).
BUILTIN_QUEUES = (
    ("root", {"weight": 1, "reclaimable": False}),
    ("default", {"weight": 1, "reclaimable": True}),
)
MAX_RESTARTS = 5  # per part; a part that crashes more often ends the cluster
RESTART_DELAY = 1.0  # seconds, as a kubelet's first crash-loop back-off is short


class StartError(RuntimeError):
    """A part of the cluster did not come up; the message says which and where its log is."""


@dataclass
class Child:
    name: str
    process: asyncio.subprocess.Process
    log_path: Path
    log_file: IO[bytes]
    args: list[str] = field(default_factory=list)
    prefix: str = ""
    restarts: int = 0
    announced: str = ""
    then: str = ""  # the prefix of a second announced line, if the component prints one
    announced_then: str = ""
    _drain: asyncio.Task[None] | None = field(default=None, repr=False)

    async def read_announcement(self, prefix: str, timeout: float, then: str = "") -> str:
        """The first stdout line (which the component prints once it serves), and the second
        when `then` is given (the extender announces its webhook port there)."""
        self.prefix, self.then = prefix, then
        self.announced = await self._read_line(prefix, timeout)
        if then:
            self.announced_then = await self._read_line(then, timeout)
        self._drain = asyncio.create_task(self._drain_stdout())
        return self.announced

    async def _read_line(self, prefix: str, timeout: float) -> str:
        assert self.process.stdout is not None
        try:
            line = await asyncio.wait_for(self.process.stdout.readline(), timeout)
        except TimeoutError as exc:
            raise StartError(
                f"{self.name} did not start within {timeout:.0f}s; see {self.log_path}"
            ) from exc
        text = line.decode().strip()
        if not text.startswith(prefix):
            raise StartError(
                f"{self.name} failed to start: {text or 'exited'}; see {self.log_path}"
            )
        return text

    async def _drain_stdout(self) -> None:
        assert self.process.stdout is not None
        while line := await self.process.stdout.readline():
            self.log_file.write(line)
            self.log_file.flush()

    async def stop(self, timeout: float = 10.0) -> None:
        if self.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.process.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(self.process.wait(), timeout)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    self.process.kill()
                await self.process.wait()
        if self._drain is not None:
            self._drain.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._drain
        self.log_file.close()


async def spawn(name: str, args: list[str], state_dir: Path, *, append: bool = False) -> Child:
    log_path = state_dir / "logs" / f"{name}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    log_file = log_path.open("ab" if append else "wb")
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "vulcan",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=log_file,
        stdin=asyncio.subprocess.DEVNULL,
        # Own process group: a terminal's Ctrl-C reaches only `sim up`, which stops the
        # children in order (scheduler before extender before API server).
        start_new_session=True,
    )
    return Child(name, process, log_path, log_file, args=list(args))


async def wait_ready(url: str, timeout: float) -> None:
    """Poll a /readyz until it answers 200."""
    deadline = asyncio.get_running_loop().time() + timeout
    async with aiohttp.ClientSession() as session:
        while True:
            with contextlib.suppress(aiohttp.ClientError):
                async with session.get(url) as response:
                    if response.status == 200:
                        return
            if asyncio.get_running_loop().time() > deadline:
                raise StartError(f"{url} not ready within {timeout:.0f}s")
            await asyncio.sleep(0.1)


class Cluster:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.state_dir = Path(args.state_dir or tempfile.mkdtemp(prefix="vulcan-sim-"))
        self.kubeconfig = Path(args.kubeconfig_out or self.state_dir / "kubeconfig")
        self.children: list[Child] = []
        self.client: KubeClient | None = None
        self.kubelets: HollowKubelets | None = None
        self.tokens: dict[str, str] = {}
        self.api_url = ""
        self.api_certs: ServingCerts | None = None
        self.lifecycle: NodeLifecycleController | None = None
        self.workloads: WorkloadControllers | None = None

    async def start(self) -> None:
        from sim.controllers import WorkloadControllers, parse_controllers
        from sim.kubelet import HollowKubelets
        from sim.kubelet.profiles import expand_profiles, parse_node_profile
        from sim.nodelifecycle import NodeLifecycleController

        args = self.args
        profiles = expand_profiles(
            [parse_node_profile(p) for p in args.node_profile or ()], args.nodes
        )
        workload_controllers = parse_controllers(args.workload_controllers)
        timeout = args.start_timeout
        auth: list[str] = []
        if args.rbac:
            self.state_dir.mkdir(parents=True, exist_ok=True)
            self.tokens = write_tokens(self.state_dir / "tokens.csv")
            # HTTPS: kubectl sends its token only over TLS.
            self.api_certs = write_serving_certs(self.state_dir / "apiserver-certs")
            auth = [
                "--token-auth-file",
                str(self.state_dir / "tokens.csv"),
                "--audit-log-path",
                str(self.state_dir / "audit.log"),
                "--tls-cert-file",
                str(self.api_certs.cert_file),
                "--tls-private-key-file",
                str(self.api_certs.key_file),
                "--tls-ca-file",
                str(self.state_dir / "apiserver-certs" / "ca.crt"),
            ]
        apiserver = await spawn(
            "apiserver",
            [
                "sim",
                "apiserver",
                *auth,
                "--port",
                str(args.port),
                "--kubeconfig-out",
                str(self.kubeconfig),
                "--default-not-ready-toleration-seconds",
                str(args.pod_eviction_timeout),
                "--default-unreachable-toleration-seconds",
                str(args.pod_eviction_timeout),
            ],
            self.state_dir,
        )
        self.children.append(apiserver)
        line = await apiserver.read_announcement("embedded API server listening on", timeout)
        self.api_url = line.split()[-1]
        print(f"embedded API server: {self.api_url}", flush=True)

        self.client = await KubeClient.connect(
            ClientOptions(kubeconfig=str(self.kubeconfig), qps=0, burst=0)
        )
        if args.rbac:
            await install_rbac(self.client)
        self.lifecycle = NodeLifecycleController(
            self.client, node_monitor_grace_period=args.node_monitor_grace_period
        )
        await self.lifecycle.start()
        self.kubelets = HollowKubelets(
            self.client,
            profiles,
            default_duration=args.pod_duration,
            default_exit_code=0,
        )
        await asyncio.wait_for(self.kubelets.start(), timeout)
        names = self.kubelets.node_names
        print(f"hollow nodes: {len(names)} ({names[0]} .. {names[-1]})", flush=True)
        if workload_controllers:
            self.workloads = WorkloadControllers(self.client, workload_controllers)
            await asyncio.wait_for(self.workloads.start(), timeout)
            print(f"workload controllers: {', '.join(workload_controllers)}", flush=True)

        extender_url = None
        if args.with_extender:
            certs = write_serving_certs(self.state_dir / "webhook-certs")
            extender = await spawn(
                "extender",
                [
                    "extender",
                    "--log-format",
                    args.log_format,
                    "--kubeconfig",
                    str(self._component_kubeconfig("extender")),
                    "--bind-address",
                    "127.0.0.1",
                    "--port",
                    str(args.extender_port),
                    *(["--config", args.extender_config] if args.extender_config else []),
                    "--gang-backoff",
                    str(args.gang_backoff),
                    "--member-reach-timeout",
                    str(args.member_reach_timeout),
                    "--scheduler-memo",
                    args.scheduler_memo,
                    # The bind entry of the configuration written below (sim_config) waits this
                    # long; the extender checks its gang timeout against it.
                    *(["--scheduler-bind-timeout", "90s"] if not args.scheduler_config else []),
                    "--webhook-port",
                    str(args.webhook_port),
                    "--tls-cert-file",
                    str(certs.cert_file),
                    "--tls-private-key-file",
                    str(certs.key_file),
                    # With --rbac the extender runs as the install runs it: electing a leader
                    # in vulcan-system (its Lease Role is part of what --rbac proves).
                    *(["--leader-elect"] if args.rbac else []),
                    # As the cluster-scheduler overlay: a gang member with the scheduling
                    # marker but not the bind entry's would be bound past the barrier.
                    *(
                        ["--bind-marker", BINDING_MARKER, "--filter-marker", SCHEDULING_MARKER]
                        if args.install_mode == "cluster-scheduler"
                        # The stand-in's profiles (sim_config): both call the extender.
                        else ["--served-scheduler-name", ",".join(SIM_PROFILES)]
                    ),
                ],
                self.state_dir,
            )
            self.children.append(extender)
            line = await extender.read_announcement(
                "vulcan extender listening on", timeout, then=WEBHOOKS_LINE
            )
            extender_url = line.split()[-1].removesuffix("/v1")
            webhook_url = extender.announced_then.split()[-1]
            # A restarted extender must come back where kube-scheduler's configuration and the
            # webhook configurations point.
            extender.args[extender.args.index("--port") + 1] = extender_url.rsplit(":", 1)[1]
            extender.args[extender.args.index("--webhook-port") + 1] = webhook_url.rsplit(":", 1)[1]
            await wait_ready(f"{extender_url}/readyz", timeout)
            print(
                f"vulcan extender: {extender_url}/v1 (metrics: {extender_url}/metrics)",
                flush=True,
            )
            await self._register_webhooks(webhook_url, certs.ca_pem)
            print(
                f"vulcan admission webhooks: {webhook_url} "
                "(queues, podgroups, jobs, jobflows, cronjobs, hypernodes; "
                f"configurations in {self.state_dir / 'webhooks.yaml'})",
                flush=True,
            )
        if args.with_controllers:
            controllers = await spawn(
                "controllers",
                [
                    "controllers",
                    "--log-format",
                    args.log_format,
                    "--kubeconfig",
                    str(self._component_kubeconfig("controllers")),
                    "--bind-address",
                    "127.0.0.1",
                    "--port",
                    "0",
                    # Without --rbac the embedded cluster has no vulcan-system namespace to hold
                    # the Lease; with it, the install's namespace and Role are there.
                    "--leader-elect-resource-namespace",
                    "vulcan-system" if args.rbac else "kube-system",
                    *(
                        ["--pod-resource-markers", ",".join(MARKERS)]
                        if args.install_mode == "cluster-scheduler"
                        else []
                    ),
                    *(
                        [
                            "--hypernode-discovery-config",
                            str(Path(args.hypernode_discovery_config).resolve()),
                        ]
                        if args.hypernode_discovery_config
                        else []
                    ),
                ],
                self.state_dir,
            )
            self.children.append(controllers)
            line = await controllers.read_announcement("vulcan controllers", timeout)
            controllers_url = line.split()[-1]
            await wait_ready(f"{controllers_url}/readyz", timeout)
            print(
                f"vulcan controllers: {controllers_url} (metrics: {controllers_url}/metrics)",
                flush=True,
            )

        config_path = args.scheduler_config
        if config_path is None:
            from sim.scheduler.config import sim_config

            config_path = str(self.state_dir / "scheduler-config.yaml")
            markers = MARKERS if args.install_mode == "cluster-scheduler" else None
            config = sim_config(extender_url, markers=markers)
            Path(config_path).write_text(yaml.safe_dump(config, sort_keys=False))
        scheduler = await spawn(
            "scheduler",
            [
                "sim",
                "scheduler",
                "--kubeconfig",
                str(self.kubeconfig),
                "--config",
                config_path,
                # Each extender verb's latency as the stand-in saw it, written when it stops.
                "--extender-stats-out",
                str(self.state_dir / "extender-latency.json"),
            ],
            self.state_dir,
        )
        self.children.append(scheduler)
        line = await scheduler.read_announcement("scheduler stand-in running", timeout)
        print(f"kube-scheduler stand-in: {line.split('running ', 1)[-1]}", flush=True)
        print(f"  configuration: {config_path}", flush=True)
        print(f"  logs: {self.state_dir / 'logs'}", flush=True)
        print(f"kubeconfig: {self.kubeconfig}", flush=True)
        print(f"  export KUBECONFIG={self.kubeconfig}", flush=True)
        print("  kubectl get nodes", flush=True)
        print(f"{READY_LINE} (Ctrl-C to stop)", flush=True)

    def _component_kubeconfig(self, component: str) -> Path:
        """The admin kubeconfig, or with --rbac one with the component's ServiceAccount token."""
        if not self.args.rbac:
            return self.kubeconfig
        from sim.apiserver.server import write_kubeconfig

        path = self.state_dir / f"{component}.kubeconfig"
        assert self.api_certs is not None
        write_kubeconfig(path, self.api_url, self.tokens[component], self.api_certs.ca_pem)
        return path

    async def _register_webhooks(self, url: str, ca_pem: bytes) -> None:
        """The built-in queues, then vulcan's webhook configurations (pointing at `url`,
        trusting the CA that signed the extender's certificate)."""
        from extender.webhook_configs import webhook_configurations

        assert self.client is not None
        # Volcano's scheduler creates `root` and `default` at start; so does `vulcan
        # controllers`. The extender alone does not, and without `default` the PodGroup webhook
        # would refuse every PodGroup that names no queue.
        for name, spec in BUILTIN_QUEUES:
            await self._create(QUEUES.path(), {"metadata": {"name": name}, "spec": spec})
        configs = webhook_configurations(url=url, ca_bundle=base64.b64encode(ca_pem).decode())
        (self.state_dir / "webhooks.yaml").write_text(yaml.safe_dump_all(configs, sort_keys=False))
        for config in configs:
            plural = config["kind"].lower() + "s"
            await self._create(f"/apis/admissionregistration.k8s.io/v1/{plural}", config)

    async def _create(self, path: str, body: dict[str, object]) -> None:
        assert self.client is not None
        try:
            await self.client.request("POST", path, body=body)
        except ApiError as exc:
            if not exc.conflict:  # already there: a restarted part got here first
                raise

    async def wait(self, stop: asyncio.Event) -> int:
        """Until Ctrl-C/SIGTERM (0) or until the API server dies or a part keeps crashing (1).
        A crashed extender, scheduler or controller manager is started again, as its
        Deployment would restart it on a real cluster (up to `MAX_RESTARTS` times each)."""
        stopper = asyncio.create_task(stop.wait())
        waits = {asyncio.create_task(c.process.wait()): c for c in self.children}
        try:
            while True:
                done, _ = await asyncio.wait([stopper, *waits], return_when=asyncio.FIRST_COMPLETED)
                if stopper in done:
                    return 0
                for task in done:
                    child = waits.pop(task)
                    code = child.process.returncode
                    if child.name == "apiserver" or child.restarts >= MAX_RESTARTS:
                        print(
                            f"{child.name} exited with code {code}; see {child.log_path}",
                            file=sys.stderr,
                            flush=True,
                        )
                        return 1
                    print(f"{child.name} exited with code {code}; restarting it", flush=True)
                    replacement = await self._restart(child)
                    waits[asyncio.create_task(replacement.process.wait())] = replacement
        finally:
            for task in [stopper, *waits]:
                task.cancel()

    async def _restart(self, child: Child) -> Child:
        await child.stop()
        await asyncio.sleep(RESTART_DELAY)
        replacement = await spawn(child.name, child.args, self.state_dir, append=True)
        replacement.restarts = child.restarts + 1
        self.children[self.children.index(child)] = replacement
        await replacement.read_announcement(child.prefix, self.args.start_timeout, child.then)
        return replacement

    async def stop(self) -> None:
        # The scheduler first (no new binds), the API server last.
        for child in reversed(self.children):
            if child.name != "apiserver":
                await child.stop()
        if self.workloads is not None:
            await self.workloads.stop()
        if self.kubelets is not None:
            await self.kubelets.stop()
        if self.lifecycle is not None:
            await self.lifecycle.stop()
        if self.client is not None:
            await self.client.close()
        for child in self.children:
            if child.name == "apiserver":
                await child.stop()


async def _up(args: argparse.Namespace) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    cluster = Cluster(args)
    try:
        starting = asyncio.create_task(cluster.start())
        stopper = asyncio.create_task(stop.wait())
        await asyncio.wait([starting, stopper], return_when=asyncio.FIRST_COMPLETED)
        if not starting.done():
            starting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await starting
            return 0
        stopper.cancel()
        starting.result()
        return await cluster.wait(stop)
    except (StartError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        return 1
    finally:
        await cluster.stop()
        print("stopped", flush=True)


def run_up(args: argparse.Namespace) -> int:
    from vulcan.logs import setup_logging
    from vulcan.sim_commands import run_async
    from vulcan.sim_flags import real_flag_problem

    problem = real_flag_problem(args)
    if problem is not None:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    setup_logging(args.log_format)
    if args.control_plane == "real":
        from vulcan.real_cluster.up import run_real

        return run_real(args)
    if args.with_controllers and not _has_controllers():
        print(
            "error: --with-controllers: this build has no `vulcan controllers` command yet",
            file=sys.stderr,
        )
        return 2
    return int(run_async(_up(args)))


def _has_controllers() -> bool:
    return importlib.util.find_spec("podgroup_controller") is not None
