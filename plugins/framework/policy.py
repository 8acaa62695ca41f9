"""The conf's plugins, by name and tier, combined at each extension point as Volcano combines
them (pkg/scheduler/framework/session_plugins.go): the `Policy` a scheduler conf builds once
(`plugins.framework.registry.build_policy`) and every pass's session asks.

| extension point | rule |
|---|---|
| job_order_key | the plugins' keys in tier order, then creation, name, UID |
| queue_order | the first plugin's order |
| job_enqueueable | votes: any Reject refuses; a tier with a Permit admits without later tiers |
| open_queues | the queue plugin's share model: proportion, else capacity (else proportion's
  numbers, for status only, booked by the policy itself) |
| job_enqueued, job_allocated, task_allocated, task_deallocated | every plugin (bookkeeping) |
| job_valid | the first failure |
| job_ready, allocatable, preemptive | every plugin must agree |
| overused | any plugin |
| preemptable, reclaimable | within a tier the intersection of the plugins' lists (a plugin may
  abstain); an empty list: no victims; the first tier with a list decides |
| node_scorer | summed over every entry (`plugins.framework.node_order.NodeOrder`); a plugin
  listed twice adds its score twice, as in Volcano; a plugin that would add nothing (`active`
  False: binpack with weight 0) registers none |

Victims: vulcan follows Volcano's code, with its fix for #5896 (conformance abstains when it
removes nothing, so a queue's deserved share, judged by proportion/capacity in a later tier,
still protects it): a victim hook returns None to abstain. Pure: no I/O.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from core.resources import ResourceVector
from plugins.builtin.numaaware import numa_settings
from plugins.framework.config_types import SchedulerConfig
from plugins.framework.extension_points import (
    EXTENSION_POINTS,
    PERMIT,
    REJECT,
    PassState,
    Preemptor,
    Refusal,
    SessionPlugin,
    Vote,
    registers,
)
from plugins.model.gang import GangView
from plugins.model.job_order import JobInput, parse_time
from plugins.model.proportion_shares import proportion_shares
from plugins.model.queue_parts import QueueParts, computed_parts
from plugins.model.queue_share import QueueInput, ShareModel, allocated_from_inqueue
from plugins.model.victims import VictimUnit

__all__ = ["QUEUE_PLUGINS", "Policy"]

# The plugins that build the queues' share model, the first the conf names chosen; their votes
# read only the job and its own queue's numbers.
QUEUE_PLUGINS = ("proportion", "capacity")


@dataclass(frozen=True, slots=True)
class _Entry:
    tier: int
    plugin: Any
    name: str  # as the conf names it


_JOB_FIELDS = tuple(f.name for f in dataclasses.fields(JobInput))

# The extension points the policy asks (score is asked as node_scorer; open_queues and
# configure once, not per pass).
_ASKED = tuple(p for p in EXTENSION_POINTS if p not in ("score", "open_queues", "configure"))


class Policy:
    """The conf's plugins, one instance per name (Volcano keys them by name: a plugin listed
    twice keeps its last entry's arguments), and for each extension point the (tier, plugin)
    entries that register it with its flag on, in conf order. Every plugin passed
    `plugins.framework.extension_points.check_plugin` when the conf was loaded."""

    def __init__(self, config: SchedulerConfig, instances: Mapping[str, Any]) -> None:
        self.config = config
        self.plugins = {name: p for name, p in instances.items() if p is not None}
        # The numa-aware entry, if any: its filter and scores live outside the session's
        # extension points (the extender's verbs and the gang planner's node check ask it).
        self.numa = numa_settings(config, self.plugins)
        self.numa_filters = self.numa is not None and self.numa.filters
        self._hooks: dict[str, list[_Entry]] = {hook: [] for hook in _ASKED}
        for tier_index, tier in enumerate(config.tiers):
            for option in tier.plugins:
                plugin = self.plugins.get(option.name)
                if plugin is None:
                    continue
                for hook in _ASKED:
                    flag = EXTENSION_POINTS[hook].flag
                    if not registers(plugin, hook) and not (
                        hook == "node_scorer" and registers(plugin, "score")
                    ):
                        continue  # (a node-order plugin may define only score(request, node))
                    if flag is not None and not option.is_enabled(flag):
                        continue
                    entries = self._hooks[hook]
                    if hook == "node_scorer":
                        # Every entry adds its score (Volcano's NodeOrderFn loop), unless the
                        # plugin would add nothing.
                        if getattr(plugin, "active", True):
                            entries.append(_Entry(tier_index, plugin, option.name))
                        continue
                    if any(e.plugin is plugin for e in entries):
                        continue  # a plugin listed twice is asked once (Volcano keys by name)
                    entries.append(_Entry(tier_index, plugin, option.name))
                if registers(plugin, "configure"):
                    plugin.configure(option)
        # What each plugin's enqueue vote reads of a job (its `job_fields`; all of it when it
        # does not say): jobs alike in those fields get the same vote from it (overcommit's,
        # on minResources alone, is asked once for every queue's jobs of one size).
        self._vote_fields: dict[str, tuple[str, ...]] = {}
        for entry in self._hooks["job_enqueueable"]:
            declared = getattr(entry.plugin, "job_fields", {}).get("job_enqueueable")
            chosen = declared if declared is not None else _JOB_FIELDS
            self._vote_fields[entry.name] = tuple(sorted(chosen))
        # What each hook's answer reads of the session, all its plugins together (None: one
        # of them does not say).
        self._inputs: dict[str, frozenset[str] | None] = {}
        for hook, entries in self._hooks.items():
            kinds: set[str] | None = set()
            for entry in entries:
                declared = _declared(entry.plugin, hook)
                if declared is None or kinds is None:
                    kinds = None
                else:
                    kinds |= declared
            self._inputs[hook] = frozenset(kinds) if kinds is not None else None
        # Decisions reading a plugin whose answers move with the clock alone are never kept.
        self.clock_dependent = any(
            getattr(plugin, "clock_dependent", False) for plugin in self.plugins.values()
        )
        # The plugin that builds and books the queues' share model (Volcano's proportion and
        # capacity each build their own in OnSessionOpen; vulcan keeps one, proportion's when
        # the conf names both, as Volcano's default conf does).
        self.queue_plugin: Any = next(
            (self.plugins[n] for n in QUEUE_PLUGINS if n in self.plugins), None
        )
        for hook in ("job_allocated", "task_allocated", "task_deallocated"):
            self._hooks[hook] = [
                e
                for e in self._hooks[hook]
                if e.plugin is self.queue_plugin or not registers(e.plugin, "open_queues")
            ]

    # ------------------------------------------------------------------ introspection

    def has(self, name: str) -> bool:
        """The conf names plugin `name`."""
        return name in self.plugins

    def plugins_for(self, hook: str) -> list[SessionPlugin]:
        return [entry.plugin for entry in self._hooks[hook]]

    @property
    def actions(self) -> list[str]:
        return list(self.config.actions)

    @property
    def queue_model(self) -> str:
        """The name of the share model's plugin ("proportion" without either)."""
        return self.queue_plugin.name if self.queue_plugin is not None else "proportion"

    @property
    def hierarchical(self) -> bool:
        return self.queue_plugin is not None and self.queue_plugin.hierarchical

    def open_queues(
        self,
        total: ResourceVector,
        inputs: Sequence[QueueInput],
        parts: QueueParts = computed_parts,
    ) -> ShareModel:
        """The queues' share model for one session (`plugins.model.queue_inputs` gives the
        inputs; `parts`, the memo's layer or none)."""
        if self.queue_plugin is None:
            return proportion_shares(total, inputs, parts)
        return self.queue_plugin.open_queues(total, inputs, parts)

    # ------------------------------------------------------------------ ordering

    def job_order_key(self, job: JobInput, state: PassState) -> tuple[Any, ...]:
        votes = [entry.plugin.job_order_key(job, state) for entry in self._hooks["job_order_key"]]
        return (*votes, parse_time(job.creation), job.key, job.uid)

    def queue_order(self, state: PassState, queues: Iterable[str]) -> list[str]:
        """Queues in QueueOrder: the first queue-order plugin's order, queues it does not know
        after it by name; without one, by name."""
        names = sorted(queues)
        entries = self._hooks["queue_order"]
        if not entries:
            return names
        ordered = entries[0].plugin.queue_order(state)
        seen = set(ordered)
        return [*ordered, *(n for n in names if n not in seen)]

    # ------------------------------------------------------------------ enqueue

    def job_enqueueable(self, job: JobInput, state: PassState) -> str | None:
        """None when the job may be enqueued, else the first rejecting plugin's reason."""
        refusal = self.enqueue_refusal(job, state)
        return refusal.reason if refusal is not None else None

    def enqueue_refusal(self, job: JobInput, state: PassState) -> Refusal | None:
        """`job_enqueueable` with who refused: None when the job may be enqueued."""
        return _tier_refusal(
            self._hooks["job_enqueueable"],
            lambda plugin: plugin.job_enqueueable(job, state),
        )

    def enqueue_walk(
        self, vote: Callable[[str, Any, frozenset[str] | None], Vote]
    ) -> Refusal | None:
        """`enqueue_refusal` with each plugin's vote asked of `vote(name, plugin, inputs)`,
        `inputs` what that plugin's vote reads of the session (the memo keeps each vote on
        its own inputs: one plugin's inputs moving asks that plugin alone again)."""
        return _tier_walk(
            self._hooks["job_enqueueable"],
            lambda e: vote(e.name, e.plugin, _declared(e.plugin, "job_enqueueable")),
        )

    def inputs(self, hook: str) -> frozenset[str] | None:
        """What `hook`'s answer reads of the session (the plugins' `inputs`; None: unknown)."""
        return self._inputs.get(hook)

    def vote_key(self, plugin: str, job: JobInput) -> tuple[Any, ...]:
        """What plugin `plugin`'s enqueue vote reads of `job` (jobs with the same key get the
        same vote from it)."""
        return tuple(getattr(job, name) for name in self._vote_fields[plugin])

    def job_enqueued(self, job: JobInput, state: PassState) -> None:
        for entry in self._hooks["job_enqueued"]:
            entry.plugin.job_enqueued(job, state)

    def job_allocated(self, job: JobInput, held: ResourceVector, state: PassState) -> None:
        for entry in self._hooks["job_allocated"]:
            entry.plugin.job_allocated(job, held, state)
        self._book_without_plugin(job.queue, held, state, job)

    def task_allocated(self, queue: str, request: ResourceVector, state: PassState) -> None:
        for entry in self._hooks["task_allocated"]:
            entry.plugin.task_allocated(queue, request, state)
        self._book_without_plugin(queue, request, state)

    def task_deallocated(self, queue: str, request: ResourceVector, state: PassState) -> None:
        for entry in self._hooks["task_deallocated"]:
            entry.plugin.task_deallocated(queue, request, state)
        if self.queue_plugin is None and state.model is not None:
            state.model.on_released(queue, request)

    def _book_without_plugin(
        self, queue: str, amount: ResourceVector, state: PassState, job: JobInput | None = None
    ) -> None:
        """Without a queue plugin the numbers are still reported: the session books them."""
        if self.queue_plugin is None and state.model is not None:
            state.model.on_allocated(queue, amount)
            if job is not None:
                allocated_from_inqueue(state.model, queue, job.inqueue, amount)

    # ------------------------------------------------------------------ the gang

    def job_valid(self, view: GangView) -> str | None:
        for entry in self._hooks["job_valid"]:
            reason = entry.plugin.job_valid(view)
            if reason is not None:
                return reason
        return None

    def job_ready(self, view: GangView) -> bool:
        return all(e.plugin.job_ready(view) for e in self._hooks["job_ready"])

    def job_pipelined(self, view: GangView, job: JobInput, state: PassState) -> bool:
        return (
            _tier_votes(
                self._hooks["job_pipelined"],
                lambda plugin: plugin.job_pipelined(view, job, state),
            )
            is None
        )

    def job_starving(self, view: GangView) -> bool:
        """Within the first tier that registers a starving fn, all must say so; none: False."""
        entries = self._hooks["job_starving"]
        if not entries:
            return False
        tier = entries[0].tier
        return all(e.plugin.job_starving(view) for e in entries if e.tier == tier)

    # ------------------------------------------------------------------ queues

    def allocatable(self, queue: str, request: ResourceVector, state: PassState) -> str | None:
        for entry in self._hooks["allocatable"]:
            reason = entry.plugin.allocatable(queue, request, state)
            if reason is not None:
                return reason
        return None

    def overused(self, queue: str, state: PassState) -> bool:
        return any(e.plugin.overused(queue, state) for e in self._hooks["overused"])

    def preemptive(self, queue: str, request: ResourceVector, state: PassState) -> bool:
        return all(e.plugin.preemptive(queue, request, state) for e in self._hooks["preemptive"])

    # ------------------------------------------------------------------ victims

    def preemptable(
        self, preemptor: Preemptor, candidates: Sequence[VictimUnit], state: PassState
    ) -> list[VictimUnit]:
        return self._victims("preemptable", preemptor, candidates, state)

    def reclaimable(
        self, preemptor: Preemptor, candidates: Sequence[VictimUnit], state: PassState
    ) -> list[VictimUnit]:
        return self._victims("reclaimable", preemptor, candidates, state)

    def _victims(
        self,
        hook: str,
        preemptor: Preemptor,
        candidates: Sequence[VictimUnit],
        state: PassState,
    ) -> list[VictimUnit]:
        """Volcano's Preemptable/Reclaimable walk (session_plugins.go): per tier, the
        intersection of the non-abstaining plugins' lists; the first tier with a list decides.
        An empty list means no victims at all. Volcano's code
        instead only ends that tier and asks the next, so a later tier's plugin could hand
        over what conformance just refused (critical pods): vulcan follows the spec."""
        entries = self._hooks[hook]
        tiers = sorted({e.tier for e in entries})
        for tier in tiers:
            victims: list[VictimUnit] | None = None
            for entry in entries:
                if entry.tier != tier:
                    continue
                ask = (
                    entry.plugin.preemptable if hook == "preemptable" else entry.plugin.reclaimable
                )
                listed = ask(preemptor, candidates, state)
                if listed is None:
                    continue  # abstains
                if not listed:
                    return []
                if victims is None:
                    victims = list(listed)
                else:
                    keep = {id(unit) for unit in listed}
                    victims = [unit for unit in victims if id(unit) in keep]
            if victims is not None:
                return victims
        return []


def _tier_votes(entries: Sequence[_Entry], ask: Callable[[SessionPlugin], Vote]) -> str | None:
    refusal = _tier_refusal(entries, ask)
    return refusal.reason if refusal is not None else None


def _tier_refusal(
    entries: Sequence[_Entry], ask: Callable[[SessionPlugin], Vote]
) -> Refusal | None:
    return _tier_walk(entries, lambda entry: ask(entry.plugin))


def _declared(plugin: Any, hook: str) -> frozenset[str] | None:
    """What `plugin`'s answer to `hook` reads of the session (None: it does not say)."""
    return getattr(plugin, "inputs", {}).get(hook)


def _tier_walk(entries: Sequence[_Entry], ask: Callable[[_Entry], Vote]) -> Refusal | None:
    """Volcano's vote walk (JobEnqueueable, JobPipelined): any Reject refuses at once (its
    reason); a tier holding a Permit admits without asking later tiers; all abstain admits."""
    tier: int | None = None
    permitted = False
    for entry in entries:
        if entry.tier != tier:
            if permitted:
                return None
            tier = entry.tier
        vote = ask(entry)
        if vote.verdict == REJECT:
            reason = vote.reason or f"refused by {entry.name}"
            return Refusal(reason, entry.name, entry.tier == entries[0].tier)
        if vote.verdict == PERMIT:
            permitted = True
    return None
