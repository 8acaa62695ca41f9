"""The Deployment controller's RollingUpdate arithmetic (kube-controller-manager's
NewRSNewReplicas and reconcileOldReplicaSets)."""

from __future__ import annotations

from sim.controllers.rolling import Counts, new_replicas, scale_down_old


def test_the_new_replicaset_grows_within_max_surge() -> None:
    old = Counts("old", 10, 10, "1")
    new = Counts("new", 0, 0, "2")
    # 10 replicas, maxSurge 3: at most 13 pods, so the new set starts at 3.
    assert new_replicas(10, 3, [old, new], new) == 3
    # Already at the limit: no growth until old pods go.
    assert new_replicas(10, 3, [old, Counts("new", 3, 0, "2")], Counts("new", 3, 0, "2")) == 3
    # Never above the wanted count.
    assert new_replicas(10, 3, [Counts("old", 0, 0), new], new) == 10


def test_old_replicasets_shrink_within_max_unavailable() -> None:
    # 10 wanted, maxUnavailable 2: 13 pods, the new 3 not yet available.
    plan = scale_down_old(10, 2, Counts("new", 3, 0, "2"), [Counts("old", 10, 10, "1")])
    # minAvailable 8 and 10 available: two old pods may go.
    assert plan == {"old": 8}
    # Nothing available to spare: no scale-down (maxUnavailable 0).
    assert scale_down_old(10, 0, Counts("new", 3, 0, "2"), [Counts("old", 10, 10, "1")]) == {}


def test_unhealthy_old_pods_go_first_oldest_set_first() -> None:
    new = Counts("new", 2, 2, "3")
    older = Counts("older", 3, 1, "1")  # 2 of its pods are not available
    old = Counts("old", 5, 5, "2")
    plan = scale_down_old(8, 1, new, [old, older])
    # 10 pods, minAvailable 7, new unavailable 0: budget 3. The two unhealthy pods of the
    # oldest set go first (3 -> 1); then 8 available > 7 lets one available pod go, again
    # from the oldest set (1 -> 0). The newer old set keeps its 5.
    assert plan == {"older": 0}
