"""Update in the embedded API server's `Store`: PUT semantics (also the last step of PATCH) in
steps that admission webhooks fit between: preconditions, the merge with the stored object
(status subresource split, server-owned metadata kept), validation, no-op detection, the
generation bump and deletion once the last finalizer is gone.

Separate from creates and deletes: it is the one write path that merges with a stored object.
"""

from __future__ import annotations

from typing import Any

from sim.apiserver import errors
from sim.apiserver.objects import label_namespace
from sim.apiserver.registry import ResourceType
from sim.apiserver.store_admission import StoreAdmission
from sim.apiserver.store_collection import MODIFIED, Stored
from sim.apiserver.store_core import check_uid


class StoreUpdate(StoreAdmission):
    """`update` (PUT, and the last step of PATCH) and its steps."""

    def update(
        self,
        rtype: ResourceType,
        namespace: str,
        name: str,
        obj: dict[str, Any],
        *,
        subresource: str | None = None,
        field_validation: str = "",
        current: Stored | None = None,
    ) -> tuple[Stored, list[str]]:
        """PUT semantics (also the last step of PATCH): resourceVersion precondition, status
        subresource split, no-op detection, deletion once the last finalizer is gone."""
        stored, old, new = self.begin_update(
            rtype, namespace, name, obj, subresource=subresource, current=current
        )
        warnings = self.finish_update(rtype, old, new, subresource, field_validation)
        return self.commit_update(rtype, stored, old, new, subresource), warnings

    # Like a create, an update runs in steps (see create): mutating webhooks see the merged
    # object after `begin_update`, validating ones after `finish_update`.

    def begin_update(
        self,
        rtype: ResourceType,
        namespace: str,
        name: str,
        obj: dict[str, Any],
        *,
        subresource: str | None = None,
        current: Stored | None = None,
    ) -> tuple[Stored, dict[str, Any], dict[str, Any]]:
        """Preconditions and the merge with the stored object: (stored, old, new)."""
        if not isinstance(obj, dict) or not isinstance(obj.get("metadata", {}), dict):
            raise errors.bad_request("the body of the request was not a JSON object")
        stored = current or self.get(rtype, namespace, name)
        old = stored.decode()
        meta = obj.setdefault("metadata", {})
        if meta.get("name") and meta["name"] != name:
            raise errors.bad_request(
                f"the name of the object ({meta['name']}) does not match the name on the URL "
                f"({name})"
            )
        wanted_rv = meta.get("resourceVersion")
        if wanted_rv and wanted_rv != str(stored.rv):
            raise errors.conflict(rtype.plural, name, rtype.group)
        check_uid(rtype, name, meta.get("uid"), stored)
        return stored, old, self._merge_for_update(rtype, old, obj, subresource)

    def finish_update(
        self,
        rtype: ResourceType,
        old: dict[str, Any],
        new: dict[str, Any],
        subresource: str | None,
        field_validation: str = "",
    ) -> list[str]:
        """Defaulting and validation of the merged object (in place); returns warnings."""
        if rtype.kind == "Namespace" and rtype.group == "" and subresource is None:
            label_namespace(new)
        return self._admit(rtype, new, field_validation) if subresource is None else []

    def remerge(
        self, rtype: ResourceType, old: dict[str, Any], new: dict[str, Any], subresource: str | None
    ) -> dict[str, Any]:
        """Re-apply what an update may not change (after mutating webhooks patched `new`)."""
        return self._merge_for_update(rtype, old, new, subresource)

    def commit_update(
        self,
        rtype: ResourceType,
        stored: Stored,
        old: dict[str, Any],
        new: dict[str, Any],
        subresource: str | None,
    ) -> Stored:
        """Write a prepared update. 409 Conflict when the object changed since `stored` was
        read (possible only when webhooks were awaited in between)."""
        if self.collection(rtype).objects.get(stored.key) is not stored:
            raise errors.conflict(rtype.plural, stored.key[1], rtype.group)
        if _same_object(new, old):
            return stored  # a no-op write creates no version and no event
        new_meta = new["metadata"]
        if subresource is None and new.get("spec") != old.get("spec"):
            new_meta["generation"] = int(old["metadata"].get("generation") or 1) + 1
        # ShouldDeleteDuringUpdate: an update completes a pending deletion once no finalizer is
        # left, unless a graceful deletion (a pod waiting for its kubelet) is still running.
        old_meta = old["metadata"]
        if (
            old_meta.get("deletionTimestamp")
            and not new_meta.get("finalizers")
            and not old_meta.get("deletionGracePeriodSeconds")
        ):
            return self._remove(rtype, stored, new)
        return self._put(rtype, new, MODIFIED, stored)

    def _merge_for_update(
        self, rtype: ResourceType, old: dict[str, Any], obj: dict[str, Any], subresource: str | None
    ) -> dict[str, Any]:
        if subresource == "status":
            # The status subresource writes only status (and nothing of spec or metadata).
            new = dict(old)
            if "status" in obj:
                new["status"] = obj["status"]
            else:
                new.pop("status", None)
            return new
        new = dict(obj)
        new["apiVersion"] = rtype.api_version
        new["kind"] = rtype.kind
        meta = dict(new.get("metadata") or {})
        old_meta = old["metadata"]
        # Fields only the server sets survive any update.
        for keep in (
            "uid",
            "creationTimestamp",
            "namespace",
            "name",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
        ):
            if keep in old_meta:
                meta[keep] = old_meta[keep]
            else:
                meta.pop(keep, None)
        meta.pop("resourceVersion", None)
        new["metadata"] = meta
        if rtype.has_status:
            # The main resource ignores status when a status subresource exists.
            if "status" in old:
                new["status"] = old["status"]
            else:
                new.pop("status", None)
        return new


def _same_object(new: dict[str, Any], old: dict[str, Any]) -> bool:
    """Equal apart from resourceVersion (which a write would bump) and the times of
    managedFields entries that are otherwise unchanged: kube-apiserver's
    IgnoreManagedFieldsTimestampsTransformer reverts such time updates so that they alone
    never cause a write (e.g. a client-side re-apply whose patch a mutating webhook undoes)."""
    if new.keys() != old.keys():
        return False
    for key, value in new.items():
        if key == "metadata":
            old_meta = old["metadata"]
            meta_keys = (value.keys() | old_meta.keys()) - {"resourceVersion", "managedFields"}
            if any(value.get(k) != old_meta.get(k) for k in meta_keys):
                return False
            if not _same_entries(value.get("managedFields"), old_meta.get("managedFields")):
                return False
        elif value != old[key]:
            return False
    return True


def _same_entries(new: Any, old: Any) -> bool:
    if new == old:
        return True
    if not isinstance(new, list) or not isinstance(old, list) or len(new) != len(old):
        return False  # an entry added or removed is news, even for an unchanged value

    def untimed(entries: list[Any]) -> list[Any]:
        return [
            {k: v for k, v in e.items() if k != "time"} if isinstance(e, dict) else e
            for e in entries
        ]

    return untimed(new) == untimed(old)
