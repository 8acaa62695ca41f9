"""Which kinds vulcan knows, and how Volcano's CRDs present them."""

from __future__ import annotations

from dataclasses import dataclass

from core.api.base import KubeObject
from core.api.batch import BATCH_GROUP, BATCH_VERSION, BUS_GROUP, BUS_VERSION, Command, Job
from core.api.cronjob import CronJob
from core.api.flow import FLOW_GROUP, FLOW_VERSION, JobFlow, JobTemplate
from core.api.nodeinfo import NODEINFO_GROUP, NODEINFO_VERSION, Numatopology
from core.api.scheduling import SCHEDULING_GROUP, SCHEDULING_VERSION, PodGroup, Queue
from core.api.topology import TOPOLOGY_GROUP, TOPOLOGY_VERSION, HyperNode


@dataclass(frozen=True, slots=True)
class PrinterColumn:
    name: str
    json_path: str
    type: str = "string"
    priority: int = 0
    description: str = ""


@dataclass(frozen=True, slots=True)
class KindInfo:
    group: str
    version: str
    kind: str
    plural: str
    singular: str
    short_names: tuple[str, ...]
    namespaced: bool
    status_subresource: bool
    model: type[KubeObject]
    printer_columns: tuple[PrinterColumn, ...] = ()

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    @property
    def crd_name(self) -> str:
        return f"{self.plural}.{self.group}"


_AGE = PrinterColumn("AGE", ".metadata.creationTimestamp", type="date")

KINDS: tuple[KindInfo, ...] = (
    KindInfo(
        SCHEDULING_GROUP,
        SCHEDULING_VERSION,
        "PodGroup",
        "podgroups",
        "podgroup",
        ("pg", "podgroup-v1beta1"),
        namespaced=True,
        # Volcano's PodGroup has no status subresource: status is written with a plain update.
        status_subresource=False,
        model=PodGroup,
        printer_columns=(
            PrinterColumn("STATUS", ".status.phase"),
            PrinterColumn("minMember", ".spec.minMember", type="integer"),
            PrinterColumn("RUNNINGS", ".status.running", type="integer"),
            _AGE,
            PrinterColumn("QUEUE", ".spec.queue", priority=1),
        ),
    ),
    KindInfo(
        SCHEDULING_GROUP,
        SCHEDULING_VERSION,
        "Queue",
        "queues",
        "queue",
        ("q", "queue-v1beta1"),
        namespaced=False,
        status_subresource=True,
        model=Queue,
        # Volcano's CRD shows PARENT alone; what a user looks for first is beside it.
        printer_columns=(
            PrinterColumn("STATE", ".status.state"),
            PrinterColumn("WEIGHT", ".spec.weight", type="integer"),
            PrinterColumn("PARENT", ".spec.parent"),
        ),
    ),
    KindInfo(
        BATCH_GROUP,
        BATCH_VERSION,
        "Job",
        "jobs",
        "job",
        ("vcjob", "vj"),
        namespaced=True,
        status_subresource=True,
        model=Job,
        printer_columns=(
            PrinterColumn("STATUS", ".status.state.phase"),
            PrinterColumn("minAvailable", ".status.minAvailable", type="integer"),
            PrinterColumn("RUNNINGS", ".status.running", type="integer"),
            _AGE,
            PrinterColumn("QUEUE", ".spec.queue", priority=1),
        ),
    ),
    KindInfo(
        BATCH_GROUP,
        BATCH_VERSION,
        "CronJob",
        "cronjobs",
        "cronjob",
        ("cronvcjob", "cronvj"),  # Volcano's short names
        namespaced=True,
        status_subresource=True,
        model=CronJob,
        printer_columns=(  # kubectl's columns for a Kubernetes CronJob
            PrinterColumn("SCHEDULE", ".spec.schedule"),
            PrinterColumn("TIMEZONE", ".spec.timeZone"),
            PrinterColumn("SUSPEND", ".spec.suspend", type="boolean"),
            PrinterColumn("LAST SCHEDULE", ".status.lastScheduleTime", type="date"),
            _AGE,
        ),
    ),
    KindInfo(
        BUS_GROUP,
        BUS_VERSION,
        "Command",
        "commands",
        "command",
        (),
        namespaced=True,
        status_subresource=False,
        model=Command,
    ),
    KindInfo(
        FLOW_GROUP,
        FLOW_VERSION,
        "JobFlow",
        "jobflows",
        "jobflow",
        ("jf",),
        namespaced=True,
        status_subresource=True,
        model=JobFlow,
        printer_columns=(PrinterColumn("Status", ".status.state.phase"), _AGE),
    ),
    KindInfo(
        FLOW_GROUP,
        FLOW_VERSION,
        "JobTemplate",
        "jobtemplates",
        "jobtemplate",
        ("jt",),
        namespaced=True,
        status_subresource=True,
        model=JobTemplate,
    ),
    KindInfo(
        TOPOLOGY_GROUP,
        TOPOLOGY_VERSION,
        "HyperNode",
        "hypernodes",
        "hypernode",
        ("hn",),
        namespaced=False,
        status_subresource=True,
        model=HyperNode,
        # Volcano's columns, Tier typed string as in its CRD.
        printer_columns=(
            PrinterColumn("Tier", ".spec.tier"),
            PrinterColumn("TierName", ".spec.tierName"),
            PrinterColumn("NodeCount", ".status.nodeCount", type="integer"),
            PrinterColumn("Age", ".metadata.creationTimestamp", type="date"),
        ),
    ),
    KindInfo(
        NODEINFO_GROUP,
        NODEINFO_VERSION,
        "Numatopology",
        "numatopologies",
        "numatopology",
        ("numatopo",),
        namespaced=False,
        status_subresource=False,
        model=Numatopology,
    ),
)

_BY_API_KIND: dict[tuple[str, str], KindInfo] = {(k.api_version, k.kind): k for k in KINDS}


def lookup(api_version: str | None, kind: str | None) -> KindInfo | None:
    """The KindInfo for an object's apiVersion and kind, or None for kinds vulcan does not own."""
    if not api_version or not kind:
        return None
    return _BY_API_KIND.get((api_version, kind))
