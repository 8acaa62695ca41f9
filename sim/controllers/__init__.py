"""The workload controllers of kube-controller-manager that the embedded cluster runs, so that
Deployments, ReplicaSets, StatefulSets, DaemonSets and Jobs make pods as on a real cluster.

`WorkloadControllers` starts the ones named (`vulcan sim up --workload-controllers`); each
controller is one module over the small keyed-controller runtime of `sim.controllers.runtime`.
Adding one (a StatefulSet controller, say) is a module with a `KeyedController` subclass and a
line in `CONTROLLERS`. Like the rest of `sim/`, these import only `core/`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from core.kube.client import KubeClient
from sim.controllers.daemonset import DaemonSetController
from sim.controllers.deployment import DeploymentController
from sim.controllers.job import JobController
from sim.controllers.replicaset import ReplicaSetController
from sim.controllers.runtime import KeyedController
from sim.controllers.statefulset import StatefulSetController

# kube-controller-manager's names for them (its `--controllers` flag).
CONTROLLERS: dict[str, Callable[[KubeClient], KeyedController]] = {
    "deployment": DeploymentController,
    "replicaset": ReplicaSetController,
    "statefulset": StatefulSetController,
    "daemonset": DaemonSetController,
    "job": JobController,
}


def parse_controllers(text: str) -> list[str]:
    """`deployment,replicaset` (any order), `*` for all, `none` or an empty string for none."""
    text = text.strip()
    if text in ("", "none"):
        return []
    if text == "*":
        return list(CONTROLLERS)
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in CONTROLLERS]
    if unknown:
        known = ", ".join(CONTROLLERS)
        raise ValueError(f"unknown workload controller {unknown[0]!r} (known: {known})")
    return list(dict.fromkeys(names))


class WorkloadControllers:
    """The chosen controllers, started and stopped together."""

    def __init__(self, client: KubeClient, names: Sequence[str]) -> None:
        self.controllers = [CONTROLLERS[name](client) for name in names]

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.controllers]

    async def start(self) -> None:
        for controller in self.controllers:
            await controller.start()

    async def stop(self) -> None:
        for controller in reversed(self.controllers):
            await controller.stop()
