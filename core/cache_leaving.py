"""Pods whose deletion vulcan asked for (an eviction) and the API server has not shown yet.

kube-scheduler assumes a pod bound the moment it asks for the Binding, and keeps the
assumption until the API server confirms it; Volcano's cache marks an evicted task Releasing
the moment it asks. vulcan's cache does the same for an eviction: from the moment it is asked,
every record of the pod shows it being deleted, including the API server's status writes that
were on their way meanwhile. Those used to replace the assumption: the Eviction API writes the
pod's DisruptionTarget condition and then deletes it (two watch events), and the first showed
the victim live again, so the next pass saw a gang evicted whole as placed whole, adopted and
committed it, and its elastic members bound at once; the deletions then left it half bound
(issue 31's soak, soak/gang-1041: 2 of its 4).

The mark goes when the API server shows the pod being deleted or gone, when a new pod takes
its name (another UID), or when the eviction is refused (`drop`: the cache shows the pod as
the API server last did).
"""

from __future__ import annotations

from core.records import PodRecord


class LeavingPods:
    def __init__(self) -> None:
        # pod key -> the API server's last record of it (not being deleted).
        self._last: dict[str, PodRecord] = {}

    def __contains__(self, key: str) -> bool:
        return key in self._last

    def mark(self, pod: PodRecord) -> None:
        self._last[pod.key] = pod

    def overlay(self, pod: PodRecord) -> PodRecord:
        """The record the cache should show for `pod`, the API server's latest word."""
        last = self._last.get(pod.key)
        if last is None:
            return pod
        if last.uid != pod.uid or pod.deleting:
            del self._last[pod.key]  # confirmed, or another pod under the name
            return pod
        self._last[pod.key] = pod
        return pod.assumed_deleting()

    def drop(self, key: str) -> PodRecord | None:
        """Forget the mark; the API server's last record of the pod while it was marked."""
        return self._last.pop(key, None)
