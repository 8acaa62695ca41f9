"""How a scheduling pass's cost grows with the backlog: the extender's pass (its session over the
cache and its facts, the decisions applied) in process, with nothing changed and after one
change.

    .venv/bin/python -m bench.pass_scaling

A cluster cache of 100 queues (capability 8 cpu each, every one full of running one-pod gangs)
and 1k, 10k or 50k waiting one-pod gangs spread over them, each refused by its queue's
capability; `vulcan extender`'s `GangScheduler` over it, memo on. After the passes that settle
it (every gang decided once, the running ones adopted), each figure is the median of repeated
passes:

- `idle_pass_ms_<n>`: a pass with nothing changed (the 1 s floor's pass of a quiet cluster);
- `changed_pass_ms_10k`: the pass after one running gang of one queue finished (its queue, and
  only what the change can affect, is decided again; one waiting gang takes its place).

The baseline of the BENCH lines is the same run's 1k figure (and, for the changed pass, a pass
over the same 10k backlog with the memo off: what a pass costs when it decides everything).

Last line: `idle_pass_ms_1k=… idle_pass_ms_10k=… idle_pass_ms_50k=… changed_pass_ms_10k=…`
(targets: idle_pass_ms_50k <= 2 and <= 1.5 x idle_pass_ms_1k; changed_pass_ms_10k <= 20).
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from typing import Any

from core.cache import ClusterCache
from core.records import NodeRecord, PodGroupRecord, PodRecord, QueueRecord
from extender.gang_options import GangOptions
from extender.gangs import GangScheduler
from extender.ledger import GangLedger

QUEUES = 100
QUEUE_CPU = 8
NODE_CPU = 64


def _node(name: str) -> NodeRecord:
    return NodeRecord(
        {
            "metadata": {"name": name},
            "status": {
                "allocatable": {"cpu": str(NODE_CPU), "memory": "512Gi", "pods": "500"},
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        }
    )


def _queue(name: str) -> QueueRecord:
    return QueueRecord(
        {
            "metadata": {"name": name, "uid": f"uid-{name}"},
            "spec": {"weight": 1, "capability": {"cpu": str(QUEUE_CPU)}},
            "status": {"state": "Open"},
        }
    )


def _group(name: str, queue: str, phase: str) -> PodGroupRecord:
    return PodGroupRecord(
        {
            "metadata": {
                "name": name,
                "namespace": "bench",
                "uid": f"uid-{name}",
                "creationTimestamp": "2026-01-01T00:00:00Z",
            },
            "spec": {"queue": queue, "minMember": 1, "minResources": {"cpu": "1"}},
            "status": {"phase": phase},
        }
    )


def _pod(name: str, group: str, node: str | None, phase: str) -> PodRecord:
    spec: dict[str, Any] = {
        "schedulerName": "volcano",
        "containers": [{"name": "c", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}],
    }
    if node is not None:
        spec["nodeName"] = node
    return PodRecord(
        {
            "metadata": {
                "name": name,
                "namespace": "bench",
                "uid": f"uid-{name}",
                "annotations": {"scheduling.k8s.io/group-name": group},
            },
            "spec": spec,
            "status": {"phase": phase},
        }
    )


def _commit(_args: Any) -> None:
    return None


def cluster(waiting: int, memo: str = "on") -> tuple[ClusterCache, GangScheduler]:
    """The cache and the extender's gang scheduler, settled (see the module docstring)."""
    cache = ClusterCache()
    running = QUEUES * QUEUE_CPU
    for index in range(running * 2 // NODE_CPU + 1):
        cache.on_node_add(_node(f"n{index}"))
    for q in range(QUEUES):
        cache.on_queue_add(_queue(f"q{q}"))
        for r in range(QUEUE_CPU):
            name = f"run-{q}-{r}"
            cache.on_podgroup_add(_group(name, f"q{q}", "Running"))
            cache.on_pod_add(
                _pod(f"{name}-0", name, f"n{(q * QUEUE_CPU + r) // NODE_CPU}", "Running")
            )
    for index in range(waiting):
        name = f"wait-{index}"
        cache.on_podgroup_add(_group(name, f"q{index % QUEUES}", "Pending"))
        cache.on_pod_add(_pod(f"{name}-0", name, None, "Pending"))
    cache.synced.set()
    gangs = GangScheduler(
        cache, GangLedger(cache.bump_node), None, _commit, options=GangOptions(memo=memo)
    )
    for _ in range(3):
        gangs.schedule_pass()
    return cache, gangs


def timed(gangs: GangScheduler, repeats: int) -> float:
    """The median pass, in ms."""
    took = []
    for _ in range(repeats):
        started = time.perf_counter()
        gangs.schedule_pass()
        took.append((time.perf_counter() - started) * 1000)
    return statistics.median(took)


def changed_pass(waiting: int, repeats: int) -> float:
    """The pass after one running gang of one queue finished, median over fresh clusters' worth
    of changes (each repeat finishes another gang)."""
    cache, gangs = cluster(waiting)
    took = []
    for repeat in range(repeats):
        q = repeat % QUEUES
        name = f"run-{q}-{repeat // QUEUES}"
        pod = cache.pods[f"bench/{name}-0"]
        cache.on_pod_update(pod, _pod(f"{name}-0", name, pod.node, "Succeeded"))
        started = time.perf_counter()
        gangs.schedule_pass()
        took.append((time.perf_counter() - started) * 1000)
        gangs.schedule_pass()  # its consequences (an admission applied) settle
    return statistics.median(took)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.pass_scaling", description=__doc__)
    parser.add_argument("--repeats", type=int, default=21, help="passes per figure (21)")
    args = parser.parse_args(argv)
    gc.freeze()  # as the extender does after its initial sync
    idle: dict[str, float] = {}
    for label, waiting in (("1k", 1_000), ("10k", 10_000), ("50k", 50_000)):
        _, gangs = cluster(waiting)
        idle[label] = timed(gangs, args.repeats)
        print(f"idle pass with {waiting} waiting gangs: {idle[label]:.3f} ms", flush=True)
    changed = changed_pass(10_000, args.repeats)
    print(f"pass after one gang finished, 10000 waiting: {changed:.3f} ms", flush=True)
    _, everything = cluster(10_000, memo="off")
    full = timed(everything, 3)
    print(f"pass deciding everything (memo off), 10000 waiting: {full:.3f} ms", flush=True)
    print(
        f"BENCH scheduler.idle_pass_50k value={idle['50k']:.3f} unit=ms "
        f"baseline={idle['1k']:.3f} ratio={idle['50k'] / idle['1k']:.3f}"
    )
    print(
        f"BENCH scheduler.changed_pass_10k value={changed:.3f} unit=ms "
        f"baseline={full:.3f} ratio={changed / full:.3f}"
    )
    print(
        f"idle_pass_ms_1k={idle['1k']:.3f} idle_pass_ms_10k={idle['10k']:.3f} "
        f"idle_pass_ms_50k={idle['50k']:.3f} changed_pass_ms_10k={changed:.3f}",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
