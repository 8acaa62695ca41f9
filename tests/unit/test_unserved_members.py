"""Members kube-scheduler never sends to vulcan (`plugins.model.unserved`): reported, not
counted; a gang that needs them is neither admitted nor kept Inqueue."""

from __future__ import annotations

from core.records import PodGroupRecord, PodRecord
from core.served import ServedPods
from plugins.actions.allocate import allocate_job
from plugins.framework.decisions import Waiting
from plugins.model import gang as gangs
from plugins.model.gang import GangView
from plugins.model.unserved import unserved_refusal
from tests.session_harness import session
from tests.unit.test_actions import DEFAULT, cluster, group
from tests.unit.test_gang_placement import pod

VOLCANO = ServedPods.of(["volcano"])


def named(name: str, scheduler: str, **kw: object) -> PodRecord:
    record = pod(name, **kw)  # type: ignore[arg-type]
    record.scheduler_name = scheduler
    return record


def view_of(g: PodGroupRecord, members: list[PodRecord]) -> GangView:
    view = gangs.gang_view(cluster(["n0", "n1"], [g], members), g.key)
    assert view is not None
    return view


def test_a_gang_of_pods_of_a_scheduler_vulcan_does_not_serve_says_which() -> None:
    view = view_of(group("a", 2), [named(f"a-{i}", "volcno") for i in range(2)])
    assert unserved_refusal(view, VOLCANO) == (
        'pods use schedulerName "volcno", which no vulcan scheduler serves (it serves pods of '
        "schedulerName volcano): 2 of its 2 pods are never sent to vulcan"
    )
    marked = ServedPods.of(["default-scheduler"], "vulcan.sh/managed")
    assert unserved_refusal(view, marked) == (
        "pods do not carry vulcan.sh/managed, so kube-scheduler does not send them to vulcan: "
        "2 of its 2 pods are never sent to vulcan"
    )
    assert unserved_refusal(view, ServedPods.every()) is None


def test_members_it_can_do_without_or_already_bound_do_not_refuse_it() -> None:
    spare = [named("a-0", "volcano"), named("a-1", "volcano"), named("a-2", "volcno")]
    assert unserved_refusal(view_of(group("a", 2), spare), VOLCANO) is None
    assert unserved_refusal(view_of(group("a", 3), spare), VOLCANO) is not None
    bound = [named("a-0", "volcano"), named("a-1", "other", node_name="n0", phase="Running")]
    assert unserved_refusal(view_of(group("a", 2), bound), VOLCANO) is None


def test_an_inqueue_gang_that_needs_unserved_members_goes_back_to_pending() -> None:
    members = [named(f"a-{i}", "volcno") for i in range(2)]
    for phase, dequeue in (("Inqueue", True), ("Pending", False)):
        g = PodGroupRecord(
            {
                "metadata": {"name": "a", "namespace": "ns"},
                "spec": {"minMember": 2, "minResources": {"cpu": "2"}},
                "status": {"phase": phase},
            }
        )
        snap = cluster(["n0", "n1"], [g], members)
        view = gangs.gang_view(snap, g.key)
        assert view is not None
        ssn = session(DEFAULT, snap, served=VOLCANO)
        decision = allocate_job(ssn, g, view)
        assert isinstance(decision, Waiting) and decision.dequeue is dequeue
        assert 'schedulerName "volcno"' in decision.reason
