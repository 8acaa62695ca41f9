"""Volcano's task-topology plugin (pkg/scheduler/plugins/task-topology): co-locate a job's
affine tasks (a parameter server with its workers), spread anti-affine ones.

PodGroup annotations (`plugins.builtin.task_topology_buckets.parse_task_topology`):
  volcano.sh/task-topology-affinity       "ps,worker;chief,evaluator": groups to co-locate (one
                                          name alone: that task's pods attract each other)
  volcano.sh/task-topology-anti-affinity  "ps;worker,chief": the same, to keep apart
  volcano.sh/task-topology-task-order     "ps,worker": which task's pods go first
Argument: `task-topology.weight` (int, default 1; zero and negative values are kept, as
Volcano's calculateWeight keeps them: 0 scores every node 0, negative pushes a bucket apart).

How Volcano's code maps here:
- manager.go ConstructBucket/buildBucket, bucket.go: `Buckets` / `build_buckets`. Pods join
  in util.go's TaskOrder (bound first, then task order, relation priority, name); a bound pod
  joins its node's bucket; a pending pod joins the bucket with the best affinity score (+1 per
  affine pod, -1 per anti-affine one; ties: the bucket requesting least), or a new bucket when
  every score is negative. Pods without a task, or of a task with no relation, are in none.
- topology.go TaskOrderFn: `Buckets.task_order_key`.
- topology.go calcBucketScore + NodeOrderFn: `Buckets.node_scorer` / `TaskTopologyPlugin`.
- Volcano's allocate places pods one by one, each on the node with the best summed score;
  `plan_topology_gang` plans the whole gang (same contract as `plugins.model.placement.plan_gang`)
  bucket by bucket, in task order: the longest run of the bucket's remaining pods that fits one
  node goes there, the node chosen by this plugin's score for the run's first pod (bucket
  members already there - pods of anti-affine tasks there + pods of the bucket that fit), then
  the tightest fit. So a bucket lands on one node when one has room, else on few nodes, and
  anti-affine pods (which the buckets keep apart) spread while nodes without them have room.
  Pods in no bucket are placed by `plan_gang`'s binpack.

Deviations, and why:
- Empty task names ("ps,,worker;") are accepted, not an error: Volcano's affinityCheck skips
  them (its test "redundant punctuations" expects that).
- Buckets are not capped by the largest node: Volcano caps nothing when it builds them; a
  bucket too big for a node is cut per node by the score's "left out" term, and by the planner.
- calcBucketScore leaves bucket pods out in Go map order (random) until the bucket fits the
  node; we leave out the last joined first, so scores are reproducible.
- The anti-affinity penalty (Volcano's nodeTaskSet) counts only pods allocated during the
  session in Volcano; with no session here it counts every bound member and every placed one.
- Bound members are read from the snapshot (the members' group); finished pods are left out
  (Volcano keeps them, with their node, in the job): they no longer hold the node.
- The planner scores with this plugin only (tightest fit stands in for binpack/nodeorder). When
  task order leaves the gang's minimums unmet, it tries again with the required members first,
  and last falls back to `plan_gang` (whose answer, and reason text, it then returns): Volcano's
  scores are preferences, never a reason to leave a gang unplaced.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from core.records import NodeRecord, PodRecord
from core.resources import ResourceVector
from plugins.builtin.task_topology_buckets import (
    Bucket,
    Buckets,
    TaskTopology,
    TaskTopologyError,
    build_buckets,
    parse_task_topology,
)
from plugins.framework.config_types import int_argument
from plugins.framework.extension_points import SessionPlugin
from plugins.model.gang_fit import GangFit, Held
from plugins.model.placement import (
    Plan,
    gang_node_check,
    plan_gang,
    reserved_by_node,
    slot_usage,
)

if TYPE_CHECKING:  # annotations only: core.cache pulls in the informers and asyncio
    from core.cache import Snapshot

__all__ = [
    "WEIGHT",
    "Bucket",
    "Buckets",
    "TaskTopology",
    "TaskTopologyError",
    "TaskTopologyPlugin",
    "build_buckets",
    "parse_task_topology",
    "plan_topology_gang",
]

WEIGHT = "task-topology.weight"
_ZERO = ResourceVector()
# Tightest fit compares what a node has left, scarce dimensions first (as placement does).
_DIM_PRIORITY = {"cpu": 1, "memory": 2, "ephemeral-storage": 3, "pods": 4}


class TaskTopologyPlugin(SessionPlugin):
    """The plugin as a conf names it; it registers no session hook (Volcano's TaskOrderFn and
    NodeOrderFn act on pods: `Buckets.task_order_key`, `member_scorer` below, which the gang
    planner uses: it is not the node_scorer extension point, whose request alone it lacks)."""

    name = "task-topology"
    helpers = ("member_scorer",)

    def __init__(self, arguments: Mapping[str, Any] | None = None) -> None:
        super().__init__(arguments or {})
        self.weight: int = int_argument(self.arguments, WEIGHT, 1)

    @property
    def co_locates(self) -> bool:
        """The node score pulls a bucket together (weight > 0). With 0 Volcano keeps the task
        order but no node preference; negative weights push buckets apart."""
        return self.weight > 0

    def member_scorer(
        self, buckets: Buckets, pod: PodRecord, placed: Mapping[str, str] | None = None
    ) -> Callable[[str, ResourceVector], float]:
        """Volcano's NodeOrderFn for one member: (node name, free resources) -> score."""
        return buckets.node_scorer(pod, placed or {}, self.weight)


def plan_topology_gang(
    snapshot: Snapshot,
    members: Sequence[PodRecord],
    need: int,
    reserved: Mapping[str, ResourceVector],
    topology: TaskTopology,
    *,
    need_per_task: Mapping[str, int] | None = None,
    node_ok: Callable[[NodeRecord], bool] | None = None,
    held: Held | None = None,
) -> Plan:
    """`plugins.model.placement.plan_gang` for a job with a task topology: the same arguments and
    Plan, members placed bucket by bucket (see the module docstring). O(members x nodes).
    Members with rules that change as the gang lands (host ports, pod affinity, spread) or
    with different constraints are left to `plan_gang`, which follows kube-scheduler's."""
    per_task = {task: n for task, n in (need_per_task or {}).items() if n > 0}
    fit = GangFit(snapshot, members, held)
    if not fit.fast:
        return plan_gang(
            snapshot,
            members,
            need,
            reserved,
            need_per_task=need_per_task,
            node_ok=node_ok,
            held=held,
        )
    check = node_ok or gang_node_check(fit, members)
    buckets = build_buckets(topology, [*_bound_members(snapshot, members), *members])
    order = sorted(members, key=buckets.task_order_key)
    attempts = [[order]]
    if per_task:
        required = _required(order, per_task)
        attempts.append(
            [[p for p in order if p.key in required], [p for p in order if p.key not in required]]
        )
    for stages in attempts:
        layout = _Layout(snapshot, reserved, check, members, buckets)
        for stage in stages:
            layout.place(stage)
        if _meets(layout.slots, members, need, per_task):
            return layout.plan()
    return plan_gang(
        snapshot, members, need, reserved, need_per_task=need_per_task, node_ok=node_ok, held=held
    )


def _bound_members(snapshot: Snapshot, members: Sequence[PodRecord]) -> list[PodRecord]:
    """The members' groups' pods that hold a node (they anchor their buckets)."""
    pending = {pod.key for pod in members}
    out: list[PodRecord] = []
    for group in sorted({pod.group for pod in members if pod.group}):
        for key in sorted(snapshot.pods_by_group.get(group, ())):
            pod = snapshot.pods.get(key)
            if pod is not None and key not in pending and pod.occupies_node:
                out.append(pod)
    return out


def _required(order: Sequence[PodRecord], per_task: Mapping[str, int]) -> set[str]:
    """Keys of the first `per_task[task]` members of each short task, in `order`."""
    left = dict(per_task)
    out: set[str] = set()
    for pod in order:
        task = pod.task or ""
        if left.get(task, 0) > 0:
            left[task] -= 1
            out.add(pod.key)
    return out


def _meets(
    slots: Mapping[str, str], members: Sequence[PodRecord], need: int, per_task: Mapping[str, int]
) -> bool:
    if len(slots) < need:
        return False
    placed: dict[str, int] = {}
    for pod in members:
        if pod.key in slots:
            placed[pod.task or ""] = placed.get(pod.task or "", 0) + 1
    return all(placed.get(task, 0) >= n for task, n in per_task.items())


def _longest_run(prefix: Sequence[Sequence[int]], row: Sequence[int], dims: Sequence[int]) -> int:
    """How many of the run's pods fit `row` together (`prefix[j]`: the first j pods' sum; the
    first pod is known to fit; `dims`: the dimensions the run requests). Volcano's fit rule
    compares requested dimensions only, and sums only grow: a binary search finds it."""
    low, high = 1, len(prefix) - 1
    while low < high:
        mid = (low + high + 1) // 2
        need = prefix[mid]
        if all(need[d] <= 0 or need[d] <= row[d] for d in dims):
            low = mid
        else:
            high = mid - 1
    return low


def _tighter(row: list[int], used: list[int], other: list[int], other_used: list[int]) -> bool:
    """`row` is left fuller than `other` after their runs (scarce dimensions compared first);
    on a tie the node seen first (by name) stays."""
    if used == other_used:  # same run: compare the rows themselves, without building lists
        return row < other
    return [f - u for f, u in zip(row, used, strict=True)] < [
        f - u for f, u in zip(other, other_used, strict=True)
    ]


class _Layout:
    """One placement attempt: the candidate nodes' free rows, and the slots given so far."""

    def __init__(
        self,
        snapshot: Snapshot,
        reserved: Mapping[str, ResourceVector],
        check: Callable[[NodeRecord], bool],
        members: Sequence[PodRecord],
        buckets: Buckets,
    ) -> None:
        self.snapshot, self.reserved, self.check, self.buckets = snapshot, reserved, check, buckets
        self.requests = {pod.key: pod.requests for pod in members}
        names = {n for pod in members for n, amount in pod.requests.items() if amount > 0}
        # Scarce dimensions first (extended resources, then cpu ...), for the tightest fit.
        self.dims = tuple(sorted(names, key=lambda n: (_DIM_PRIORITY.get(n, 0), n)))
        self.names: list[str] = []
        self.rows: list[list[int]] = []
        for name in sorted(snapshot.nodes):
            node = snapshot.nodes[name]
            if not check(node):
                continue
            taken = snapshot.node_requested.get(name, _ZERO) + reserved.get(name, _ZERO)
            self.names.append(name)
            self.rows.append([node.allocatable.get(d) - taken.get(d) for d in self.dims])
        self.index = {name: i for i, name in enumerate(self.names)}
        self.slots: dict[str, str] = {}
        # bucket index -> node number -> its members there; node number -> task -> pods there.
        self.on_node: dict[int, dict[int, int]] = {}
        for bucket in buckets.buckets:
            self.on_node[bucket.index] = {
                self.index[n]: c for n, c in bucket.bound.items() if n in self.index
            }
        self.node_tasks: dict[int, dict[str, int]] = {
            self.index[n]: dict(c) for n, c in buckets.node_tasks.items() if n in self.index
        }

    def vector(self, pod: PodRecord) -> list[int]:
        return [pod.requests.get(d) for d in self.dims]

    def place(self, pods: Sequence[PodRecord]) -> None:
        """Place `pods` (in task order): bucket by bucket, then those in no bucket."""
        groups: dict[int, list[PodRecord]] = {}
        loose: list[PodRecord] = []
        for pod in pods:
            bucket = self.buckets.of(pod)
            if bucket is None:
                loose.append(pod)
            else:
                groups.setdefault(bucket.index, []).append(pod)
        for index, group in groups.items():
            self._place_bucket(index, group)
        if loose:
            # plan_gang's binpack on what is left: our slots count as reserved.
            taken = reserved_by_node([self.reserved, slot_usage(self.slots, self.requests)])
            plan = plan_gang(self.snapshot, loose, 0, taken, node_ok=self.check)
            by_key = {pod.key: pod for pod in loose}
            for key, name in plan.slots.items():
                self._take(by_key[key], self.index[name], -1)

    def _place_bucket(self, index: int, pods: list[PodRecord]) -> None:
        """Runs of the bucket's pods, each on the node Volcano's score for its first pod
        prefers (see the module docstring); a first pod that fits nowhere is left out."""
        on_node, node_tasks, rows = self.on_node[index], self.node_tasks, self.rows
        start = 0
        while start < len(pods):
            prefix = [[0] * len(self.dims)]
            for pod in pods[start:]:
                prefix.append([a + b for a, b in zip(prefix[-1], self.vector(pod), strict=True)])
            first = [(d, amount) for d, amount in enumerate(prefix[1]) if amount > 0]
            requested = [d for d, amount in enumerate(prefix[-1]) if amount > 0]
            anti = self.buckets.anti_tasks(pods[start].task or "")
            best, best_score, best_run = -1, 0, 0
            for i, row in enumerate(rows):
                for d, amount in first:
                    if row[d] < amount:
                        break
                else:
                    run = _longest_run(prefix, row, requested)
                    score = run + on_node.get(i, 0)
                    counts = node_tasks.get(i) if anti else None
                    if counts:
                        score -= sum(counts.get(task, 0) for task in anti)
                    if (
                        best < 0
                        or score > best_score
                        or (
                            score == best_score
                            and _tighter(row, prefix[run], rows[best], prefix[best_run])
                        )
                    ):
                        best, best_score, best_run = i, score, run
            if best < 0:
                start += 1
                continue
            for pod in pods[start : start + best_run]:
                self._take(pod, best, index)
            start += best_run

    def _take(self, pod: PodRecord, node: int, bucket: int) -> None:
        self.slots[pod.key] = self.names[node]
        row = self.rows[node]
        for d, amount in enumerate(self.vector(pod)):
            row[d] -= amount
        if bucket >= 0:
            self.on_node[bucket][node] = self.on_node[bucket].get(node, 0) + 1
        if pod.task:
            counts = self.node_tasks.setdefault(node, {})
            counts[pod.task] = counts.get(pod.task, 0) + 1

    def plan(self) -> Plan:
        slots = dict(self.slots)
        return Plan(
            ok=True,
            slots=slots,
            used=slot_usage(slots, self.requests),
            placed=len(slots),
        )
