"""The queues' share model as JSON and back: what the extender's `/debug/queues` serves
(`queue_rows`) is what `vulcan explain` reads (`model_from_rows`), so explain's queue checks
give the extender's own answers and wording. One model, one format: a field added to the model
is added here, on both sides. Quantities are Kubernetes strings; `pods` is left out as the
queue plugins leave it out. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from core.records.common import resources
from core.resources import ResourceVector
from plugins.model.capacity_shares import CapacityShares
from plugins.model.proportion_shares import ProportionShares
from plugins.model.queue_inputs import QueuePass
from plugins.model.queue_share import QueueInput, QueueShare, strip_pods
from plugins.model.share_model import QueueShares

__all__ = ["model_from_rows", "quantities", "queue_rows"]

_ZERO = ResourceVector()


def quantities(vector: ResourceVector | None, *, zeros: bool = False) -> dict[str, str]:
    """A vector as a ResourceList without `pods` (and without zero amounts unless `zeros`: a
    capability of 0 GPUs is a limit, not an absence)."""
    if vector is None:
        return {}
    listed = strip_pods(vector).to_resource_list()
    return listed if zeros else {n: q for n, q in listed.items() if q != "0"}


def queue_rows(queues: QueuePass) -> list[dict[str, Any]]:
    """Every queue of the model, its inputs and what its plugin computed, by name."""
    model = queues.model
    rows = []
    for name in sorted(model.shares):
        share = model.shares[name]
        source = queues.inputs.get(name)
        rows.append(
            {
                "name": name,
                "state": source.state if source is not None else "Open",
                "open": source.open if source is not None else True,
                "weight": source.weight if source is not None else 1,
                "priority": source.priority if source is not None else 0,
                "reclaimable": source.reclaimable if source is not None else True,
                "parent": source.parent if source is not None else None,
                # An absent dimension of capability is unbounded.
                "capability": quantities(share.capability, zeros=True),
                "realCapability": quantities(share.real_capability),
                "guarantee": quantities(share.guarantee),
                "deserved": quantities(share.deserved),
                "allocated": quantities(share.allocated),
                "request": quantities(share.request),
                "inqueue": quantities(share.inqueue),
                "elastic": quantities(share.elastic),
                "share": round(share.share, 4),
                "bestEffort": share.best_effort,
                "overused": model.overused(name),
            }
        )
    return rows


def _vector(row: Mapping[str, Any], name: str) -> ResourceVector:
    return resources(row.get(name)) or _ZERO


def model_from_rows(
    data: Mapping[str, Any],
) -> tuple[QueueShares, dict[str, QueueInput], str]:
    """The share model as `queue_rows` wrote it (with the document's "plugin" and
    "hierarchical"), its inputs, and the plugin's name."""
    plugin = str(data.get("plugin") or "proportion")
    inputs: dict[str, QueueInput] = {}
    shares: dict[str, QueueShare] = {}
    for row in data.get("queues") or ():
        name = str(row["name"])
        capability = resources(row.get("capability"))
        inputs[name] = QueueInput(
            name=name,
            weight=int(row.get("weight") or 1),
            capability=capability,
            parent=row.get("parent") or None,
            priority=int(row.get("priority") or 0),
            reclaimable=bool(row.get("reclaimable", True)),
            open=bool(row.get("open", True)),
            allocated=_vector(row, "allocated"),
            request=_vector(row, "request"),
            inqueue=_vector(row, "inqueue"),
            elastic=_vector(row, "elastic"),
            state=str(row.get("state") or "Open"),
        )
        shares[name] = QueueShare(
            name=name,
            deserved=_vector(row, "deserved"),
            real_capability=_vector(row, "realCapability"),
            capability=capability or _ZERO,
            guarantee=_vector(row, "guarantee"),
            allocated=_vector(row, "allocated"),
            request=_vector(row, "request"),
            inqueue=_vector(row, "inqueue"),
            elastic=_vector(row, "elastic"),
            best_effort=bool(row.get("bestEffort")),
            checks_overuse=plugin != "capacity",
        )
    model: QueueShares
    if plugin == "capacity":
        parents = {n: q.parent for n, q in inputs.items() if q.parent and q.parent in inputs}
        if not data.get("hierarchical"):
            parents = {}
        children: dict[str, list[str]] = {}
        for child, parent in parents.items():
            children.setdefault(parent, []).append(child)
        model = CapacityShares(list(inputs.values()), shares, parents=parents, children=children)
    else:
        model = ProportionShares(list(inputs.values()), shares)
    return model, inputs, plugin
