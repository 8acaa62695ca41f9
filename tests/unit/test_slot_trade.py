"""extender.slot_trade and the ledger's per-node index: a member's slot traded for another
member's on an offered node, only with an unsteered member of its own gang, only where both
fit, only between allowed nodes."""

from __future__ import annotations

from core.cache import ClusterCache
from core.records import NodeRecord
from core.resources import ResourceVector
from extender.ledger import GangLedger, Reservation
from extender.slot_trade import trade_slot
from extender.slots import SlotWatch

CPU = ResourceVector({"cpu": 1000})
TWO = ResourceVector({"cpu": 2000})


def world(cpus: dict[str, str]) -> tuple[GangLedger, SlotWatch]:
    cache = ClusterCache()
    for name, cpu in cpus.items():
        cache.on_node_add(
            NodeRecord(
                {
                    "metadata": {"name": name, "resourceVersion": "1"},
                    "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "10"}},
                }
            )
        )
    ledger = GangLedger(cache.bump_node)
    return ledger, SlotWatch(cache, ledger)


def anywhere(_node: str) -> bool:
    return True


def alike(_pod_key: str) -> bool:
    return True


def test_the_ledger_knows_who_holds_a_slot_on_a_node_and_which_are_steered() -> None:
    ledger, _ = world({"a": "2", "b": "2"})
    ledger.reserve(Reservation("ns/m0", "a", CPU, "ns/g"))
    ledger.reserve(Reservation("ns/m1", "a", CPU, "ns/g"))
    assert set(ledger.members_on("a")) == {"ns/m0", "ns/m1"}
    ledger.reserve(Reservation("ns/m1", "b", CPU, "ns/g"))  # moved
    assert set(ledger.members_on("a")) == {"ns/m0"} and set(ledger.members_on("b")) == {"ns/m1"}
    ledger.steer("ns/m0")
    assert ledger.reservation_of("ns/m0") == Reservation("ns/m0", "a", CPU, "ns/g", steered=True)
    assert ledger.by_node["a"] == CPU and ledger.held_by("ns/g") == TWO  # no sums moved
    ledger.release("ns/m0")
    assert not ledger.members_on("a") and "a" not in ledger.by_node


def test_a_slot_is_traded_with_an_unsteered_member_of_the_same_gang() -> None:
    ledger, slots = world({"home": "1", "full": "2"})
    own = Reservation("ns/m0", "home", CPU, "ns/g")
    ledger.reserve(own)
    ledger.reserve(Reservation("ns/x0", "full", CPU, "ns/other"))  # another gang's
    ledger.reserve(Reservation("ns/m1", "full", CPU, "ns/g", steered=True))
    assert trade_slot(ledger, slots, own, CPU, ["full"], anywhere, alike) is None
    ledger.reserve(Reservation("ns/m1", "full", CPU, "ns/g"))  # refused later: not steered
    # A member whose constraints differ (a node selector, a toleration) is not traded with.
    assert trade_slot(ledger, slots, own, CPU, ["full"], anywhere, lambda _k: False) is None
    assert trade_slot(ledger, slots, own, CPU, ["full"], anywhere, alike) == "full"
    assert ledger.reservation_of("ns/m0") == Reservation("ns/m0", "full", CPU, "ns/g", True)
    assert ledger.reservation_of("ns/m1") == Reservation("ns/m1", "home", CPU, "ns/g")
    assert ledger.slot_of("ns/x0") == "full"


def test_no_trade_where_either_member_would_not_fit_or_a_node_is_not_allowed() -> None:
    ledger, slots = world({"home": "1", "full": "2", "big": "2"})
    own = Reservation("ns/m0", "home", CPU, "ns/g")
    ledger.reserve(own)
    ledger.reserve(Reservation("ns/m1", "big", TWO, "ns/g"))  # would not fit on home
    ledger.reserve(Reservation("ns/m2", "full", CPU, "ns/g"))
    ledger.reserve(Reservation("ns/m3", "full", CPU, "ns/g"))
    assert trade_slot(ledger, slots, own, CPU, ["big"], anywhere, alike) is None
    assert trade_slot(ledger, slots, own, TWO, ["full"], anywhere, alike) is None  # asks more now
    assert trade_slot(ledger, slots, own, CPU, ["full"], lambda n: n != "full", alike) is None
    assert trade_slot(ledger, slots, own, CPU, ["full"], lambda n: n != "home", alike) is None
    assert ledger.slot_of("ns/m0") == "home"
    assert trade_slot(ledger, slots, own, CPU, ["big", "full"], anywhere, alike) == "full"
