"""The bind barrier ("virtual Permit"): a gang member's bind request is
held open until the gang has quorum, then every held Binding is created at once, so no gang is
ever partially bound by us.

Why holding works: kube-scheduler keeps a pod "assumed" (its capacity counted on the chosen node)
for as long as the bind request is in flight, so a held request is a
capacity reservation in kube-scheduler's own view. A bind error makes kube-scheduler forget the
pod and requeue it, which is how a timed-out or released hold gives its capacity back.

Rules, per group (`GangRequirement.key`, "namespace/name"):

- Quorum: held members + `already_bound` >= `min_member`, and for every task in
  `min_task_member` its held + bound members reach its minimum. Then the held Bindings are created
  concurrently by one burst task and each held request gets its own result.
- Quorum follows Volcano's rule for task minimums (`plugins.model.gang.quorum_shortfall`): they are
  judged only when minMember >= their sum, else minMember alone decides (a job whose tasks start
  one after another by `dependsOn` has later tasks whose pods do not exist yet).
- Once a group has reached quorum it is "committed": later members (beyond quorum, or retries)
  bind at once, for as long as the gang stays whole. `uncommit()` returns it to all-or-nothing
  (the extender calls it when the gang's live bound or binding members fall below its minimum:
  evicted, deleted, failed, its node gone, its job restarted; `extender.gang_quorum`);
  `forget()` drops everything (PodGroup deleted or re-created). `placing()` names the members
  this barrier bound or is binding since the commit, which the API may not show bound yet.
- Partial commit failure (rule 2): the members whose Binding failed get their error, the others
  succeed, and the group stays committed. A Binding cannot be undone and the bound members are
  already running as a gang that reached quorum; the failed members are requeued by
  kube-scheduler and must join that running gang at once instead of waiting for a new quorum
  that would count the running members twice. Only when *every* Binding of the burst failed
  (nothing is bound, e.g. the whole gang was deleted) is the quorum state reset.
- Timeout: one timer per group, started by its first held member (the gang as a whole waits, not
  each member). When it fires every held member fails with a message saying what was missing and
  the group backs off for `backoff` seconds; binds arriving during the backoff fail at once.
- Disconnect: a held request that is cancelled (aiohttp cancels the handler when kube-scheduler's
  client gives up or kube-scheduler restarts) means kube-scheduler forgot that pod, so the quorum
  is gone: every other held member of the group fails and no Binding is created.
- Same pod held twice (rule 5): the newer request replaces the older, which fails with
  "superseded by a newer bind request". kube-scheduler only sends a second bind for a pod after it
  gave up on the first (timeout, error) and forgot it, so the old request is a zombie whose answer
  nobody reads; sharing its slot would let a dead connection count toward quorum. Members are
  keyed by namespace/name, so a pod recreated under the same name (new UID) also replaces the
  old one instead of being counted twice.
- The commit phase is atomic from the barrier's view: once the burst started, releases,
  timeouts and disconnects no longer touch it; it runs to completion in its own task. A member
  whose request went away during the burst may therefore still be bound; kube-scheduler handles
  that (a pod found bound is not requeued, a requeued one gets "already bound" = success).

The barrier does not own the ledger: the caller releases reservations and records Events from
`on_event(group_key, reason, message)` with reason "Holding" (the first member of a hold),
"Held" (every member), "Committed", "TimedOut", "Released", "CommitFailed" or "Broken" (a
committed gang returned to all-or-nothing by `uncommit`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from extender.binder import BindError
from extender.gang_hold import GangHold, GangRequirement, HeldMember
from extender.protocol import BindingArgs

log = logging.getLogger("vulcan.extender.barrier")

EventHook = Callable[[str, str, str], None]


class BindBarrier:
    def __init__(
        self,
        commit: Callable[[BindingArgs], Awaitable[str | None]],
        *,
        default_timeout: float = 60.0,
        backoff: float = 10.0,
        max_timeout: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        on_event: EventHook | None = None,
    ) -> None:
        """`commit` creates one Binding (Binder.bind) and raises BindError.

        `max_timeout` caps per-group timeouts from annotations: a group may not wait longer than
        kube-scheduler keeps the bind request open. `clock` measures backoffs (so they can be
        read and tested without waiting); hold timeouts are timers of the event loop.
        """
        self._commit = commit
        self._default_timeout = default_timeout
        self._max_timeout = max_timeout
        self._backoff = backoff
        self._clock = clock
        self.on_event = on_event
        self._groups: dict[str, GangHold] = {}
        # Strong references: the loop keeps only weak ones to tasks.
        self._bursts: set[asyncio.Task[None]] = set()

    # ------------------------------------------------------------------------------ queries

    def held(self, group_key: str) -> int:
        group = self._groups.get(group_key)
        return len(group.members) if group else 0

    def holding(self) -> bool:
        """Whether any bind is held right now."""
        return any(group.members for group in self._groups.values())

    def holds(self) -> dict[str, int]:
        return {key: len(g.members) for key, g in self._groups.items() if g.members}

    def backing_off(self, group_key: str) -> float:
        group = self._groups.get(group_key)
        if group is None:
            return 0.0
        left = group.backoff_until - self._clock()
        if left > 0:
            return left
        self._drop_if_idle(group)
        return 0.0

    def now(self) -> float:
        """This barrier's clock (backoffs are measured on it)."""
        return self._clock()

    def backoffs(self) -> dict[str, float]:
        """group -> when (on this barrier's clock) its backoff ends, for every group backing
        off now."""
        now = self._clock()
        return {key: g.backoff_until for key, g in self._groups.items() if g.backoff_until > now}

    def backoff_ends(self, group_key: str) -> float | None:
        """When (on this barrier's clock) the group's current backoff ends; None when it is not
        backing off. Stable for the whole backoff, unlike `backing_off`'s countdown."""
        group = self._groups.get(group_key)
        if group is None or group.backoff_until <= self._clock():
            return None
        return group.backoff_until

    def committed(self, group_key: str) -> bool:
        group = self._groups.get(group_key)
        return group is not None and group.committed

    def placing(self, group_key: str) -> dict[str, str]:
        """pod -> UID of the members this barrier bound or is binding since the group
        committed (a copy); `settled` drops those the caller has seen bound or gone."""
        group = self._groups.get(group_key)
        return dict(group.placing) if group is not None else {}

    def settled(self, group_key: str, pods: list[str]) -> None:
        group = self._groups.get(group_key)
        if group is not None:
            for pod in pods:
                group.placing.pop(pod, None)

    def hold_of(self, group_key: str) -> tuple[list[str], float, float] | None:
        """(held pods, the hold's timeout, seconds left) while the group holds binds (the
        extender's debug view); None otherwise."""
        group = self._groups.get(group_key)
        if group is None or group.timer is None:
            return None
        left = max(0.0, group.timer.when() - asyncio.get_running_loop().time())
        return list(group.members), group.timeout, left

    def effective_timeout(self, requested: float | None) -> float:
        """How long a hold of a gang asking for `requested` (its annotation) would wait."""
        timeout = requested if requested is not None and requested > 0 else self._default_timeout
        return timeout if self._max_timeout is None else min(timeout, self._max_timeout)

    # ------------------------------------------------------------------------------ hold

    async def hold(self, group: GangRequirement, args: BindingArgs, task: str | None) -> str:
        """Return once this member's Binding exists (how: "bound", "already_bound"); raise
        BindError on timeout, release, supersession, backoff or commit failure, its `result`
        saying which. Cancellation releases the whole hold."""
        key = group.key
        state = self._groups.get(key)
        if state is not None and state.committed:
            # Beyond quorum, or a retry of a member of a running gang: bind now.
            pod = f"{args.pod_namespace}/{args.pod_name}"
            state.placing[pod] = args.pod_uid
            try:
                result = await self._commit(args)
            except BaseException:
                if state.placing.get(pod) == args.pod_uid:
                    del state.placing[pod]
                raise
            state.bound += 1
            return result or "bound"
        left = self.backing_off(key)
        if left > 0:
            raise BindError(
                f"gang {key}: backing off for {left:.3g}s after a timeout", "gang_backoff"
            )
        state = self._groups.get(key)
        if state is None:
            state = self._groups[key] = GangHold(key, group)
        state.requirement = group  # the newest view of bound members and minimums wins

        member = HeldMember(args, task, asyncio.get_running_loop().create_future())
        previous = state.members.pop(member.pod, None)
        if previous is not None:
            state.uncount(previous)
            previous.fail(
                BindError(f"{previous.pod}: superseded by a newer bind request", "superseded"),
            )
        state.members[member.pod] = member
        if task is not None:
            state.held_per_task[task] = state.held_per_task.get(task, 0) + 1
        if state.timer is None:
            self._start_timer(state)
            self._emit(
                key,
                "Holding",
                f"{member.pod} holds its bind on {args.node}: the gang's binds wait until it has "
                f"quorum, at most {state.timeout:g}s ({state.count_text()})",
            )
        self._emit(
            key, "Held", f"{member.pod} holds its bind on {args.node} ({state.count_text()})"
        )

        if state.quorum():
            self._start_burst(state)
        try:
            # Shielded: a cancelled caller must not cancel the future the burst will answer.
            return await asyncio.shield(member.future)
        except asyncio.CancelledError:
            if self._groups.get(key) is state and state.members.get(member.pod) is member:
                # Still held (not yet in a burst): kube-scheduler forgot this pod.
                self._release(state, f"member {member.pod} went away", skip=member)
            raise

    # ------------------------------------------------------------------------------ release

    def release(self, group_key: str, reason: str, result: str = "gang_released") -> None:
        """Fail every held member of the group now (reservation lost, PodGroup deleted, gang
        broken: `result` is the bind result label). A commit burst already running is not
        affected."""
        state = self._groups.get(group_key)
        if state is not None and state.members:
            self._release(state, reason, result=result)

    def adopt(self, group_key: str) -> None:
        """Mark a group committed that is placed whole without a commit of this barrier (bound
        before an extender restart): its later members bind at once, and losing members
        returns it to all-or-nothing (`uncommit`) as for any committed group."""
        state = self._groups.get(group_key)
        if state is None:
            state = self._groups[group_key] = GangHold(group_key, GangRequirement(group_key, 0))
        if not state.members:
            state.committed = True

    def uncommit(self, group_key: str, reason: str) -> bool:
        """The committed gang is no longer whole (its live bound and binding members fell below
        its minimum): its next members hold their binds until it has quorum again. Emits
        "Broken" with `reason`; False when the group was not committed. A burst still running
        is not affected (its Bindings were decided while the gang had quorum)."""
        state = self._groups.get(group_key)
        if state is None or not state.committed:
            return False
        state.committed = False
        state.placing.clear()
        state.bound = 0
        self._emit(group_key, "Broken", reason)
        self._drop_if_idle(state)
        return True

    def forget(self, group_key: str) -> None:
        """Drop all state of the group (committed flag, backoff); held members are released."""
        state = self._groups.get(group_key)
        if state is None:
            return
        if state.members:
            self._release(state, "gang state was reset", result="podgroup_recreated")
        self._groups.pop(group_key, None)

    def _release(
        self,
        state: GangHold,
        reason: str,
        skip: HeldMember | None = None,
        result: str = "gang_released",
    ) -> None:
        members = state.take_members()
        message = f"gang {state.key}: released: {reason}"
        for member in members:
            if member is skip:
                member.future.cancel()
            else:
                member.fail(BindError(message, result))
        self._emit(state.key, "Released", f"{message} ({len(members)} held binds failed)")
        self._drop_if_idle(state)

    # ------------------------------------------------------------------------------ timeout

    def _start_timer(self, state: GangHold) -> None:
        timeout = self.effective_timeout(state.requirement.timeout)
        state.timeout = timeout
        state.timer = asyncio.get_running_loop().call_later(timeout, self._on_timeout, state)

    def _on_timeout(self, state: GangHold) -> None:
        state.timer = None
        if self._groups.get(state.key) is not state or not state.members:
            return
        message = (
            f"gang {state.key}: timed out after {state.timeout:g}s waiting for members: "
            f"{state.count_text()}"
        )
        for member in state.take_members():
            member.fail(BindError(message, "gang_timeout"))
        state.backoff_until = self._clock() + self._backoff
        if self._backoff > 0:
            asyncio.get_running_loop().call_later(self._backoff, self._drop_if_idle, state)
        self._emit(state.key, "TimedOut", message)
        self._drop_if_idle(state)

    # ------------------------------------------------------------------------------ commit

    def _start_burst(self, state: GangHold) -> None:
        members = state.take_members()
        # Committed from here on: members arriving during the burst bind at once (a retried pod
        # then shares the Binder's in-flight attempt instead of waiting for a second quorum).
        state.committed = True
        state.bound = 0
        state.placing = {m.pod: m.args.pod_uid for m in members}
        self._emit(state.key, "Committed", f"quorum reached: binding {len(members)} held members")
        burst = asyncio.get_running_loop().create_task(self._burst(state, members))
        self._bursts.add(burst)
        burst.add_done_callback(self._bursts.discard)

    async def _burst(self, state: GangHold, members: list[HeldMember]) -> None:
        # Runs in its own task: a release, timeout or a caller going away must not cancel some
        # Bindings of a burst that already started, or the gang could end up partially bound.
        results = await asyncio.gather(
            *(self._commit(m.args) for m in members), return_exceptions=True
        )
        failures: list[str] = []
        for member, result in zip(members, results, strict=True):
            if isinstance(result, BaseException):
                error = (
                    result if isinstance(result, BindError) else self._unexpected(member, result)
                )
                failures.append(f"{member.pod}: {error}")
                if state.placing.get(member.pod) == member.args.pod_uid:
                    del state.placing[member.pod]
                member.fail(error)
            else:
                state.bound += 1
                if not member.future.done():
                    member.future.set_result(result or "bound")
        if not failures:
            return
        self._emit(
            state.key,
            "CommitFailed",
            f"{len(failures)} of {len(members)} bindings failed: " + "; ".join(failures),
        )
        if state.bound == 0 and self._groups.get(state.key) is state:
            # Nothing of the gang is bound: the next attempt needs a full quorum again.
            state.committed = False
            self._drop_if_idle(state)

    @staticmethod
    def _unexpected(member: HeldMember, exc: BaseException) -> BindError:
        log.error("binding %s failed unexpectedly", member.pod, exc_info=exc)
        return BindError(f"binding {member.pod} failed: {exc!r}")

    def _drop_if_idle(self, state: GangHold) -> None:
        """Forget a group that holds nothing, is not committed and is not backing off, so the
        table only has groups with something going on."""
        if (
            self._groups.get(state.key) is state
            and not state.members
            and not state.committed
            and state.backoff_until <= self._clock()
        ):
            del self._groups[state.key]

    def _emit(self, key: str, reason: str, message: str) -> None:
        if self.on_event is None:
            return
        try:
            self.on_event(key, reason, message)
        except Exception:
            # An Event/metrics hook must not break binding.
            log.exception("barrier event hook failed for %s %s", key, reason)
