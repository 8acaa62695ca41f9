"""The cache's assumption that a pod vulcan evicts is being deleted (`core.cache_leaving`): it
holds through the API server's other writes until the deletion shows, and a refusal gives the
pod back as the API server last showed it."""

from __future__ import annotations

from typing import Any

from core.cache import ClusterCache
from core.records import PodRecord


def _pod(phase: str, *, uid: str = "u1", rv: str = "1", deleting: bool = False) -> PodRecord:
    meta: dict[str, Any] = {"name": "p", "namespace": "ns", "uid": uid, "resourceVersion": rv}
    if deleting:
        meta["deletionTimestamp"] = "2026-11-26T00:00:00Z"
    spec = {"nodeName": "n1", "containers": [{"name": "c", "resources": {}}]}
    return PodRecord({"metadata": meta, "spec": spec, "status": {"phase": phase}})


def test_an_evicted_pod_stays_leaving_through_other_writes_until_its_deletion_shows() -> None:
    cache = ClusterCache()
    running = _pod("Running")
    cache.on_pod_add(running)
    assert cache.assume_deleting(running)
    assert cache.pods["ns/p"].deleting
    cache.on_pod_update(cache.pods["ns/p"], _pod("Succeeded", rv="2"))
    shown = cache.pods["ns/p"]
    assert shown.phase == "Succeeded" and shown.deleting  # the newer word, still leaving
    cache.on_pod_update(shown, _pod("Succeeded", rv="3", deleting=True))
    assert "ns/p" not in cache.leaving  # the API server says so itself now
    cache.on_pod_delete(cache.pods["ns/p"])
    assert "ns/p" not in cache.pods


def test_a_refused_eviction_shows_the_api_servers_last_word() -> None:
    cache = ClusterCache()
    cache.on_pod_add(running := _pod("Running"))
    cache.assume_deleting(running)
    cache.on_pod_update(cache.pods["ns/p"], _pod("Running", rv="2"))
    cache.forget_deleting("ns/p")
    shown = cache.pods["ns/p"]
    assert not shown.deleting and shown.rv == "2"
    cache.on_pod_update(shown, _pod("Running", rv="3"))
    assert not cache.pods["ns/p"].deleting


def test_a_new_pod_under_the_name_is_not_leaving() -> None:
    cache = ClusterCache()
    cache.on_pod_add(running := _pod("Running"))
    cache.assume_deleting(running)
    cache.on_pod_update(cache.pods["ns/p"], _pod("Pending", uid="u2", rv="5"))
    assert not cache.pods["ns/p"].deleting
    assert "ns/p" not in cache.leaving


def test_only_the_record_the_cache_holds_is_assumed() -> None:
    cache = ClusterCache()
    cache.on_pod_add(_pod("Running", rv="2"))
    assert not cache.assume_deleting(_pod("Running", rv="1"))  # an older record
    assert not cache.pods["ns/p"].deleting
