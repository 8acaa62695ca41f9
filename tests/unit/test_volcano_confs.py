"""Volcano's documented scheduler confs (its default, the capacity plugin's, binpack with
weights, task-topology) as a user would pass them to `vulcan extender --config`: each loads, or
is refused by name, and changes what vulcan decides as Volcano's would."""

from __future__ import annotations

import pytest

from core.resources import ResourceVector
from extender.queues import QueuePolicy
from plugins.config import ConfigError, parse_scheduler_config, require_implemented
from plugins.framework import Framework
from plugins.job_order import job_order_plugins
from plugins.node_state import NodeState
from plugins.overcommit import overcommit_factor

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
    assert QueuePolicy(conf).kind == "proportion"
    assert job_order_plugins(conf) == ("priority", "gang", "drf")
    assert overcommit_factor(conf) == 1.2
    assert Framework(conf).gang_placement == "binpack"
    # Volcano's own default evicts for nothing: no reclaim, no preempt action.
    assert not {"reclaim", "preempt"} & set(conf.actions)


def test_the_capacity_conf_switches_the_share_plugin_and_turns_reclaim_on() -> None:
    conf = parse_scheduler_config(CAPACITY)
    require_implemented(conf)
    assert QueuePolicy(conf).kind == "capacity"
    assert "reclaim" in conf.actions and "preempt" not in conf.actions
    assert overcommit_factor(conf) is None  # no overcommit plugin there: no overcommit rule


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


def test_the_task_topology_conf_is_refused_by_name() -> None:
    conf = parse_scheduler_config(TASK_TOPOLOGY)
    with pytest.raises(ConfigError, match='"task-topology" is a Volcano plugin vulcan does not'):
        require_implemented(conf)
