"""Volcano's documented scheduler confs (its default, the capacity plugin's, binpack with
weights, task-topology) as a user would pass them to `vulcan extender --config`: each loads, or
is refused by name, and changes what vulcan decides as Volcano's would."""

from __future__ import annotations

from core.cache import ClusterCache
from core.records import PodGroupRecord
from core.resources import ResourceVector
from plugins.actions.whole_gang import allocate_gang
from plugins.framework.config import parse_scheduler_config
from plugins.framework.node_order import Framework
from plugins.framework.policy import Policy
from plugins.framework.registry import build_policy, require_implemented
from plugins.model import gang as gangs
from plugins.model.job_input import job_input
from plugins.model.node_state import NodeState
from tests.session_harness import session
from tests.unit.test_gang_placement import node, pod

VOLCANO_DEFAULT = """\
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
  - name: conformance
- plugins:
  - name: overcommit
  - name: drf
    enablePreemptable: false
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: binpack
"""

CAPACITY = """\
actions: "enqueue, allocate, backfill, reclaim"
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
  - name: conformance
- plugins:
  - name: drf
    enablePreemptable: false
  - name: predicates
  - name: capacity
  - name: nodeorder
  - name: binpack
"""

BINPACK_WEIGHTS = """\
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: drf
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: binpack
    arguments:
      binpack.weight: 10
      binpack.cpu: 5
      binpack.memory: 1
      binpack.resources: nvidia.com/gpu, example.com/foo
      binpack.resources.nvidia.com/gpu: 2
      binpack.resources.example.com/foo: 3
"""

TASK_TOPOLOGY = """\
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: predicates
  - name: nodeorder
  - name: task-topology
    arguments:
      task-topology.weight: 10
"""


def test_volcanos_default_conf() -> None:
    conf = parse_scheduler_config(VOLCANO_DEFAULT)
    require_implemented(conf)
    assert build_policy(conf).queue_model == "proportion"
    session = build_policy(conf)
    assert [p.name for p in session.plugins_for("job_order_key")] == ["priority", "gang", "drf"]
    assert session.plugins["overcommit"].factor == 1.2
    assert Framework(conf).gang_placement == "binpack"
    # Volcano's own default evicts for nothing: no reclaim, no preempt action.
    assert not {"reclaim", "preempt"} & set(conf.actions)


def test_the_capacity_conf_switches_the_share_plugin_and_turns_reclaim_on() -> None:
    conf = parse_scheduler_config(CAPACITY)
    require_implemented(conf)
    assert build_policy(conf).queue_model == "capacity"
    assert "reclaim" in conf.actions and "preempt" not in conf.actions
    assert "overcommit" not in build_policy(conf).plugins  # no overcommit rule there


def test_binpack_weights_change_the_node_scores() -> None:
    gpu = "nvidia.com/gpu"
    weighted = Framework(parse_scheduler_config(BINPACK_WEIGHTS))
    plain = Framework(parse_scheduler_config(VOLCANO_DEFAULT))
    request = ResourceVector({"cpu": 1000, gpu: 1})
    allocatable = ResourceVector({"cpu": 8000, "memory": 32 << 30, gpu: 4})
    # One node's GPUs are busy, the other's cpu: binpack weighted to count GPUs (gpu 2,
    # cpu 5, weight 10) packs the GPU node; the default binpack (cpu and memory only) does not
    # see GPUs and, with nodeorder, prefers the other.
    gpus_busy = NodeState("gpus-busy", allocatable, ResourceVector({gpu: 3}))
    cpu_busy = NodeState("cpu-busy", allocatable, ResourceVector({"cpu": 2000}))
    weighted_scores = weighted.score(request, [gpus_busy, cpu_busy])
    plain_scores = plain.score(request, [gpus_busy, cpu_busy])
    assert weighted_scores[0] > weighted_scores[1]
    assert plain_scores[1] > plain_scores[0]


def test_the_task_topology_conf_loads_and_puts_a_tf_jobs_ps_with_its_workers() -> None:
    """Volcano's task-topology example: a TF job whose PodGroup asks `ps,worker` affinity is
    placed on the one node that holds it whole; without the plugin (Volcano's default conf)
    the same gang is packed tightest-first and split."""
    topology = build_policy(parse_scheduler_config(TASK_TOPOLOGY))
    assert topology.plugins["task-topology"].weight == 10
    group = PodGroupRecord(
        {
            "metadata": {
                "name": "tf",
                "namespace": "ns",
                "annotations": {"volcano.sh/task-topology-affinity": "ps,worker"},
            },
            "spec": {"minMember": 5},
        }
    )
    cache = ClusterCache()
    for n in (node("n1", cpu="4"), node("n2", cpu="8"), node("n3", cpu="16")):
        cache.on_node_add(n)
    cache.on_podgroup_add(group)
    cache.on_pod_add(pod("tf-ps-0", task="ps", cpu="2", group="tf"))
    for i in range(4):
        cache.on_pod_add(pod(f"tf-worker-{i}", task="worker", cpu="2", group="tf"))
    snap = cache.snapshot()
    view = gangs.gang_view(snap, "ns/tf")
    assert view is not None

    def layout(policy: Policy) -> set[str]:
        decision = allocate_gang(session(policy, snap), group, view, job_input(snap, group))
        assert decision.plan is not None and decision.plan.ok, decision.reason
        return set(decision.plan.slots.values())

    assert layout(topology) == {"n3"}  # ps and its 4 workers together
    assert len(layout(build_policy(parse_scheduler_config(VOLCANO_DEFAULT)))) > 1
