"""The job plugins by name (Volcano's plugin factory) and what a job's `spec.plugins` builds."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from flow_controller.job.plugin_frameworks import HcclRank, Ray
from flow_controller.job.plugins import (
    Env,
    Mpi,
    Plugin,
    Pytorch,
    Ssh,
    Svc,
    Tensorflow,
    parse_flags,
)

REGISTRY: dict[str, Callable[[str, dict[str, str]], Plugin]] = {
    "env": Env,
    "svc": Svc,
    "ssh": Ssh,
    "mpi": Mpi,
    "pytorch": Pytorch,
    "tensorflow": Tensorflow,
    "ray": Ray,
    "hcclrank": HcclRank,
}
# Run after the others: a RANK the framework plugin set (pytorch) is the rank hcclrank
# annotates. Volcano runs a job's plugins in Go's random map order, so either may come first
# there; with one master both give the same ranks.
_LAST = ("hcclrank",)


def build_plugins(configured: Mapping[str, Sequence[str]] | None) -> tuple[list[Plugin], list[str]]:
    """(plugins, names not implemented) for a job's `spec.plugins`, in name order."""
    plugins, missing = [], []
    for name, args in sorted((configured or {}).items(), key=lambda i: (i[0] in _LAST, i[0])):
        factory = REGISTRY.get(name)
        if factory is None:
            missing.append(name)
        else:
            plugins.append(factory(name, parse_flags(args or ())))
    return plugins, missing
