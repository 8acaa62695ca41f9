"""The extension points a plugin may register, each a typed Protocol, and the check every plugin
of a conf passes when the conf is loaded (`check_plugin`): a method that looks like a hook but is
none (a misspelling, a wrong signature) is refused with its name instead of never being called.

A plugin registers an extension point by defining the method of that name; the conf's
`enable*` flag of the point (`EXTENSION_POINTS[name].flag`) switches it off per plugin. The
hooks receive the pass's numbers (`PassState`: the queues' share model, the cluster's sums,
the time); the per-pass `plugins.framework.session.Session` holds them and asks the hooks
through `plugins.framework.policy.Policy`, which combines the plugins' answers tier by tier.

What a hook reads is declared with its point (`inputs`): the memo
(`plugins.framework.memo`) keeps a decision only while those inputs are unchanged.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from core.resources import ResourceVector
from plugins.framework.config_types import ConfigError
from plugins.model.gang import GangView
from plugins.model.job_order import JobInput
from plugins.model.node_state import NodeState
from plugins.model.queue_parts import QueueParts
from plugins.model.queue_share import QueueInput, ShareModel
from plugins.model.victims import VictimUnit

__all__ = [
    "ABSTAIN",
    "ABSTAINED",
    "EXTENSION_POINTS",
    "PERMIT",
    "PERMITTED",
    "REJECT",
    "ExtensionPoint",
    "PassState",
    "Preemptor",
    "Refusal",
    "SessionPlugin",
    "Vote",
    "check_plugin",
    "registers",
]

PERMIT, ABSTAIN, REJECT = 1, 0, -1

# What a hook may read, for the memo (`plugins.framework.memo`): the job's own queue's numbers
# (and its ancestors'), every queue's, the cluster's sums (overcommit), the clock.
QUEUE, QUEUES, CLUSTER, CLOCK = "queue", "queues", "cluster", "clock"


@dataclass(frozen=True, slots=True)
class Vote:
    verdict: int  # PERMIT, ABSTAIN or REJECT
    reason: str = ""


PERMITTED = Vote(PERMIT)
ABSTAINED = Vote(ABSTAIN)


@dataclass(slots=True)
class PassState:
    """The numbers of one pass the hooks read and book into: the queues' share model (None when
    the cluster has no queue at all), the cluster's allocatable and what is taken of it (the
    overcommit rule's `used`, grown by job_enqueued), and the time (sla)."""

    model: ShareModel | None = None
    inputs: Mapping[str, QueueInput] = field(default_factory=dict)
    total: Mapping[str, int] = field(default_factory=dict)
    used: dict[str, int] = field(default_factory=dict)
    now: float = 0.0


@dataclass(frozen=True, slots=True)
class Refusal:
    """A Reject of the votes: its reason, the plugin that cast it and whether its tier is the
    first with a vote (`first`: no earlier tier could have admitted the job instead)."""

    reason: str
    plugin: str
    first: bool


@dataclass(frozen=True, slots=True)
class Preemptor:
    """The job a preempt or reclaim is for, as the victim hooks see it."""

    group: str
    queue: str
    priority: int
    allocated: ResourceVector  # what it holds now
    request: ResourceVector  # what it asks for


# ------------------------------------------------------------------ the points, typed


class JobOrderKey(Protocol):
    def job_order_key(self, job: JobInput, state: PassState) -> Any: ...


class QueueOrder(Protocol):
    def queue_order(self, state: PassState) -> list[str]: ...


class JobEnqueueable(Protocol):
    def job_enqueueable(self, job: JobInput, state: PassState) -> Vote: ...


class JobEnqueued(Protocol):
    def job_enqueued(self, job: JobInput, state: PassState) -> None: ...


class JobAllocated(Protocol):
    """Volcano's Allocate event handlers: a gang was placed whole, holding `held`."""

    def job_allocated(self, job: JobInput, held: ResourceVector, state: PassState) -> None: ...


class TaskAllocated(Protocol):
    """The same for one pod: an elastic member, a pod of no gang."""

    def task_allocated(self, queue: str, request: ResourceVector, state: PassState) -> None: ...


class TaskDeallocated(Protocol):
    """Volcano's Deallocate event handlers: a booking taken back."""

    def task_deallocated(self, queue: str, request: ResourceVector, state: PassState) -> None: ...


class JobValid(Protocol):
    def job_valid(self, view: GangView) -> str | None: ...


class JobReady(Protocol):
    def job_ready(self, view: GangView) -> bool: ...


class JobPipelined(Protocol):
    def job_pipelined(self, view: GangView, job: JobInput, state: PassState) -> Vote: ...


class JobStarving(Protocol):
    def job_starving(self, view: GangView) -> bool: ...


class Allocatable(Protocol):
    def allocatable(self, queue: str, request: ResourceVector, state: PassState) -> str | None: ...


class Overused(Protocol):
    def overused(self, queue: str, state: PassState) -> bool: ...


class Preemptive(Protocol):
    def preemptive(self, queue: str, request: ResourceVector, state: PassState) -> bool: ...


class Preemptable(Protocol):
    def preemptable(
        self, preemptor: Preemptor, candidates: Sequence[VictimUnit], state: PassState
    ) -> list[VictimUnit] | None: ...


class Reclaimable(Protocol):
    def reclaimable(
        self, preemptor: Preemptor, candidates: Sequence[VictimUnit], state: PassState
    ) -> list[VictimUnit] | None: ...


class NodeScorer(Protocol):
    """Volcano's NodeOrderFn for one pod, prepared once, then node by node (summed by
    `plugins.framework.node_order.NodeOrder`)."""

    def node_scorer(self, request: ResourceVector) -> Callable[[NodeState], float]: ...


class ColumnScorer(Protocol):
    """The same NodeOrderFn over many nodes at once: a function of the candidates' columns
    (allocatable, requested: int64 arrays, one row per dimension, at `rows[dimension]`) giving
    each node's score; None where this request or setting is left to `node_scorer`."""

    def column_scorer(
        self, request: ResourceVector, rows: Mapping[str, int]
    ) -> Callable[[Any, Any], Any] | None: ...


class PlacementWeights(Protocol):
    """How strongly the plugin's node order favours fuller (packing) and emptier (spreading)
    nodes, for how a whole gang is laid out (`Framework.gang_placement`)."""

    def placement_weights(self) -> tuple[int, int]: ...


class Score(Protocol):
    """A node-order plugin that scores one node at a time (no preparation)."""

    def score(self, request: ResourceVector, node: NodeState) -> float: ...


class OpenQueues(Protocol):
    """proportion, capacity: Volcano's OnSessionOpen building the queues' share model."""

    def open_queues(
        self, total: ResourceVector, inputs: Sequence[QueueInput], parts: QueueParts = ...
    ) -> ShareModel:
        """`parts`: how the model gets its per-queue parts (`plugins.model.queue_parts`)."""
        ...


class Configure(Protocol):
    """Read the conf entry's enable flags (e.g. capacity's enableHierarchy)."""

    def configure(self, option: Any) -> None: ...


@dataclass(frozen=True, slots=True)
class ExtensionPoint:
    name: str
    protocol: type
    flag: str | None  # the PluginOption flag that switches it off per plugin
    inputs: frozenset[str] = frozenset()  # what it may read beyond the job (the memo's)


def _point(name: str, protocol: type, flag: str | None, *inputs: str) -> tuple[str, ExtensionPoint]:
    return name, ExtensionPoint(name, protocol, flag, frozenset(inputs))


EXTENSION_POINTS: dict[str, ExtensionPoint] = dict(
    (
        _point("job_order_key", JobOrderKey, "enableJobOrder", CLUSTER),
        _point("queue_order", QueueOrder, "enableQueueOrder", QUEUES),
        _point("job_enqueueable", JobEnqueueable, "enableJobEnqueued", QUEUE, CLUSTER),
        _point("job_enqueued", JobEnqueued, "enableJobEnqueued"),
        _point("job_allocated", JobAllocated, None),
        _point("task_allocated", TaskAllocated, None),
        _point("task_deallocated", TaskDeallocated, None),
        _point("job_valid", JobValid, None),
        _point("job_ready", JobReady, "enableJobReady"),
        _point("job_pipelined", JobPipelined, "enableJobPipelined"),
        _point("job_starving", JobStarving, "enableJobStarving"),
        _point("allocatable", Allocatable, "enabledAllocatable", QUEUE),
        _point("overused", Overused, "enabledOverused", QUEUE),
        _point("preemptive", Preemptive, "enablePreemptive", QUEUE),
        _point("preemptable", Preemptable, "enablePreemptable", QUEUES, CLUSTER),
        _point("reclaimable", Reclaimable, "enableReclaimable", QUEUES, CLUSTER),
        _point("node_scorer", NodeScorer, "enableNodeOrder"),
        _point("column_scorer", ColumnScorer, "enableNodeOrder"),
        _point("placement_weights", PlacementWeights, "enableNodeOrder"),
        _point("score", Score, "enableNodeOrder"),
        _point("open_queues", OpenQueues, None),
        _point("configure", Configure, None),
    )
)


class SessionPlugin:
    """A plugin of the session: subclasses set `name` and define the extension points they
    register (the names of `EXTENSION_POINTS`, with their signatures). Public methods that are
    no extension point must be listed in `helpers`; `clock_dependent` says the plugin's answers
    change with the time alone (sla), so decisions reading them are not kept; `job_fields`
    what its hooks read of a job, `inputs` what they read of the session."""

    name: ClassVar[str] = ""
    helpers: ClassVar[tuple[str, ...]] = ()
    clock_dependent: ClassVar[bool] = False
    # What a hook reads of the job it is asked about (hook -> JobInput field names); none
    # given: all of it. The memo asks one question for the jobs alike in those fields.
    job_fields: ClassVar[Mapping[str, tuple[str, ...]]] = {}
    # What a hook reads of the session beyond its arguments (hook -> QUEUE: the queue's own
    # numbers and its ancestors'; CLUSTER: the cluster's sums; CLOCK: the time): while those
    # are unchanged its answer is. None given: the memo asks it again to know.
    inputs: ClassVar[Mapping[str, frozenset[str]]] = {}

    def __init__(self, arguments: Mapping[str, Any]) -> None:
        self.arguments = arguments


def registers(plugin: object, hook: str) -> bool:
    """The plugin defines extension point `hook`."""
    return callable(getattr(type(plugin), hook, None))


def check_plugin(plugin: object, where: str) -> None:
    """Refuse (ConfigError naming `where`, the conf entry) a plugin with a public method that
    is no extension point and not one of its `helpers`, or an extension point whose parameters
    are not the point's."""
    helpers = set(getattr(plugin, "helpers", ()))
    name = getattr(plugin, "name", type(plugin).__name__)
    for cls in type(plugin).__mro__:
        if cls in (SessionPlugin, object):
            continue
        for attr, value in vars(cls).items():
            if attr.startswith("_") or not inspect.isfunction(value) or attr in helpers:
                continue
            point = EXTENSION_POINTS.get(attr)
            if point is None:
                near = _nearest(attr)
                hint = f" (did you mean {near}?)" if near else ""
                raise ConfigError(
                    f'{where}: plugin "{name}" defines {attr}(), which is not an extension '
                    f"point{hint}; extension points: {', '.join(sorted(EXTENSION_POINTS))}"
                )
            expected = _parameters(getattr(point.protocol, attr))
            if _parameters(value) != expected:
                raise ConfigError(
                    f'{where}: plugin "{name}" defines {attr}({", ".join(_parameters(value))}), '
                    f"but the extension point takes ({', '.join(expected)})"
                )


def _parameters(function: Any) -> list[str]:
    return [p for p in inspect.signature(function).parameters if p != "self"]


def _nearest(attr: str) -> str | None:
    import difflib

    found = difflib.get_close_matches(attr, list(EXTENSION_POINTS), n=1, cutoff=0.75)
    return found[0] if found else None
