"""Volcano's task-topology annotations and buckets (pkg/scheduler/plugins/task-topology:
topology.go, manager.go, bucket.go, util.go), for `plugins.builtin.task_topology`.

A bucket is a set of a job's pods Volcano tries to put on one node. `Buckets` is Volcano's
JobManager: it builds the buckets once (`buildBucket`), orders pods (`TaskOrderFn`) and scores
one pod on one node (`calcBucketScore` + `NodeOrderFn`). Where this differs from Volcano, see
the deviations in `plugins.builtin.task_topology`'s docstring.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field

from core.api import keys
from core.records import PodRecord
from core.resources import ResourceVector

__all__ = [
    "AFFINITY",
    "ANTI_AFFINITY",
    "TASK_ORDER",
    "Bucket",
    "Buckets",
    "TaskTopology",
    "TaskTopologyError",
    "build_buckets",
    "parse_task_topology",
]

AFFINITY = keys.TASK_TOPOLOGY_AFFINITY
ANTI_AFFINITY = keys.TASK_TOPOLOGY_ANTI_AFFINITY
TASK_ORDER = keys.TASK_TOPOLOGY_TASK_ORDER

# manager.go affinityPriority: the strongest relation a task takes part in decides how early its
# pods join buckets (higher first) when the task-order annotation does not decide.
_SELF_ANTI, _INTER_AFFINITY, _SELF_AFFINITY, _INTER_ANTI = 4, 3, 2, 1
# kube-scheduler's MaxNodeScore (NodeOrderFn scales by it).
_MAX_NODE_SCORE = 100
_MIB = 1024 * 1024
_ZERO = ResourceVector()


class TaskTopologyError(ValueError):
    """An invalid task-topology annotation: Volcano's plugin then ignores the job."""


@dataclass(frozen=True, slots=True)
class TaskTopology:
    """The PodGroup's task-topology annotations, as Volcano's readTopologyFromPgAnnotations
    splits them (`;` between groups, `,` between task names). Empty names from stray
    separators are kept, as Volcano keeps them: they match no pod, but a group "ps," has two
    names, so ps gets no self-affinity from it (Volcano's own test "redundant punctuations")."""

    affinity: tuple[tuple[str, ...], ...] = ()
    anti_affinity: tuple[tuple[str, ...], ...] = ()
    task_order: tuple[str, ...] = ()


def parse_task_topology(
    annotations: Mapping[str, str], task_names: Collection[str]
) -> TaskTopology | None:
    """The job's topology; None when it has none of the three annotations.

    task_names: the job's task names (`volcano.sh/task-spec` of its pods, every status).
    Raises TaskTopologyError naming the annotation and the name when a name is not a task of
    the job or appears twice in one group (Volcano's affinityCheck; the first invalid
    annotation in Volcano's order: affinity, anti-affinity, task order). A name may appear in
    several groups, and empty names are skipped, as Volcano skips them.
    """
    if not any(key in annotations for key in (AFFINITY, ANTI_AFFINITY, TASK_ORDER)):
        return None
    known = frozenset(task_names)
    affinity = _groups(annotations, AFFINITY, known)
    anti_affinity = _groups(annotations, ANTI_AFFINITY, known)
    order: tuple[str, ...] = ()
    if TASK_ORDER in annotations:
        order = tuple(annotations[TASK_ORDER].split(","))
        _check(TASK_ORDER, order, known)
    return TaskTopology(affinity, anti_affinity, order)


def _groups(
    annotations: Mapping[str, str], key: str, known: frozenset[str]
) -> tuple[tuple[str, ...], ...]:
    if key not in annotations:
        return ()
    groups = tuple(tuple(text.split(",")) for text in annotations[key].split(";"))
    for group in groups:
        _check(key, group, known)
    return groups


def _check(key: str, group: tuple[str, ...], known: frozenset[str]) -> None:
    seen: set[str] = set()
    for name in group:
        if not name:
            continue
        if name not in known:
            tasks = ", ".join(f'"{t}"' for t in sorted(known) if t) or "none"
            raise TaskTopologyError(
                f'{key}: task "{name}" does not exist in the job (its tasks: {tasks})'
            )
        if name in seen:
            raise TaskTopologyError(f'{key}: task "{name}" is listed twice in "{",".join(group)}"')
        seen.add(name)


class _Relations:
    """manager.go ApplyTaskTopology: the annotations as relation sets between task names."""

    __slots__ = ("inter_affinity", "inter_anti", "priority", "rank", "self_affinity", "self_anti")

    def __init__(self, topology: TaskTopology) -> None:
        self.self_affinity: set[str] = set()
        self.self_anti: set[str] = set()
        self.inter_affinity: dict[str, set[str]] = {}
        self.inter_anti: dict[str, set[str]] = {}
        self.priority: dict[str, int] = {}  # taskAffinityPriority: only tasks with a relation
        for group in topology.affinity:
            self._add(
                group, self.self_affinity, self.inter_affinity, _SELF_AFFINITY, _INTER_AFFINITY
            )
        for group in topology.anti_affinity:
            self._add(group, self.self_anti, self.inter_anti, _SELF_ANTI, _INTER_ANTI)
        # taskExistOrder: the first name of the task-order annotation ranks highest.
        count = len(topology.task_order)
        self.rank = {name: count - i for i, name in enumerate(topology.task_order)}

    def _add(
        self,
        group: tuple[str, ...],
        selfs: set[str],
        inter: dict[str, set[str]],
        self_priority: int,
        inter_priority: int,
    ) -> None:
        if len(group) == 1:  # one name: the task's own pods attract (repel) each other
            selfs.add(group[0])
            self._mark(group[0], self_priority)
            return
        for i, src in enumerate(group):
            for dst in group[:i]:
                inter.setdefault(src, set()).add(dst)
                inter.setdefault(dst, set()).add(src)
            self._mark(src, inter_priority)

    def _mark(self, task: str, priority: int) -> None:
        self.priority[task] = max(priority, self.priority.get(task, 0))

    def affinity(self, task: str, counts: Mapping[str, int]) -> int:
        """checkTaskSetAffinity(onlyAnti=false): +1 per pod of an affine task in `counts`,
        -1 per pod of an anti-affine one."""
        score = 0
        for other, count in counts.items():
            if other == task:
                score += count * ((task in self.self_affinity) - (task in self.self_anti))
            else:
                affine = other in self.inter_affinity.get(task, ())
                score += count * (affine - (other in self.inter_anti.get(task, ())))
        return score

    def anti_tasks(self, task: str) -> frozenset[str]:
        """The task names whose pods `task`'s pods should not share a node with."""
        out = set(self.inter_anti.get(task, ()))
        if task in self.self_anti:
            out.add(task)
        return frozenset(out)


def _req_score(request: ResourceVector) -> float:
    """bucket.go CalcResReq: 1 milli-cpu = 1 MiB of memory = 1 milli-unit of anything else
    (Volcano holds extended resources in milli-units; the pod count is not a request there)."""
    score = 0.0
    for name, amount in request.items():
        if name == "cpu":
            score += amount
        elif name == "memory":
            score += amount / _MIB
        elif name != "pods":
            score += amount * 1000
    return score


@dataclass(eq=False, slots=True)
class Bucket:
    """bucket.go Bucket. `pending`: members without a node, in the order they joined (Volcano's
    `tasks`); `bound`: node -> members already on it (Volcano's `node`); `tasks`: task name ->
    members of both kinds (`taskNameSet`); `request`, `req_score`: of the pending members."""

    index: int
    pending: list[PodRecord] = field(default_factory=list)
    bound: dict[str, int] = field(default_factory=dict)
    tasks: dict[str, int] = field(default_factory=dict)
    request: ResourceVector = _ZERO
    req_score: float = 0.0

    @property
    def size(self) -> int:
        return len(self.pending) + sum(self.bound.values())

    def add(self, pod: PodRecord, task: str) -> None:
        self.tasks[task] = self.tasks.get(task, 0) + 1
        if pod.node:
            self.bound[pod.node] = self.bound.get(pod.node, 0) + 1
            return
        self.pending.append(pod)
        self.request = self.request + pod.requests
        self.req_score += _req_score(pod.requests)


class Buckets:
    """manager.go JobManager for one job: its buckets and the plugin's order and score.

    members: the job's pods, bound ones (`node` set) included: they make one bucket per node,
    which pending pods of affine tasks then join.
    """

    __slots__ = ("_bucket_of", "_relations", "_task_of", "buckets", "max_size", "node_tasks")

    def __init__(self, topology: TaskTopology, members: Iterable[PodRecord]) -> None:
        self._relations = relations = _Relations(topology)
        self.buckets: list[Bucket] = []
        self._bucket_of: dict[str, Bucket] = {}
        self._task_of: dict[str, str] = {}
        # node -> task -> bound members (Volcano's nodeTaskSet; see the deviations).
        self.node_tasks: dict[str, dict[str, int]] = {}
        self.max_size = 0  # bucketMaxSize: the largest bucket, bound members included
        chosen: list[PodRecord] = []
        for pod in members:
            task = pod.task or ""
            if task:
                self._task_of[pod.key] = task
                if pod.node:
                    counts = self.node_tasks.setdefault(pod.node, {})
                    counts[task] = counts.get(task, 0) + 1
            # buildTaskInfo: a pod without a task, or of a task without relations, is out of
            # every bucket (a task named only by the task-order annotation has none).
            if task in relations.priority:
                chosen.append(pod)
        chosen.sort(key=self._join_key)
        by_node: dict[str, Bucket] = {}
        for pod in chosen:
            self._join(pod, by_node)

    def _join_key(self, pod: PodRecord) -> tuple[int, str, int, int, str]:
        """util.go TaskOrder, reversed as ConstructBucket sorts: bound pods first (by node),
        then the task-order annotation, then the strongest relation, then the pod name."""
        if pod.node:
            return 0, pod.node, 0, 0, pod.name
        task = pod.task or ""
        return 1, "", -self._relations.rank.get(task, 0), -self._relations.priority[task], pod.name

    def _join(self, pod: PodRecord, by_node: dict[str, Bucket]) -> None:
        """buildBucket for one pod: a bound pod joins its node's bucket; a pending one the
        bucket it has the best affinity score with (on a tie, the one requesting least), or a
        new bucket when every score is negative."""
        task = pod.task or ""
        chosen: Bucket | None = None
        if pod.node:
            chosen = by_node.get(pod.node)
        else:
            best = 0
            for bucket in self.buckets:
                score = self._relations.affinity(task, bucket.tasks)
                if chosen is None or score > best:
                    chosen, best = bucket, score
                elif score == best and bucket.req_score < chosen.req_score:
                    chosen = bucket
            if best < 0:
                chosen = None
        if chosen is None:
            chosen = Bucket(len(self.buckets))
            self.buckets.append(chosen)
            if pod.node:
                by_node[pod.node] = chosen
        chosen.add(pod, task)
        self._bucket_of[pod.key] = chosen
        self.max_size = max(self.max_size, chosen.size)

    # ------------------------------------------------------------------ queries

    def of(self, pod: PodRecord) -> Bucket | None:
        """The pod's bucket; None when it is out of every bucket (or not a member)."""
        return self._bucket_of.get(pod.key)

    def task_of(self, key: str) -> str:
        return self._task_of.get(key, "")

    def anti_tasks(self, task: str) -> frozenset[str]:
        return self._relations.anti_tasks(task)

    def task_order_key(self, pod: PodRecord) -> tuple[int, int, int, int, int]:
        """topology.go TaskOrderFn as a sort key (smaller first): pods in a bucket before the
        others; bigger buckets (more pending members) first, then older buckets; inside a
        bucket by the task-order annotation, then the strongest relation. Pods Volcano finds
        equal get equal keys: a stable sort leaves them in the caller's order, as Volcano
        leaves them to the next plugin's TaskOrderFn."""
        bucket = self._bucket_of.get(pod.key)
        if bucket is None:
            return 1, 0, 0, 0, 0
        task = pod.task or ""
        relations = self._relations
        rank, priority = relations.rank.get(task, 0), relations.priority.get(task, 0)
        return 0, -len(bucket.pending), bucket.index, -rank, -priority

    def node_scorer(
        self, pod: PodRecord, placed: Mapping[str, str], weight: int = 1
    ) -> Callable[[str, ResourceVector], float]:
        """Volcano's NodeOrderFn for `pod`, as a function of (node name, the node's free
        resources) -> score; the per-pod work is done once here.

        placed: member key -> node for the job's members given a node since the buckets were
        built (this pass's slots, reservations). Score = (members of the pod's bucket on the
        node - pods on it of tasks anti-affine to the pod's + pending members of the bucket -
        those that must be left out for the bucket to fit the node's free resources) x weight
        x 100 / the largest bucket's size; 0 when the pod does not fit or is in no bucket.
        """
        bucket = self._bucket_of.get(pod.key)
        if bucket is None or self.max_size == 0:
            return lambda node, free: 0.0
        on_node = dict(bucket.bound)
        node_tasks = {node: dict(counts) for node, counts in self.node_tasks.items()}
        for key, node in placed.items():
            task = self._task_of.get(key)
            if task:
                counts = node_tasks.setdefault(node, {})
                counts[task] = counts.get(task, 0) + 1
            if self._bucket_of.get(key) is bucket:
                on_node[node] = on_node.get(node, 0) + 1
        others = [p for p in bucket.pending if p.key not in placed and p.key != pod.key]
        total = pod.requests
        for other in others:
            total = total + other.requests
        anti = self.anti_tasks(pod.task or "")
        scale = weight * _MAX_NODE_SCORE / self.max_size

        def score(node: str, free: ResourceVector) -> float:
            if not pod.requests.fits_in(free):
                return 0.0
            value = on_node.get(node, 0) + len(others) + 1
            counts = node_tasks.get(node)
            if counts:
                value -= sum(counts.get(task, 0) for task in anti)
            remains = total
            # Volcano drops members in Go map order (random); we drop the last joined first.
            for other in reversed(others):
                if remains.fits_in(free):
                    break
                remains = remains - other.requests
                value -= 1
            return value * scale

        return score


def build_buckets(topology: TaskTopology, members: Iterable[PodRecord]) -> Buckets:
    """The job's buckets (manager.go ConstructBucket); see `Buckets`."""
    return Buckets(topology, members)
