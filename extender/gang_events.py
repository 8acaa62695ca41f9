"""The bind barrier's events (`extender.barrier.BindBarrier`'s `on_event`) turned into what a
user sees and what the next pass must know: a decision log line for the whole gang, the
PodGroup's and each member's events, a gang timeout counted, and for a hold that ended without
a commit (timed out, released, broken) the gang's placement forgotten so the next pass plans it
again, whole."""

from __future__ import annotations

from collections.abc import Callable

from core.cache import ClusterCache
from core.decisions import decision, gang_decision
from core.kube.events import NORMAL, WARNING
from extender.gang_writer import GangWriter
from extender.metrics import GangMetrics

# The bind barrier's events that are decisions about the whole gang (Held/Holding are per pod).
_BARRIER_DECISIONS = {
    "Committed": "gang bound",
    "TimedOut": "gang binds timed out",
    "Released": "gang binds released",
    "Broken": "gang broken",
    "CommitFailed": "gang commit failed",
}


class BarrierEvents:
    """`on_event(group_key, reason, message)` for the scheduler's bind barrier."""

    def __init__(
        self,
        cache: ClusterCache,
        writer: GangWriter,
        metrics: GangMetrics | None,
        touch: Callable[[str], None],
        ended: Callable[[str, str, str], None],
    ) -> None:
        """`touch(group)`: a decision input of the gang changed; `ended(group, why, result)`:
        its hold ended without a commit, so its placement goes (and a pass follows)."""
        self.cache = cache
        self.writer = writer
        self.metrics = metrics
        self.touch = touch
        self.ended = ended

    def __call__(self, group_key: str, reason: str, message: str) -> None:
        group = self.cache.podgroups.get(group_key)
        holding = reason in ("Held", "Holding")
        if not holding:  # a hold changes nothing a decision or the status reads
            self.touch(group_key)
        said = _BARRIER_DECISIONS.get(reason)
        if said is not None:
            if group is not None:
                gang_decision(said, group, reason=message)
            else:
                decision(said, podgroup=group_key, reason=message)
        if reason == "TimedOut" and group is not None and self.metrics is not None:
            self.metrics.timed_out(group)
        if reason in ("TimedOut", "Released", "Broken"):
            # The hold is gone (or the gang no longer whole): so is the placement. Plan again,
            # for the whole gang (after the backoff of a timeout).
            self.ended(group_key, message, "gang_broken" if reason == "Broken" else "gang_released")
        if reason in ("TimedOut", "Released", "Committed", "Broken"):
            # Each member says it too: `kubectl describe pod` is where a user looks first.
            type_ = NORMAL if reason == "Committed" else WARNING
            for pod_key in self.cache.pods_by_group.get(group_key, ()):
                pod = self.cache.pods.get(pod_key)
                if pod is not None and not pod.terminal:
                    self.writer.pod_event(pod, type_, f"Gang{reason}", message)
        # One PodGroup event when a hold starts, not one per member held: a 1,000-member
        # gang's members say GangCommitted (or TimedOut, Released) when the hold ends.
        if group is not None and reason != "Held":
            self.writer.group_event(
                group,
                WARNING if reason in ("TimedOut", "CommitFailed", "Broken") else NORMAL,
                f"Gang{reason}",
                message,
            )
