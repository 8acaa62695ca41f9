"""What the bind barrier (`extender.barrier`) holds: a gang's requirement (`GangRequirement`),
its held binds (`GangHold`, `HeldMember`), and the check that kube-scheduler's bind timeout
leaves the gang its whole waiting time (`check_timeouts`)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field

from extender.binder import BindError
from extender.protocol import BindingArgs
from plugins.model.gang import quorum_shortfall

# kube-scheduler applies 5s when an extender entry leaves httpTimeout unset or 0.
KUBE_DEFAULT_HTTP_TIMEOUT = 5.0


@dataclass(frozen=True, slots=True)
class GangRequirement:
    """What a group needs before its held binds may be committed, as known at the time of a bind.

    `already_bound*` count members bound before this hold started (after an extender restart, or
    members bound in an earlier commit) so they count toward quorum without being held.
    """

    key: str  # "namespace/name" of the PodGroup
    min_member: int
    min_task_member: Mapping[str, int] = field(default_factory=dict)
    timeout: float | None = None  # vulcan.sh/gang-timeout; None (or <= 0) = the default
    already_bound: int = 0
    already_bound_per_task: Mapping[str, int] = field(default_factory=dict)


def check_timeouts(gang_timeout: float, bind_http_timeout: float | None) -> str | None:
    """A warning when kube-scheduler would give up on a held bind before the gang times out.

    If the bind entry's httpTimeout is not longer than the gang timeout, kube-scheduler closes the
    held requests first: every hold then ends as a disconnect instead of a clean timeout answer,
    and the gang never gets its full waiting time.
    """
    http = bind_http_timeout or KUBE_DEFAULT_HTTP_TIMEOUT
    if http > gang_timeout:
        return None
    shown = "unset (5s)" if not bind_http_timeout else f"{http:g}s"
    return (
        f"bind httpTimeout {shown} is not longer than the gang timeout {gang_timeout:g}s: "
        "kube-scheduler will drop held binds before the gang times out; set the bind extender's "
        "httpTimeout above the gang timeout plus the time the Binding calls take"
    )


@dataclass(slots=True)
class HeldMember:
    """One member's bind, held until its gang has quorum."""

    args: BindingArgs
    task: str | None
    future: asyncio.Future[str]  # the bind result label when its Binding exists

    @property
    def pod(self) -> str:
        return f"{self.args.pod_namespace}/{self.args.pod_name}"

    def fail(self, error: BindError) -> None:
        """Answer the held request with `error` (once)."""
        if self.future.done():
            return
        self.future.set_exception(error)
        # Mark retrieved: the caller may have gone away, and nobody else reads it.
        self.future.exception()


@dataclass(slots=True)
class GangHold:
    """One gang's held binds at the barrier."""

    key: str
    requirement: GangRequirement
    # pod "namespace/name" -> held member; dict order = arrival order.
    members: dict[str, HeldMember] = field(default_factory=dict)
    # task -> held members of that task, kept in step with `members` so the quorum check does not
    # walk the members.
    held_per_task: dict[str, int] = field(default_factory=dict)
    timer: asyncio.TimerHandle | None = None
    timeout: float = 0.0  # of the running timer, for the message
    committed: bool = False
    bound: int = 0  # Bindings created since the group became committed
    # pod "namespace/name" -> UID of the members bound (or being bound) since the commit: the
    # API (and so the cache) shows them bound only a moment later.
    placing: dict[str, str] = field(default_factory=dict)
    backoff_until: float = 0.0

    def shortfall(self) -> tuple[int, dict[str, tuple[int, int]]]:
        """How many members, and per task (have, minimum), the hold still lacks for quorum."""
        need = self.requirement
        bound = need.already_bound_per_task
        have_per_task = {
            task: self.held_per_task.get(task, 0) + bound.get(task, 0)
            for task in need.min_task_member
        }
        return quorum_shortfall(
            need.min_member,
            need.min_task_member,
            len(self.members) + need.already_bound,
            have_per_task,
        )

    def quorum(self) -> bool:
        short, tasks = self.shortfall()
        return short == 0 and not tasks

    def take_members(self) -> list[HeldMember]:
        """Empty the hold: the members leave it (for a burst, a timeout or a release)."""
        members = list(self.members.values())
        self.members.clear()
        self.held_per_task.clear()
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        return members

    def uncount(self, member: HeldMember) -> None:
        if member.task is None:
            return
        left = self.held_per_task.get(member.task, 0) - 1
        if left > 0:
            self.held_per_task[member.task] = left
        else:
            self.held_per_task.pop(member.task, None)

    def count_text(self) -> str:
        """What the hold has and lacks, e.g. "3/4 members hold binds (task worker 2/3)", or
        once minMember is reached but a task is still short, "5 members hold binds, minMember
        4 reached; task ps has 0 of its 1"."""
        need = self.requirement
        have = len(self.members) + need.already_bound
        short, tasks = self.shortfall()
        text = f"{have}/{need.min_member}" if short else str(have)
        text += " members hold binds"
        if need.already_bound:
            text += f" or are bound ({need.already_bound} bound)"
        if not short:
            text += f", minMember {need.min_member} reached"
        if tasks:
            parts = [f"task {task} {got}/{minimum}" for task, (got, minimum) in tasks.items()]
            text += f" ({', '.join(parts)})" if short else f"; still short: {', '.join(parts)}"
        return text
