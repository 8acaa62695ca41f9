"""How the gang scheduler runs: the extender's flags, grouped (`GangOptions`, with the pass
loop's pacing in `PassPacing` and the events' rate in `EventRate`)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from core.served import ServedPods

__all__ = ["DEFAULT_MEMO", "EventRate", "GangOptions", "PassPacing"]

# The memo's mode when the options name none (the test suite runs its scenarios with each).
DEFAULT_MEMO = "on"


@dataclass(frozen=True, slots=True)
class PassPacing:
    """When passes run: at the latest `period` after the last (a quiet cluster), at the
    earliest `min_pass_interval` after it and `idle_ratio` times its own duration after its end
    (a pass holds the event loop, and kube-scheduler's filter, on its serial path, waits for
    it); `coalesce` while binds are held (a burst of member events in one pass); a plain pod's
    change may wait `plain_pod_delay` (it changes no gang's own inputs, only its queue's numbers
    and its node's room, which no pending decision waits on: hundreds of plain pods a second
    must not each cost a pass); PodGroup status writes are coalesced over `status_interval`."""

    period: float = 1.0
    min_pass_interval: float = 0.0
    idle_ratio: float = 0.0
    coalesce: float = 0.01
    plain_pod_delay: float = 0.0
    status_interval: float = 0.5


@dataclass(frozen=True, slots=True)
class EventRate:
    """Event writes: `qps` steady (0: as fast as the client allows), `burst` above it."""

    qps: float = 0.0
    burst: int = 100


@dataclass(frozen=True, slots=True)
class GangOptions:
    gang_timeout: float = 60.0  # how long held binds wait for the rest of the gang
    backoff: float = 10.0  # how long a gang that timed out waits before it is admitted again
    # How long an admitted gang's members may take to reach filter (0: for ever), `unreached`.
    member_reach_timeout: float = 30.0
    # How long past its grace period a member of a gang short of its quorum may stay
    # terminating before the survivors are evicted (0: never), `plugins.model.stranded`.
    stranded_gang_after: float = 10.0
    pipelined_wait: float = 0.5  # how long filter waits for a member's room being freed
    # The bind entry's managedResources marker (--bind-marker): kube-scheduler binds every pod
    # without it itself, past the gang barrier. None: every bind comes to vulcan.
    bind_marker: str | None = None
    served: ServedPods | None = None  # the pods kube-scheduler sends vulcan (None: all)
    memo: str = dataclasses.field(default_factory=lambda: DEFAULT_MEMO)  # --scheduler-memo
    pacing: PassPacing = PassPacing()
    events: EventRate = EventRate()
