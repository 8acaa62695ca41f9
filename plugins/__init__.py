"""Scheduling policy, pure: no I/O, no asyncio, nothing from the extender, the simulator or the
controllers; only `core` is imported. Laid out as Volcano's scheduler is:

    framework/   the scheduler conf, the plugins combined by tier at each extension point, the
                 session a pass opens on a snapshot, the memo beside it
    actions/     enqueue, allocate, preempt, reclaim, backfill: each reads and changes the session
    builtin/     the plugins a conf names (gang, priority, drf, proportion, capacity, ...)
    model/       what plugins and actions share: gangs, queue shares, feasibility, placement,
                 victims
"""
