"""The conf's node order rendered as kube-scheduler's own scoring, so the extender needs no
`prioritize` call (issue 37), and what vulcan's profile needs for a conf: pure functions of the
Volcano conf, no I/O.

What the install runs today, per pod and candidate node n (kube-scheduler v1 profile defaults;
kube-scheduler sums each score plugin's 0..100 × its weight, and adds an extender's 0..10 × 10 ×
the extender's weight):

    T(n) = L(n) + Bal(n) + 10 × round(10 × V(n) / V(best))        [+ the other default plugins]

with L = NodeResourcesFit LeastAllocated (cpu 1, memory 1, weight 1), Bal =
NodeResourcesBalancedAllocation (weight 1; up to 1.35 the balance after the pod, as Volcano's),
and V the conf's node order (`plugins.framework.node_order`):

    V = a·L + m·M + bal·Bal + b·B
    a, m, bal = nodeorder's leastrequested / mostrequested / balancedresource weights
    M = MostAllocated (cpu 1, memory 1), B = binpack: 100 × Σ_r w_r·u_r / Σ_r w_r

Per resource r with utilization u_r (after the pod), L and M and B are linear in u_r: L has
−100/2 per unit of u_r, M +100/2, B +100·w_r/Σw. So T's resource part is linear in each u_r,
and that is what LeastAllocated with resource weights expresses (its per-resource score is
100·(1 − u_r)): the coefficient of u_r in T is

    −(1 + c·(a − m))/2 + c·b·w_r/Σw        with c = 100 / V(best), vulcan's per-pod rescale.

Two things kube-scheduler's fixed integer weights cannot follow:
- c varies per pod (the best candidate's V) and the result is rounded to 0..10. The rendering
  fixes c = 100 / V_top, V_top = 100·(a + bal) the conf's top score (an empty, perfectly
  balanced node): the scale vulcan's rescale gives when the best candidate reaches the top. With
  the default conf on kube-scheduler up to 1.35 (leastrequested 1, balancedresource 1,
  binpack 1; LeastAllocated 2, BalancedAllocation 3) V = 100 + Bal up to
  integer truncation (leastrequested and binpack cancel), every node scores 150..200, so c is
  0.5..0.67 and the best candidate is the best balanced one — c = 0.5 when that one is
  balanced. Where vulcan's rescale and rounding order two nodes differently (the best
  candidate below the top, or two nodes within one 0..10 step), the rendered scoring wins: it
  is exact, the same for every pod, and keeps the conf's proportions without the rounding.
- A conf that packs on a resource (binpack or mostrequested outweighing leastrequested on it)
  pulls against the profile's own LeastAllocated, and which of the two wins depends on c —
  on how full the best candidate is — so placements would change: not expressible, the
  `prioritize` verb stays.

Not expressible (a reason says which): nodeorder's balancedresource on kube-scheduler 1.36 or
later, whose BalancedAllocation scores the change in balance the pod makes (k/k#135573:
50 + (50 + balance after − balance before) / 2) where Volcano scores the balance after it (the
formula up to 1.35): the node's balance before the pod is a term no plugin offers; negative
weights; binpack.resources beyond cpu and memory; a resource weight above kube-scheduler's 100;
node-order plugins other than nodeorder and binpack; a conf that packs (above).

Whether the install needs either (`plan_profile`): every pod of vulcan's `volcano` profile is
in a PodGroup (the podgroup controller groups the pods it does not find grouped, and filter
refuses them until then), and with the gang plugin filter narrows each member to the one node
vulcan reserved for it (or the first candidate with room): kube-scheduler scores nothing when
one node is left. So with the gang plugin the profile needs neither prioritize nor a rendering;
without it each pod is placed on its own, and the rendering (or prioritize) keeps the order.

Also differs, and stays that way (documented): binpack scores only the resources the pod
requests, the rendering assumes it requests both cpu and memory (a pod without a memory
request packs on cpu alone in vulcan's score); kube-scheduler scores cpu and memory with its
non-zero defaults (100m, 200Mi) for containers without requests; Volcano's balance includes
nvidia.com/gpu for pods that request it, kube-scheduler's default balance (kept) cpu and memory;
and kube-scheduler does not see the gang ledger's reservations that vulcan's score counted
(they exist only while a gang's members are being bound, and filter keeps honouring them).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from plugins.builtin.binpack import BinpackPlugin
from plugins.builtin.nodeorder import NodeOrderPlugin
from plugins.framework.config import SchedulerConfig
from plugins.framework.node_order import Framework
from plugins.framework.policy import Policy

__all__ = [
    "DEFAULT_SCORE_WEIGHTS",
    "KUBE_VERSION",
    "KubeScoring",
    "NotExpressible",
    "ProfilePlan",
    "plan_profile",
    "render_node_order",
    "scheduler_profile",
    "without_prioritize",
]

# The kube-scheduler minor version rendered for by default: the one vulcan's real tier runs.
KUBE_VERSION = (1, 36)
# From this version on, BalancedAllocation scores the change in balance (k/k#135573).
BALANCE_CHANGE_SINCE = (1, 36)

FIT = "NodeResourcesFit"
BALANCED = "NodeResourcesBalancedAllocation"
# kube-scheduler v1's default score plugins and weights (apis/config/v1/default_plugins.go),
# scaled together with the two resource scorers so their relative weight stays what it was.
DEFAULT_SCORE_WEIGHTS: dict[str, int] = {
    "TaintToleration": 3,
    "NodeAffinity": 2,
    FIT: 1,
    "PodTopologySpread": 2,
    "InterPodAffinity": 2,
    BALANCED: 1,
    "ImageLocality": 1,
}
# kube-scheduler's ResourceSpec weight range (validation of NodeResourcesFitArgs).
_MAX_RESOURCE_WEIGHT = 100
_RESOURCES = ("cpu", "memory")


@dataclass(frozen=True, slots=True)
class KubeScoring:
    """The profile's score plugin weights and NodeResourcesFit's LeastAllocated resources.

    `exact`: the order does not depend on vulcan's per-pod rescale (the conf's node order adds
    nothing, or points the same way as kube-scheduler's defaults), so only integer rounding can
    differ; otherwise the rescale is fixed at the conf's top score (module docstring)."""

    weights: dict[str, int]
    fit_resources: dict[str, int]
    exact: bool
    notes: tuple[str, ...] = field(default=())

    def profile_fields(self) -> dict[str, Any]:
        """`plugins` and `pluginConfig` of a KubeSchedulerConfiguration v1 profile. Fields
        that equal kube-scheduler's defaults are still written: the profile says what it does."""
        return {
            "plugins": {
                "score": {
                    "enabled": [
                        {"name": name, "weight": weight} for name, weight in self.weights.items()
                    ]
                }
            },
            "pluginConfig": [
                {
                    "name": FIT,
                    "args": {
                        "scoringStrategy": {
                            "type": "LeastAllocated",
                            "resources": [
                                {"name": name, "weight": weight}
                                for name, weight in self.fit_resources.items()
                            ],
                        }
                    },
                }
            ],
        }


@dataclass(frozen=True, slots=True)
class NotExpressible:
    """Why kube-scheduler's scoring cannot give the conf's placements: `prioritize` stays."""

    reason: str


@dataclass(frozen=True, slots=True)
class ProfilePlan:
    """What vulcan's `volcano` profile and its extender entry need for a conf: whether the
    entry keeps `prioritizeVerb`, the scoring to set (None: kube-scheduler's default), and why."""

    prioritize: bool
    scoring: KubeScoring | None
    why: str


GANG_NARROWS = (
    "every pod of the profile is in a PodGroup, and with the gang plugin filter narrows each "
    "to the one node vulcan reserved for it: kube-scheduler scores nothing, so neither "
    "prioritize nor a rendering of the node order is needed"
)


def plan_profile(
    config: SchedulerConfig | Policy, kube_version: tuple[int, int] = KUBE_VERSION
) -> ProfilePlan:
    """The profile's plan for a conf (module docstring)."""
    session = config if isinstance(config, Policy) else Framework(config).session
    if session.has("gang"):
        return ProfilePlan(prioritize=False, scoring=None, why=GANG_NARROWS)
    rendered = render_node_order(session, kube_version)
    if isinstance(rendered, NotExpressible):
        return ProfilePlan(prioritize=True, scoring=None, why=rendered.reason)
    return ProfilePlan(
        prioritize=False,
        scoring=rendered,
        why="without the gang plugin each pod is placed on its own: the profile scores nodes "
        "as the conf orders them",
    )


def render_node_order(
    config: SchedulerConfig | Policy | Framework, kube_version: tuple[int, int] = KUBE_VERSION
) -> KubeScoring | NotExpressible:
    """The conf's node order, added to kube-scheduler's default resource scoring as the
    extender's prioritize adds it, as fixed plugin weights for kube-scheduler `kube_version`
    (major, minor) (module docstring), or the reason it cannot be."""
    framework = config if isinstance(config, Framework) else Framework(config)
    numa = framework.session.numa
    if numa is not None and numa.scores:
        return NotExpressible(
            f"plugin {numa.plugin.name} orders nodes by the NUMA cells a pod's cpus take, and "
            "kube-scheduler has no scoring for it"
        )
    least = most = balanced = binpack = 0
    binpack_weights: dict[str, int] = {}
    for plugin in framework.score_plugins:
        if isinstance(plugin, NodeOrderPlugin):
            least += plugin.least_requested_weight
            most += plugin.most_requested_weight
            balanced += plugin.balanced_resource_weight
        elif isinstance(plugin, BinpackPlugin):
            binpack += plugin.weight
            binpack_weights = {
                r: w for r, w in plugin.resource_weights.items() if w > 0 and r != "pods"
            }
        else:
            return NotExpressible(
                f"plugin {plugin.name} orders nodes, and kube-scheduler has no scoring for it"
            )
    for name, value in (
        ("nodeorder leastrequested.weight", least),
        ("nodeorder mostrequested.weight", most),
        ("nodeorder balancedresource.weight", balanced),
        ("binpack.weight", binpack),
    ):
        if value < 0:
            return NotExpressible(
                f"{name} is {value}: kube-scheduler's weights are positive, a negative weight "
                "(which inverts the score) has no equivalent"
            )
    if balanced and tuple(kube_version) >= BALANCE_CHANGE_SINCE:
        return NotExpressible(
            f"nodeorder's balancedresource.weight is {balanced}: kube-scheduler "
            f"{kube_version[0]}.{kube_version[1]} scores NodeResourcesBalancedAllocation by the "
            "change in balance the pod makes (k/k#135573), Volcano by the balance after it; "
            "the node's balance before the pod is a term no plugin offers (expressible up to "
            "kube-scheduler 1.35)"
        )
    if binpack:
        extra = sorted(set(binpack_weights) - set(_RESOURCES))
        if extra:
            return NotExpressible(
                f"binpack weighs {', '.join(extra)}: binpack scores a resource only for pods "
                "that request it, kube-scheduler's resource scoring every listed resource for "
                "every pod"
            )
    weight_sum = sum(binpack_weights.get(r, 0) for r in _RESOURCES) if binpack else 0
    top = least + balanced  # V_top / 100 when nothing packs (checked below)
    scale = Fraction(1, top) if top else Fraction(0)
    # Coefficient of −u_r (per 100) in T, for each resource: what LeastAllocated's resource r
    # contributes per unit of its weight.
    spread: dict[str, Fraction] = {}
    for resource in _RESOURCES:
        coefficient = Fraction(1, 2) + scale * Fraction(least - most, 2)
        if weight_sum:
            coefficient -= scale * binpack * Fraction(binpack_weights.get(resource, 0), weight_sum)
        packing = Fraction(least - most, 2) - (
            binpack * Fraction(binpack_weights.get(resource, 0), weight_sum) if weight_sum else 0
        )
        if packing < 0:
            return NotExpressible(
                f"the conf packs on {resource} (binpack.weight × its share of binpack's "
                "resource weights, plus mostrequested.weight, outweighs leastrequested.weight) "
                "while the profile's own LeastAllocated spreads: vulcan rescales the conf's "
                "score against each pod's best candidate, so which of the two wins depends on "
                "how full that candidate is, and no fixed kube-scheduler weights give the same "
                "placements"
            )
        spread[resource] = coefficient
    fit = sum(spread.values(), Fraction(0))
    balance = 1 + scale * balanced
    resources = _integer_ratio(list(spread.values()))
    if max(resources) > _MAX_RESOURCE_WEIGHT:
        return NotExpressible(
            f"LeastAllocated would need resource weights {resources}: kube-scheduler allows "
            f"1..{_MAX_RESOURCE_WEIGHT}"
        )
    multiplier = math.lcm(fit.denominator, balance.denominator)
    weights = {
        name: int(multiplier * (fit if name == FIT else balance if name == BALANCED else default))
        for name, default in DEFAULT_SCORE_WEIGHTS.items()
    }
    divisor = math.gcd(*weights.values())
    weights = {name: weight // divisor for name, weight in weights.items()}
    # The order ignores the rescale when the conf adds nothing, or adds per resource exactly
    # what it adds to the balance (its score then points the way of L + Bal).
    exact = all(c == balance / 2 for c in spread.values())
    notes = [] if exact else [_RESCALE_NOTE.format(top=100 * top)]
    if multiplier // divisor != 1:
        notes.append(
            "kube-scheduler's other default score plugins are weighted "
            f"×{multiplier // divisor} with the two resource scorers, so their share is unchanged"
        )
    return KubeScoring(
        weights=weights,
        fit_resources=dict(zip(_RESOURCES, resources, strict=True)),
        exact=exact,
        notes=tuple(notes),
    )


_RESCALE_NOTE = (
    "vulcan rescaled the conf's score per pod against the best candidate; the rendering fixes "
    "that scale at the conf's top score ({top}), where the best candidate is an empty, "
    "balanced node"
)


def _integer_ratio(values: list[Fraction]) -> list[int]:
    """The smallest positive integers in the ratio of `values` (all > 0)."""
    denominator = math.lcm(*(v.denominator for v in values))
    integers = [int(v * denominator) for v in values]
    divisor = math.gcd(*integers)
    return [i // divisor for i in integers]


def without_prioritize(extender: dict[str, Any]) -> dict[str, Any]:
    """A KubeSchedulerConfiguration extender entry without its prioritize verb (and the weight,
    which kube-scheduler applies only to prioritize scores)."""
    return {k: v for k, v in extender.items() if k not in ("prioritizeVerb", "weight")}


def scheduler_profile(
    profile: dict[str, Any], extenders: list[dict[str, Any]], plan: ProfilePlan
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A profile and its extender entries with `plan` applied: the scoring set (if any) and
    `prioritizeVerb` dropped (unless the plan keeps it)."""
    fields = plan.scoring.profile_fields() if plan.scoring is not None else {}
    entries = [dict(e) if plan.prioritize else without_prioritize(e) for e in extenders]
    return {**profile, **fields}, entries
