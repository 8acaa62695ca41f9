"""The soak's invariant checker: fed the objects the watches deliver (and a clock), it keeps each
invariant's open episodes and turns the ones that last too long into `Violation`s.

Pure: no I/O, time passed in, so unit tests drive it with synthetic event sequences.

Invariants (limits in `Limits`, each a flag of `python -m bench.soak`):
- partial gang: 0 < live bound members < minMember (live: bound, not terminating, not finished)
  for longer than `partial_window` when the gang got there by binding (members bound
  piecemeal), or longer than `loss_window` when it got there by losing members of a Volcano
  Job (its controller must make the gang whole again). A bare-pod gang that lost members (no
  controller makes its pods again) and a gang whose members are finishing are not partial
  placements and are only counted;
- queue over capability and node overcommitted: `bench.soak_room`;
- stall, and jobs reaching a final phase: `bench.soak_progress` (evaluated at each tick);
- needless eviction: `bench.soak_evictions` (evaluated at each tick);
- domain split and partial subgroup: `bench.soak_domains` (with each gang's check).
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass, field

from bench.soak_domains import DOMAIN_SPLIT, PARTIAL_SUBGROUP, check_domains
from bench.soak_evictions import EvictionLedger, evicted_for
from bench.soak_model import (
    JOB_FINAL,
    TERMINAL,
    Group,
    HyperNodeRecord,
    Job,
    Node,
    Pod,
    Queue,
)
from bench.soak_progress import PASSING_PHASES, check_jobs, check_stalls
from bench.soak_room import check_node, check_queues
from core.hypernode_tree import EMPTY_TREE, HyperNodeTree, build_tree

# A job's gang in these phases is being taken down or finished by its controller on purpose.
TEARDOWN_PHASES = (*PASSING_PHASES, *JOB_FINAL)


# Episodes of a gang partly placed: their time is measured in worst_partial_s.
PARTIAL_KINDS = ("partial-gang", PARTIAL_SUBGROUP, DOMAIN_SPLIT)

# A scheduling pass the extender's memo decided otherwise than a pass without it
# (`vulcan extender --scheduler-memo=check`).
MEMO_DIVERGENCE = "memo-divergence"


@dataclass(slots=True)
class Limits:
    partial_window: float = 5.0
    loss_window: float = 60.0
    capacity_grace: float = 1.0
    stall_after: float = 60.0
    job_final_after: float = 30.0
    eviction_paid_within: float = 30.0


@dataclass(slots=True)
class Violation:
    kind: str
    subject: str
    since: float
    seen: float  # when the checker knew (the limit passed)
    detail: str
    until: float | None = None  # when the episode ended (None: still on at the end)

    def describe(self, origin: float = 0.0) -> str:
        end = "still on" if self.until is None else f"until t={self.until - origin:.1f}s"
        lasted = f"{(self.until or self.seen) - self.since:.1f}s"
        return (
            f"VIOLATION {self.kind} {self.subject}: from t={self.since - origin:.1f}s "
            f"{end} (>= {lasted}): {self.detail}"
        )


@dataclass(slots=True)
class Episode:
    since: float
    cause: str = ""
    limit: float = 0.0
    violation: Violation | None = None
    counted: bool = True  # counts towards worst_partial_s
    why: str = ""  # the latest description of the episode


@dataclass
class Checker:
    limits: Limits = field(default_factory=Limits)
    origin: float = 0.0
    pods: dict[str, Pod] = field(default_factory=dict)
    groups: dict[str, Group] = field(default_factory=dict)
    queues: dict[str, Queue] = field(default_factory=dict)
    nodes: dict[str, Node] = field(default_factory=dict)
    jobs: dict[str, Job] = field(default_factory=dict)
    violations: list[Violation] = field(default_factory=list)
    bound_at: dict[str, tuple[float, str]] = field(default_factory=dict)  # pod uid -> (t, node)
    worst_partial: float = 0.0
    degraded: set[str] = field(default_factory=set)  # bare gangs that lost members
    whole: set[str] = field(default_factory=set)  # gangs seen with minMember live bound
    whole_in_domain: set[str] = field(default_factory=set)  # ... of them with networkTopology
    whole_subgroups: set[str] = field(default_factory=set)  # "<gang> <subgroup>" seen whole
    completed: set[str] = field(default_factory=set)  # bare gangs whose members all succeeded
    # Recent happenings per gang or job (bound counts, phases, evictions), told with violations.
    history: dict[str, deque[tuple[float, str]]] = field(
        default_factory=lambda: defaultdict(lambda: deque(maxlen=24))
    )
    evictions: EvictionLedger = field(default_factory=EvictionLedger)
    last_bind: dict[str, float] = field(default_factory=dict)  # group -> its latest bind
    gone_at: dict[str, float] = field(default_factory=dict)  # deleted pod key -> when
    deleting_at: dict[str, float] = field(default_factory=dict)  # pod key -> seen terminating
    hypernodes: dict[str, HyperNodeRecord] = field(default_factory=dict)
    subgroups_seen: dict[str, set[str]] = field(default_factory=dict)  # gang -> its subgroups
    _tree: HyperNodeTree | None = None  # built from hypernodes and the nodes' labels, cached
    _episodes: dict[tuple[str, str], Episode] = field(default_factory=dict)
    _bound: dict[str, int] = field(default_factory=dict)  # group -> live bound members
    _by_group: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    _by_node: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))

    # ------------------------------------------------------------------ feeding

    def pod(self, key: str, pod: Pod | None, now: float) -> None:
        """A pod was added or changed (`pod`), or deleted (None)."""
        old = self.pods.pop(key, None)
        if pod is None:
            self.gone_at[key] = now
            self.evictions.gone(key, now)
        elif pod.deleting:
            self.deleting_at.setdefault(key, now)
        elif old is None or old.uid != pod.uid:
            self.deleting_at.pop(key, None)  # a new pod under an old name (a job's restart)
        if old is not None:
            self._by_group[old.group].discard(key)
            self._by_node[old.node].discard(key)
        if pod is not None:
            self.pods[key] = pod
            self._by_group[pod.group].add(key)
            self._by_node[pod.node].add(key)
            if pod.node and pod.uid not in self.bound_at:
                self.bound_at[pod.uid] = (now, pod.node)
                if pod.group:
                    self.last_bind[pod.group] = now
        for group in {p.group for p in (old, pod) if p is not None and p.group}:
            self.check_gang(group, now)
        for node in {p.node for p in (old, pod) if p is not None and p.node}:
            check_node(self, node, now)

    def note(self, subject: str, now: float, text: str) -> None:
        self.history[subject].append((now, text))

    def eviction(self, victim: str, note: str, when: float) -> None:
        """vulcan said it evicted pod `victim` at `when` (its event's `note` names the gang it
        was for)."""
        gang = evicted_for(note)
        if gang is not None:
            # The event's time is the evictor's clock, written once the eviction returned; the
            # victim seen terminating (or gone) by the pod watch orders it against the binds
            # that watch saw.
            gone = None if victim in self.pods else self.gone_at.get(victim, when)
            when = min(when, self.deleting_at.get(victim, when), gone or when)
            self.evictions.evicted(victim, gang, when, gone)

    def group(self, key: str, group: Group | None, now: float) -> None:
        old = self.groups.pop(key, None)
        if group is None:
            self.note(key, now, "PodGroup deleted")
        else:
            self.groups[key] = group
            if old is None or old.phase != group.phase:
                self.note(key, now, f"PodGroup phase {group.phase or '-'}")
        self.check_gang(key, now)

    def queue(self, key: str, queue: Queue | None) -> None:
        if queue is None:
            self.queues.pop(key, None)
        else:
            self.queues[key] = queue

    def node(self, key: str, node: Node | None) -> None:
        old = self.nodes.pop(key, None)
        if node is not None:
            self.nodes[key] = node
        if (old is None) != (node is None) or (old and node and old.labels != node.labels):
            self._tree = None

    def hypernode(self, key: str, hypernode: HyperNodeRecord | None) -> None:
        if hypernode is None:
            self.hypernodes.pop(key, None)
        else:
            self.hypernodes[key] = hypernode
        self._tree = None

    @property
    def tree(self) -> HyperNodeTree:
        """The HyperNode tree as the scheduler resolves it (members by name, regex, label)."""
        if self._tree is None:
            specs = {k: r.spec for k, r in self.hypernodes.items() if r.spec is not None}
            labels = {k: n.labels for k, n in self.nodes.items()}
            self._tree = build_tree(specs, labels) if specs else EMPTY_TREE
        return self._tree

    def job(self, key: str, job: Job | None, now: float = 0.0) -> None:
        old = self.jobs.pop(key, None)
        if job is None:
            self.note(key, now, "Job deleted")
        else:
            self.jobs[key] = job
            if old is None or old.phase != job.phase or old.retries != job.retries:
                self.note(key, now, f"Job phase {job.phase or '-'} retryCount {job.retries}")

    def tick(self, now: float) -> None:
        """The invariants that depend on several kinds at once, re-evaluated periodically."""
        for group in list(self.groups):
            self.check_gang(group, now)
        for node in list(self.nodes):
            check_node(self, node, now)
        check_queues(self, now)
        check_stalls(self, now)
        check_jobs(self, now)
        self.evictions.check(self, now)
        self._close_vanished(now)

    def finish(self, now: float) -> None:
        """End of the soak: every open episode is measured as it stands."""
        for (kind, subject), episode in list(self._episodes.items()):
            self._close(kind, subject, episode, now, still_on=True)

    # ------------------------------------------------------------------ episodes

    def record(self, violation: Violation) -> None:
        """A violation seen whole at once (not an episode held over time)."""
        self.violations.append(violation)

    def record_now(self, kind: str, subject: str, since: float, now: float, why: str) -> None:
        self.record(Violation(kind, subject, since, now, why, until=now))

    def hold(self, kind: str, subject: str, on: bool, now: float, limit: float, why: str) -> None:
        """Keep the episode (kind, subject) open while `on`; a violation once it passes
        `limit` (reported once per episode; its detail is refreshed while it lasts)."""
        key = (kind, subject)
        episode = self._episodes.get(key)
        if not on:
            if episode is not None:
                self._close(kind, subject, episode, now, still_on=False)
            return
        if episode is None:
            episode = self._episodes[key] = Episode(since=now, limit=limit)
        episode.limit = limit
        episode.why = why
        if limit <= 0 or now - episode.since > limit:
            if episode.violation is None:
                episode.violation = Violation(kind, subject, episode.since, now, why)
                self.violations.append(episode.violation)
            else:
                episode.violation.detail = why

    def _close(self, kind: str, subject: str, episode: Episode, now: float, still_on: bool) -> None:
        self._episodes.pop((kind, subject), None)
        lasted = now - episode.since
        if kind in PARTIAL_KINDS and episode.counted:
            self.worst_partial = max(self.worst_partial, lasted)
        if episode.violation is None and lasted > episode.limit:
            # Passed its limit between two looks: still a violation.
            episode.violation = Violation(kind, subject, episode.since, now, episode.why)
            self.violations.append(episode.violation)
        if episode.violation is not None and not still_on:
            episode.violation.until = now

    def _close_vanished(self, now: float) -> None:
        """An episode whose subject is gone (a job or gang deleted, a node removed) ends."""
        present = {
            "partial-gang": self.groups,
            "stall": self.groups,
            "node-overcommitted": self.nodes,
            "queue-over-capability": self.queues,
            "job-not-final": self.jobs,
            "job-stuck": self.jobs,
        }
        for kind in PARTIAL_KINDS:
            present[kind] = self.groups
        for (kind, subject), episode in list(self._episodes.items()):
            # (a subgroup's subject is "<gang> <subgroup>")
            if subject.split(" ")[0] not in present.get(kind, {subject: None}):
                self._close(kind, subject, episode, now, still_on=False)

    # ------------------------------------------------------------------ gangs

    def bound(self, group: str) -> int:
        """The gang's live bound members."""
        return self._bound.get(group, 0)

    def members(self, group: str) -> list[Pod]:
        return [self.pods[k] for k in sorted(self._by_group.get(group, ())) if k in self.pods]

    def check_gang(self, key: str, now: float) -> None:
        group = self.groups.get(key)
        members = self.members(key)
        bound = sum(1 for p in members if p.live_bound)
        if bound != self._bound.get(key, 0) and group is not None:
            self.note(key, now, f"{bound}/{group.min_member} live bound")
        if group is not None and bound >= group.min_member:
            self.whole.add(key)
            if group.topology:
                self.whole_in_domain.add(key)
        if (
            group is not None
            and not group.job
            and len(members) >= group.min_member
            and all(p.phase == "Succeeded" for p in members)
        ):
            self.completed.add(key)
        job = self.jobs.get(group.job) if group is not None and group.job else None
        # Members that ran to their end (not taken away), or a job taken down: it is ending.
        finishing = any(
            p.phase in TERMINAL and not p.disruption and not p.deleting for p in members
        ) or (job is not None and job.phase in TEARDOWN_PHASES)
        check_domains(self, key, group, members, finishing, now)
        self.partial_episode(
            "partial-gang",
            key,
            group is not None and 0 < bound < group.min_member and not finishing,
            bound,
            bare=group is not None and not group.job,
            now=now,
            describe=lambda: self._describe_gang(key),
        )

    def partial_episode(
        self,
        kind: str,
        subject: str,
        partial: bool,
        bound: int,
        *,
        bare: bool,
        now: float,
        describe: Callable[[], str],
    ) -> None:
        """A gang's (or subgroup's) partial placement: timed by `partial_window` from a bind
        that left it short, by `loss_window` from a loss (its job's controller makes it whole
        again); a bare gang's loss is only counted (nobody makes a bare pod again)."""
        before = self._bound.get(subject, 0)
        self._bound[subject] = bound
        episode = self._episodes.get((kind, subject))
        if partial and episode is None:
            cause = "bind" if before < bound else "loss"
            if cause == "loss" and bare:
                if kind == "partial-gang":
                    self.degraded.add(subject)
                return
            episode = self._episodes[(kind, subject)] = Episode(since=now, cause=cause)
        elif partial and episode is not None and bound > before:
            if episode.cause == "loss":
                # Its replacements are bound piecemeal: timed from the first of them (not from
                # the loss, which has its own window: a gang made whole at once is fine).
                episode.since = now
            episode.cause = "bind"  # members bound while the gang was short: piecemeal
        if episode is None:
            return
        if partial:
            episode.limit = (
                self.limits.partial_window if episode.cause == "bind" else self.limits.loss_window
            )
        self.hold(kind, subject, partial, now, episode.limit, describe())

    def describe(self, key: str, what: str) -> str:
        """`what` of gang `key`, then the gang as `_describe_gang` tells it."""
        return f"{what}; {self._describe_gang(key)}"

    def _describe_gang(self, key: str) -> str:
        group = self.groups.get(key)
        episode = self._episodes.get(("partial-gang", key))
        parts = []
        if group is not None:
            parts.append(f"minMember={group.min_member} queue={group.queue} phase={group.phase}")
            if group.job:
                job = self.jobs.get(group.job)
                parts.append(f"job={group.job} ({job.phase if job else 'gone'})")
        if episode is not None:
            how = "bound piecemeal" if episode.cause == "bind" else "lost members"
            parts.append(how)
        members = []
        for pod in self.members(key):
            if pod.live_bound:
                t, _ = self.bound_at.get(pod.uid, (0.0, ""))
                members.append(f"{pod.key}@{pod.node} bound t={t - self.origin:.1f}s")
            else:
                state = "terminating" if pod.deleting else pod.phase
                members.append(f"{pod.key} {state}{'@' + pod.node if pod.node else ''}")
        parts.append("members: " + "; ".join(members) if members else "no members")
        parts.append("history: " + self.story(key, group.job if group is not None else ""))
        return ", ".join(parts)

    def story(self, *subjects: str) -> str:
        told = sorted(
            (t, f"{text}" if i == 0 else f"{subjects[i]}: {text}")
            for i, subject in enumerate(subjects)
            if subject
            for t, text in self.history.get(subject, ())
        )
        return "; ".join(f"t={t - self.origin:.1f}s {text}" for t, text in told) or "-"

    def on_node(self, node: str) -> set[str]:
        """The keys of the pods on `node`."""
        return self._by_node.get(node, set())

    def node_up(self, name: str) -> bool:
        node = self.nodes.get(name)
        return node is not None and node.ready
