"""A member whose reserved node kube-scheduler did not offer takes, on a node it did offer, the
slot of another member of its gang, which takes the member's slot in exchange.

kube-scheduler offers a sample of the nodes (500 of 5,000), so a member's slot is often not
among them. Re-planned onto any offered node with room, a gang kept within one HyperNode
rarely finds one: the planner packed the gang onto the fewest nodes of its domain, and the
offered nodes of that domain are full of its own slots. Refused, the member waits for a pass, a
pod update and kube-scheduler's next try. Trading keeps every slot where the plan put one.

Only slots filter has not steered kube-scheduler to are traded: kube-scheduler may be binding
that member on its node now. No I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from core.resources import ResourceVector
from extender.ledger import GangLedger, Reservation
from extender.slots import SlotWatch


def trade_slot(
    ledger: GangLedger,
    slots: SlotWatch,
    own: Reservation,
    request: ResourceVector,
    candidates: Iterable[str],
    allowed: Callable[[str], bool],
    alike: Callable[[str], bool],
) -> str | None:
    """The offered node whose slot the member of `own` took (the trade is in the ledger, the
    member's new slot steered), or None when no member's slot on an offered node would do:
    each must fit where the other's was, both nodes be `allowed` for the gang, and the other
    member be `alike` (able to go wherever this one can)."""
    home = own.node
    if not allowed(home):
        return None
    for name in candidates:
        if name == home or not allowed(name):
            continue
        for other_key in list(ledger.members_on(name)):
            other = ledger.reservation_of(other_key)
            if (
                other is None
                or other.steered
                or other.group != own.group
                or other_key == own.pod_key
                or not alike(other_key)
                or not slots.fits(other_key, name, request)
                or not slots.fits(own.pod_key, home, other.request)
            ):
                continue
            ledger.reserve(Reservation(other_key, home, other.request, other.group))
            ledger.reserve(Reservation(own.pod_key, name, request, own.group, steered=True))
            return name
    return None
