"""The memo's job order (plugins.framework.memo.Memo.job_order) is the order a session computes
afresh (plugins.framework.traversal.job_order), pass after pass while gangs in the queue are
bound, added, deleted and the cluster grows: it re-ranks only what changed, starting from the
last order, and must never keep a stale place."""

from __future__ import annotations

import random

from core.cache import ClusterCache
from plugins.framework.memo import Memo
from plugins.framework.run import open_session
from plugins.framework.traversal import job_order
from tests.session_harness import given
from tests.unit.test_memo_property import POLICY, group, member, node, queue


def test_the_memo_keeps_the_job_order_a_fresh_session_computes() -> None:
    rng = random.Random(7)
    cache = ClusterCache()
    cache.on_node_add(node("n0", 64))
    cache.on_queue_add(queue("q", 1, None))
    names = [f"g{index:02d}" for index in range(40)]
    for name in names:
        size = rng.randint(1, 3)
        cache.on_podgroup_add(group(name, "q", size, rng.randint(1, 2), "Inqueue", False))
        for m in range(size):
            cache.on_pod_add(member(f"{name}-{m}", name, 1, rng.randint(0, 2), None))
    memo = Memo()
    orders = []
    for step in range(12):
        memo.changed(cache.take_dirty_groups())
        ssn = open_session(given(cache.live_view()), POLICY, memo)
        memo.start(ssn)
        kept, fresh = memo.job_order(ssn, "q"), job_order(ssn, "q")
        assert kept == fresh, step
        orders.append(fresh)
        memo.finish(ssn)
        # Between passes: a gang's member bound (the gang plugin ranks by readiness), a gang
        # deleted, one added, and now and then a node more (drf divides by the total).
        live = [k.split("/")[1] for k in fresh]
        bound = rng.choice(live)
        pod = cache.pods[f"ns/{bound}-0"]
        if not pod.node:
            cache.on_pod_add(member(f"{bound}-0", bound, 1, pod.priority, "n0"))
        gone = rng.choice([name for name in live if name != bound])
        for m in range(3):
            found = cache.pods.get(f"ns/{gone}-{m}")
            if found is not None:
                cache.on_pod_delete(found)
        cache.on_podgroup_delete(cache.podgroups[f"ns/{gone}"])
        late = f"late{step:02d}"
        cache.on_podgroup_add(group(late, "q", 1, 1, "Inqueue", False))
        cache.on_pod_add(member(f"{late}-0", late, 1, rng.randint(0, 2), None))
        if step % 4 == 3:
            cache.on_node_add(node(f"n{step}", 32))
    # The order did move: the test compared orders that changed, not one order kept.
    assert len({tuple(order) for order in orders}) > 6
