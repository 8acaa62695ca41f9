"""Deletion in the embedded API server's `Store`: Kubernetes' delete semantics (preconditions,
graceful pod termination, finalizers, Orphan / Background / Foreground propagation, a namespace's
contents) and the ownerReference garbage collector that finishes what they start.

Separate from creates and updates: deletion and garbage collection call each other (the GC
deletes dependents, a delete queues owners for the GC) and share the owner bookkeeping, but
nothing else does.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from sim.apiserver import errors
from sim.apiserver.objects import pod_is_terminal
from sim.apiserver.registry import ResourceType
from sim.apiserver.store_collection import MODIFIED
from sim.apiserver.store_core import StoreCore, check_uid, now_rfc3339

FOREGROUND = "foregroundDeletion"
ORPHAN = "orphan"


class StoreDeletion(StoreCore):
    """`delete` with its propagation policies, and the ownerReference garbage collector."""

    # --------------------------------------------------------------------------- delete

    def delete(
        self,
        rtype: ResourceType,
        namespace: str,
        name: str,
        *,
        grace_period: int | None = None,
        propagation: str | None = None,
        preconditions: dict[str, Any] | None = None,
    ) -> tuple[dict[str, Any], bool]:
        """Delete with Kubernetes' semantics. Returns (object, finished): finished is False
        while the object waits for finalizers or a graceful pod termination."""
        stored = self.get(rtype, namespace, name)
        if preconditions:
            check_uid(rtype, name, preconditions.get("uid"), stored)
            wanted = preconditions.get("resourceVersion")
            if wanted and wanted != str(stored.rv):
                raise errors.conflict(
                    rtype.plural,
                    name,
                    rtype.group,
                    f"Precondition failed: ResourceVersion in precondition: {wanted}, "
                    f"ResourceVersion in object meta: {stored.rv}",
                )
        obj = stored.decode()
        meta = obj["metadata"]
        is_pod = rtype.kind == "Pod" and rtype.group == ""
        if is_pod:
            spec = obj.get("spec") or {}
            if grace_period is None:
                grace_period = int(spec.get("terminationGracePeriodSeconds", 30))
            # A pod on a node stops gracefully until its kubelet confirms; an unscheduled or
            # finished pod goes at once.
            if not spec.get("nodeName") or pod_is_terminal(obj):
                grace_period = 0
            if grace_period > 0:
                current = meta.get("deletionGracePeriodSeconds")
                if current is not None and current <= grace_period:
                    return obj, False
                meta["deletionTimestamp"] = now_rfc3339(grace_period)
                meta["deletionGracePeriodSeconds"] = grace_period
                self._put(rtype, obj, MODIFIED, stored)
                return self.get(rtype, namespace, name).decode(), False
        if propagation == "Orphan" or (
            propagation is None and ORPHAN in (meta.get("finalizers") or ())
        ):
            self._orphan_dependents(stored.uid)
            meta["finalizers"] = [f for f in meta.get("finalizers") or () if f != ORPHAN]
        finalizers = list(meta.get("finalizers") or [])
        wants_foreground = propagation == "Foreground" and self._owned.get(stored.uid)
        if wants_foreground and FOREGROUND not in finalizers:
            finalizers.append(FOREGROUND)
        if finalizers:
            meta["finalizers"] = finalizers
            if not meta.get("deletionTimestamp"):
                meta["deletionTimestamp"] = now_rfc3339()
                meta["deletionGracePeriodSeconds"] = 0
            self._put(rtype, obj, MODIFIED, stored)
            if FOREGROUND in finalizers:
                self._foreground.add(stored.uid)
                self._schedule_gc(stored.uid)
            return self.get(rtype, namespace, name).decode(), False
        final = self._remove(rtype, stored, obj)
        if rtype.kind == "Namespace" and rtype.group == "":
            self._delete_namespace_contents(name)
        return final.decode(), True

    def _delete_namespace_contents(self, namespace: str) -> None:
        for rtype, coll in list(self.collections.items()):
            if not rtype.namespaced:
                continue
            for key in [k for k in coll.objects if k[0] == namespace]:
                if key in coll.objects:
                    self.delete(rtype, key[0], key[1], grace_period=0)

    def _orphan_dependents(self, owner_uid: str) -> None:
        for rtype, key in list(self._owned.get(owner_uid, ())):
            stored = self.collection(rtype).objects.get(key)
            if stored is None:
                continue
            obj = stored.decode()
            refs = obj["metadata"].get("ownerReferences") or []
            obj["metadata"]["ownerReferences"] = [r for r in refs if r.get("uid") != owner_uid]
            if not obj["metadata"]["ownerReferences"]:
                del obj["metadata"]["ownerReferences"]
            self._put(rtype, obj, MODIFIED, stored)

    # ------------------------------------------------------------------ garbage collection

    def collect_garbage(self) -> int:
        """Process pending owner deletions once (the GC controller's work). Returns the number
        of dependents acted on."""
        acted = 0
        while self._gc_pending:
            owner_uid = self._gc_pending.popleft()
            owner_alive = owner_uid in self._by_uid
            owner_rtype_key = self._by_uid.get(owner_uid)
            foreground = False
            if owner_rtype_key is not None:
                rtype, key = owner_rtype_key
                owner = self.collection(rtype).objects.get(key)
                if owner is not None:
                    foreground = FOREGROUND in (owner.decode()["metadata"].get("finalizers") or ())
            if owner_alive and not foreground:
                continue
            for rtype, key in list(self._owned.get(owner_uid, ())):
                stored = self.collection(rtype).objects.get(key)
                if stored is None:
                    continue
                live_owners = [u for u in stored.owners if u != owner_uid and u in self._by_uid]
                acted += 1
                if live_owners:
                    obj = stored.decode()
                    obj["metadata"]["ownerReferences"] = [
                        r
                        for r in obj["metadata"].get("ownerReferences") or ()
                        if r.get("uid") != owner_uid
                    ]
                    self._put(rtype, obj, MODIFIED, stored)
                    continue
                # The dependent may already be gone or terminating; either is fine.
                with contextlib.suppress(errors.ApiError):
                    self.delete(
                        rtype,
                        key[0],
                        key[1],
                        propagation="Foreground" if foreground else "Background",
                    )
            if foreground and owner_rtype_key is not None:
                self._finish_foreground(owner_uid)
        return acted

    def _finish_foreground(self, owner_uid: str) -> None:
        """Drop the foregroundDeletion finalizer once no dependent is left."""
        if self._owned.get(owner_uid):
            return
        location = self._by_uid.get(owner_uid)
        if location is None:
            return
        rtype, key = location
        stored = self.collection(rtype).objects.get(key)
        if stored is None:
            return
        obj = stored.decode()
        finalizers = [f for f in obj["metadata"].get("finalizers") or () if f != FOREGROUND]
        obj["metadata"]["finalizers"] = finalizers
        if not finalizers:
            del obj["metadata"]["finalizers"]
            self._remove(rtype, stored, obj)
        else:
            self._put(rtype, obj, MODIFIED, stored)

    async def run_garbage_collector(self) -> None:
        """Background task: collect garbage whenever owners go away (until cancelled)."""
        self._gc_wakeup = asyncio.Event()
        while True:
            await self._gc_wakeup.wait()
            self._gc_wakeup.clear()
            self.collect_garbage()
            # Foreground owners whose dependents are still terminating are re-checked every
            # second (and on the next wakeup).
            if self._foreground:
                await asyncio.sleep(1)
                for uid in list(self._foreground):
                    self._schedule_gc(uid)
