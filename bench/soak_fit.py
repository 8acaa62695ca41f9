"""Does pending work fit? Two small formulas the stall invariant needs, kept apart from the
checker so they can be read (and tested) on their own:

- `pack`: first-fit-decreasing of a gang's member requests into the nodes' free room. Greedy,
  so it may miss a packing that exists — the stall check then stays silent rather than report
  work that might not fit (no false alarms).
- `deserved`: Volcano's proportion plugin, water-filling the cluster among the queues that ask
  for something by weight, each capped at min(what it asks, its capability)."""

from __future__ import annotations

from bench.soak_model import Resources, fits, sub

SHARE_DIMENSIONS = ("cpu", "memory")


def pack(members: list[Resources], free: dict[str, Resources]) -> dict[int, str] | None:
    """Member index -> node, or None when first-fit-decreasing finds no place for one."""
    room = {node: dict(res) for node, res in free.items()}
    order = sorted(
        range(len(members)),
        key=lambda i: (members[i].get("cpu", 0), members[i].get("memory", 0)),
        reverse=True,
    )
    placed: dict[int, str] = {}
    for index in order:
        for node in sorted(room):
            if fits(members[index], room[node]):
                room[node] = sub(room[node], members[index])
                placed[index] = node
                break
        else:
            return None
    return placed


def deserved(
    total: Resources,
    weights: dict[str, int],
    requests: dict[str, Resources],
    capabilities: dict[str, Resources],
) -> dict[str, Resources]:
    """Each queue's deserved share of `total` (cpu and memory), as proportion computes it."""
    out: dict[str, Resources] = {q: {d: 0 for d in SHARE_DIMENSIONS} for q in weights}
    for dim in SHARE_DIMENSIONS:
        want = {}
        for queue in weights:
            ask = requests.get(queue, {}).get(dim, 0)
            cap = capabilities.get(queue, {}).get(dim)
            want[queue] = ask if cap is None else min(ask, cap)
        remaining = total.get(dim, 0)
        active = {q for q, w in want.items() if w > 0}
        while remaining > 0 and active:
            weight_sum = sum(max(weights[q], 1) for q in active)
            given = 0
            for queue in sorted(active):
                share = remaining * max(weights[queue], 1) // weight_sum
                grant = min(share, want[queue] - out[queue][dim])
                out[queue][dim] += grant
                given += grant
            active = {q for q in active if out[q][dim] < want[q]}
            if given == 0:  # shares rounded to nothing: hand out the remainder one by one
                for queue in sorted(active):
                    if remaining - given <= 0:
                        break
                    out[queue][dim] += 1
                    given += 1
                active = {q for q in active if out[q][dim] < want[q]}
            remaining -= given
    return out
