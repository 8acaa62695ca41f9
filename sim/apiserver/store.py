"""The embedded API server's in-memory storage: objects, resourceVersions, watch history and
watch fan-out, deletion with grace periods and finalizers, and ownerReference garbage collection.

Memory and speed: an object is kept as its encoded JSON (`raw`) plus the few fields selectors
read, not as a dict (a 2.8 KB pod is ~16 KB as Python dicts, ~3 KB as bytes). It is decoded only
when written again. Every change is encoded once into one watch line shared by every watcher.
Each operation runs without awaiting, so it is atomic on the event loop.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import secrets
import string
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any

import orjson

from sim.apiserver import errors, webhook_config
from sim.apiserver.objects import (
    DEFAULT_TOLERATION_SECONDS,
    default_node,
    default_pod,
    field_values,
    label_namespace,
    pod_is_terminal,
    validate_pod,
)
from sim.apiserver.registry import Registry, ResourceType
from sim.apiserver.schema import apply_schema

ADDED, MODIFIED, DELETED, BOOKMARK = "ADDED", "MODIFIED", "DELETED", "BOOKMARK"
INITIAL_EVENTS_END = "k8s.io/initial-events-end"
FOREGROUND = "foregroundDeletion"
ORPHAN = "orphan"
_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # Kubernetes' generateName alphabet
_GENERATED_SUFFIX = 5
_GENERATE_NAME_TRIES = 8


def _generate_name(prefix: str) -> str:
    return prefix + "".join(secrets.choice(_NAME_ALPHABET) for _ in range(_GENERATED_SUFFIX))


Key = tuple[str, str]  # (namespace, name); namespace "" for cluster-scoped


_clock_cache: list[Any] = [0, ""]


def now_rfc3339(offset_seconds: int = 0) -> str:
    """RFC 3339 UTC with second precision, as Kubernetes writes timestamps (cached per second:
    formatting was 5% of a create)."""
    second = int(time.time()) + offset_seconds
    if offset_seconds == 0 and _clock_cache[0] == second:
        return _clock_cache[1]
    text = datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    if offset_seconds == 0:
        _clock_cache[0], _clock_cache[1] = second, text
    return text


class Stored:
    """One object as stored: its JSON and what selectors and the GC read."""

    __slots__ = ("fields", "key", "labels", "owners", "raw", "rv", "uid")

    def __init__(
        self,
        key: Key,
        uid: str,
        rv: int,
        raw: bytes,
        labels: dict[str, str] | None,
        fields: dict[str, str],
        owners: tuple[str, ...],
    ) -> None:
        self.key = key
        self.uid = uid
        self.rv = rv
        self.raw = raw
        self.labels = labels
        self.fields = fields
        self.owners = owners

    def decode(self) -> dict[str, Any]:
        return orjson.loads(self.raw)


class Event:
    """One change, encoded once; `line()` is what every interested watcher receives."""

    __slots__ = ("_lines", "fields", "labels", "namespace", "prev", "raw", "rv", "type")

    def __init__(
        self,
        type_: str,
        rv: int,
        stored: Stored,
        prev: Stored | None = None,
    ) -> None:
        self.type = type_
        self.rv = rv
        self.namespace = stored.key[0]
        self.labels = stored.labels
        self.fields = stored.fields
        self.raw = stored.raw
        self.prev = (prev.labels, prev.fields) if prev is not None else None
        self._lines: dict[str, bytes] = {}

    def line(self, type_: str | None = None) -> bytes:
        type_ = type_ or self.type
        line = self._lines.get(type_)
        if line is None:
            line = b'{"type":"' + type_.encode() + b'","object":' + self.raw + b"}\n"
            self._lines[type_] = line
        return line


Matcher = Callable[[dict[str, str] | None, dict[str, str]], bool]


class Watcher:
    """One watch stream's queue. A watcher that falls too far behind is closed, like the real
    API server does with slow watchers; its client re-watches (or relists on 410)."""

    __slots__ = ("closed", "matcher", "max_pending", "namespace", "pending", "wakeup")

    def __init__(self, namespace: str | None, matcher: Matcher | None, max_pending: int) -> None:
        self.namespace = namespace
        self.matcher = matcher
        self.pending: deque[bytes] = deque()
        self.wakeup = asyncio.Event()
        self.closed = False
        self.max_pending = max_pending

    def line_for(self, event: Event) -> bytes | None:
        if self.namespace and event.namespace != self.namespace:
            return None
        if self.matcher is None:
            return event.line()
        now = self.matcher(event.labels, event.fields)
        if event.type == MODIFIED and event.prev is not None:
            before = self.matcher(*event.prev)
            if now and before:
                return event.line()
            if now:
                return event.line(ADDED)
            if before:
                return event.line(DELETED)
            return None
        return event.line() if now else None

    def offer(self, event: Event) -> None:
        if self.closed:
            return
        line = self.line_for(event)
        if line is None:
            return
        if len(self.pending) >= self.max_pending:
            self.close()
            return
        self.pending.append(line)
        self.wakeup.set()

    def close(self) -> None:
        self.closed = True
        self.wakeup.set()

    def drain(self) -> bytes:
        chunk = b"".join(self.pending)
        self.pending.clear()
        self.wakeup.clear()
        return chunk


class Collection:
    """All objects of one resource type, their recent changes and their watchers."""

    __slots__ = (
        "_sorted",
        "compacted_rv",
        "history",
        "last_rv",
        "objects",
        "rtype",
        "watchers",
    )

    def __init__(self, rtype: ResourceType, history: int) -> None:
        self.rtype = rtype
        self.objects: dict[Key, Stored] = {}
        self.history: deque[Event] = deque(maxlen=history)
        self.watchers: set[Watcher] = set()
        # Watches may resume from any resourceVersion >= compacted_rv.
        self.compacted_rv = 0
        self.last_rv = 0  # the version of the latest change in this collection
        self._sorted: tuple[int, list[Key]] = (-1, [])

    def sorted_keys(self) -> list[Key]:
        """Keys in order, re-sorted only after the collection changed (pagination)."""
        if self._sorted[0] != self.last_rv:
            self._sorted = (self.last_rv, sorted(self.objects))
        return self._sorted[1]

    def record(self, event: Event) -> None:
        if len(self.history) == self.history.maxlen and self.history:
            self.compacted_rv = self.history[0].rv
        self.history.append(event)
        self.last_rv = event.rv
        for watcher in self.watchers:
            watcher.offer(event)


class Store:
    def __init__(
        self,
        registry: Registry,
        *,
        watch_history: int = 10_000,
        watcher_backlog: int = 200_000,
        default_not_ready_toleration_seconds: int = DEFAULT_TOLERATION_SECONDS,
        default_unreachable_toleration_seconds: int = DEFAULT_TOLERATION_SECONDS,
    ) -> None:
        self.registry = registry
        self.default_not_ready_toleration_seconds = default_not_ready_toleration_seconds
        self.default_unreachable_toleration_seconds = default_unreachable_toleration_seconds
        self.rv = 0
        self.watch_history = watch_history
        self.watcher_backlog = watcher_backlog
        self.collections: dict[ResourceType, Collection] = {
            rtype: Collection(rtype, watch_history) for rtype in registry.types
        }
        self._owned: dict[str, set[tuple[ResourceType, Key]]] = {}
        self._by_uid: dict[str, tuple[ResourceType, Key]] = {}
        self._gc_pending: deque[str] = deque()
        # Owners in foreground deletion, re-checked until their last dependent is gone.
        self._foreground: set[str] = set()
        self._gc_wakeup: asyncio.Event | None = None
        self._namespaces = self.collections[registry.get("", "v1", "namespaces")]  # type: ignore[index]
        self._priorityclasses = registry.get("scheduling.k8s.io", "v1", "priorityclasses")
        self._default_priority: tuple[int, int] = (-1, 0)

    # ----------------------------------------------------------------------------- reads

    def collection(self, rtype: ResourceType) -> Collection:
        coll = self.collections.get(rtype)
        if coll is None:
            coll = self.collections[rtype] = Collection(rtype, self.watch_history)
        return coll

    def get(self, rtype: ResourceType, namespace: str, name: str) -> Stored:
        stored = self.collection(rtype).objects.get((namespace, name))
        if stored is None:
            raise errors.not_found(rtype.plural, name, rtype.group)
        return stored

    def find(self, rtype: ResourceType, namespace: str, name: str) -> Stored | None:
        return self.collection(rtype).objects.get((namespace, name))

    def list(
        self, rtype: ResourceType, namespace: str | None, matcher: Matcher | None = None
    ) -> tuple[int, list[Stored]]:
        objects: Iterable[Stored] = self.collection(rtype).objects.values()
        if namespace:
            objects = (s for s in objects if s.key[0] == namespace)
        if matcher is not None:
            objects = (s for s in objects if matcher(s.labels, s.fields))
        return self.rv, list(objects)

    def list_page(
        self,
        rtype: ResourceType,
        namespace: str | None,
        matcher: Matcher | None,
        limit: int,
        *,
        after: Key | None,
        list_rv: int | None,
    ) -> tuple[int, list[Stored], Key | None]:
        """Up to `limit` objects with keys after `after`, in key order; returns the list's
        resourceVersion, the page and the last key when more remain."""
        coll = self.collection(rtype)
        keys = coll.sorted_keys()
        index = 0 if after is None else bisect.bisect_right(keys, after)
        page: list[Stored] = []
        while index < len(keys) and len(page) < limit:
            key = keys[index]
            index += 1
            stored = coll.objects.get(key)
            if stored is None or (namespace and key[0] != namespace):
                continue
            if matcher is not None and not matcher(stored.labels, stored.fields):
                continue
            page.append(stored)
        more = index < len(keys) and len(page) == limit
        return (list_rv or self.rv), page, (page[-1].key if more and page else None)

    def reset_watch_cache(self) -> None:
        """What an API server restart does to watches: history is gone, so a watch from any
        earlier resourceVersion gets 410 Expired and its client relists."""
        for coll in self.collections.values():
            coll.history.clear()
            coll.compacted_rv = self.rv
            for watcher in list(coll.watchers):
                watcher.close()
            coll.watchers.clear()

    # ---------------------------------------------------------------------------- writes

    def _next_rv(self) -> int:
        self.rv += 1
        return self.rv

    def _stored(self, rtype: ResourceType, obj: dict[str, Any], rv: int) -> Stored:
        meta = obj["metadata"]
        meta["resourceVersion"] = str(rv)
        owners = tuple(
            ref["uid"]
            for ref in meta.get("ownerReferences") or ()
            if isinstance(ref, dict) and ref.get("uid")
        )
        return Stored(
            key=(meta.get("namespace") or "", meta["name"]),
            uid=meta["uid"],
            rv=rv,
            # orjson over-allocates its output (~4 KB for a 1.5 KB pod); an exact-size copy
            # halves the memory of a 100k-pod store (bench/apiserver_scale.py).
            raw=bytes(memoryview(orjson.dumps(obj))),
            labels=meta.get("labels") or None,
            fields=field_values(rtype, obj),
            owners=owners,
        )

    def _unindex_owners(self, rtype: ResourceType, stored: Stored) -> None:
        for owner in stored.owners:
            owned = self._owned.get(owner)
            if owned is not None:
                owned.discard((rtype, stored.key))
                if not owned:
                    del self._owned[owner]

    def _index_owners(self, rtype: ResourceType, stored: Stored, prev: Stored | None) -> None:
        if prev is not None:
            self._unindex_owners(rtype, prev)
        for owner in stored.owners:
            self._owned.setdefault(owner, set()).add((rtype, stored.key))

    def _put(
        self, rtype: ResourceType, obj: dict[str, Any], event: str, prev: Stored | None
    ) -> Stored:
        rv = self._next_rv()
        stored = self._stored(rtype, obj, rv)
        coll = self.collection(rtype)
        coll.objects[stored.key] = stored
        self._by_uid[stored.uid] = (rtype, stored.key)
        self._index_owners(rtype, stored, prev)
        coll.record(Event(event, rv, stored, prev))
        return stored

    def _remove(self, rtype: ResourceType, stored: Stored, obj: dict[str, Any]) -> Stored:
        rv = self._next_rv()
        final = self._stored(rtype, obj, rv)
        coll = self.collection(rtype)
        coll.objects.pop(stored.key, None)
        self._by_uid.pop(stored.uid, None)
        self._unindex_owners(rtype, stored)
        coll.record(Event(DELETED, rv, final))
        self._foreground.discard(stored.uid)
        self._schedule_gc(stored.uid)
        return final

    def _preemption_policy_of(self, name: str | None) -> str | None:
        """The preemptionPolicy of PriorityClass `name` (or of the global default class)."""
        if self._priorityclasses is None:
            return None
        objects = self.collection(self._priorityclasses).objects
        if name:
            stored = objects.get(("", name))
            return stored.decode().get("preemptionPolicy") if stored else None
        for stored in objects.values():
            obj = stored.decode()
            if obj.get("globalDefault"):
                return obj.get("preemptionPolicy")
        return None

    def _priority_of(self, name: str | None) -> int | None:
        """A PriorityClass's value (None if missing); without a name the global default's."""
        if self._priorityclasses is None:
            return 0
        objects = self.collection(self._priorityclasses).objects
        if name:
            stored = objects.get(("", name))
            return stored.decode().get("value", 0) if stored else None
        # The global default is looked up once per change of the priority classes.
        if self._default_priority[0] != self.collection(self._priorityclasses).last_rv:
            value = 0
            for stored in objects.values():
                obj = stored.decode()
                if obj.get("globalDefault"):
                    value = int(obj.get("value", 0))
            self._default_priority = (self.collection(self._priorityclasses).last_rv, value)
        return self._default_priority[1]

    def create(
        self,
        rtype: ResourceType,
        namespace: str,
        obj: dict[str, Any],
        *,
        field_validation: str = "",
    ) -> tuple[Stored, list[str]]:
        """Create `obj` in `namespace`. Returns the stored object and warnings."""
        self.begin_create(rtype, namespace, obj)
        warnings = self.finish_create(rtype, obj, field_validation)
        return self.commit_create(rtype, obj), warnings

    # A create runs in three steps so that admission webhooks fit where kube-apiserver calls
    # them: mutating webhooks after `begin_create` (the built-in admission plugins), validating
    # webhooks after `finish_create` (the registry's own defaulting and validation), and
    # `commit_create` last. `create` runs them back to back.

    def begin_create(self, rtype: ResourceType, namespace: str, obj: dict[str, Any]) -> None:
        """Decoding checks and the built-in mutating admission plugins (NamespaceLifecycle,
        Priority, DefaultTolerationSeconds, TaintNodesByCondition), in place."""
        if not isinstance(obj, dict):
            raise errors.bad_request("the body of the request was not a JSON object")
        meta = obj.get("metadata")
        if meta is None:
            meta = obj["metadata"] = {}
        if not isinstance(meta, dict):
            raise errors.bad_request("metadata must be an object")
        obj["apiVersion"] = rtype.api_version
        obj["kind"] = rtype.kind
        if rtype.namespaced:
            body_ns = meta.get("namespace")
            if body_ns and body_ns != namespace:
                raise errors.bad_request(
                    "the namespace of the provided object does not match the namespace sent on "
                    "the request"
                )
            meta["namespace"] = namespace
            if self._namespaces.objects.get(("", namespace)) is None:
                raise errors.not_found("namespaces", namespace)
        else:
            meta.pop("namespace", None)
        if rtype.status_on_create == "drop":
            obj.pop("status", None)
        elif rtype.status_on_create == "pod":
            self._default_new_pod(obj)
        if rtype.kind == "Node" and rtype.group == "":
            default_node(obj)

    def finish_create(
        self, rtype: ResourceType, obj: dict[str, Any], field_validation: str = ""
    ) -> list[str]:
        """The registry's BeforeCreate: name (generateName), system metadata, defaulting and
        validation. Raises 422 for an invalid object; returns warnings."""
        meta = obj["metadata"]
        if not meta.get("name"):
            prefix = meta.get("generateName")
            if not prefix:
                raise errors.invalid(
                    rtype.kind,
                    "",
                    rtype.group,
                    [
                        {
                            "reason": "FieldValueRequired",
                            "field": "metadata.name",
                            "message": "Required value: name or generateName is required",
                        }
                    ],
                )
            meta["name"] = _generate_name(prefix)
        _check_name(rtype, meta["name"])
        for server_field in ("resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds"):
            meta.pop(server_field, None)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = now_rfc3339()
        meta["generation"] = 1
        if rtype.kind == "Namespace" and rtype.group == "":
            label_namespace(obj)
        return self._admit(rtype, obj, field_validation)

    def commit_create(self, rtype: ResourceType, obj: dict[str, Any]) -> Stored:
        """Store a prepared object: 409 AlreadyExists when the name is taken. A generated name
        that collides is generated again (kube-apiserver's RetryGenerateName, up to 8 tries)."""
        meta = obj["metadata"]
        objects = self.collection(rtype).objects
        namespace = (meta.get("namespace") or "") if rtype.namespaced else ""
        prefix = meta.get("generateName")
        generated = bool(prefix) and meta["name"][:-_GENERATED_SUFFIX] == prefix
        for _ in range(_GENERATE_NAME_TRIES if generated else 1):
            if (namespace, meta["name"]) not in objects:
                return self._put(rtype, obj, ADDED, None)
            if generated:
                meta["name"] = _generate_name(prefix)
        raise errors.already_exists(rtype.plural, meta["name"], rtype.group)

    def decode_defaults(
        self, rtype: ResourceType, obj: dict[str, Any], field_validation: str = ""
    ) -> list[str]:
        """What decoding a request does before admission: a custom resource gets its schema's
        defaults and loses unknown fields (warned about, or refused with Strict). Used only
        when webhooks are called, so they see the object as kube-apiserver would show it."""
        if not rtype.custom:
            return []
        result = apply_schema(obj, rtype.schema)
        return _unknown_field_warnings(result.unknown, field_validation)

    def _admit(self, rtype: ResourceType, obj: dict[str, Any], field_validation: str) -> list[str]:
        """Defaulting and validation on every write (schema for CRs, strategy for built-ins)."""
        name = obj["metadata"]["name"]
        warnings: list[str] = []
        if rtype.custom:
            result = apply_schema(obj, rtype.schema)
            warnings += _unknown_field_warnings(result.unknown, field_validation)
            if result.causes:
                raise errors.invalid(rtype.kind, name, rtype.group, result.causes)
        elif rtype.kind == "Pod" and rtype.group == "":
            causes = validate_pod(obj)
            if causes:
                raise errors.invalid(rtype.kind, name, rtype.group, causes)
        elif rtype.group == webhook_config.GROUP:
            webhook_config.set_defaults(obj)
            causes = webhook_config.validate(obj)
            if causes:
                raise errors.invalid(rtype.kind, name, rtype.group, causes)
        return warnings

    def _default_new_pod(self, obj: dict[str, Any]) -> None:
        """Pod defaulting and admission (Priority, DefaultTolerationSeconds) for a create."""
        name = (obj.get("spec") or {}).get("priorityClassName")
        if name and self._priorityclasses is not None and self._priority_of(name) is None:
            raise errors.ApiError(
                403,
                "Forbidden",
                f'pods "{obj["metadata"].get("name") or obj["metadata"].get("generateName")}" is '
                f"forbidden: no PriorityClass with name {name} was found",
            )
        default_pod(
            obj,
            self._priority_of,
            not_ready_toleration_seconds=self.default_not_ready_toleration_seconds,
            unreachable_toleration_seconds=self.default_unreachable_toleration_seconds,
            preemption_policy_of=self._preemption_policy_of,
        )

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

    def _schedule_gc(self, uid: str) -> None:
        if uid in self._owned or uid in self._by_uid:
            self._gc_pending.append(uid)
            if self._gc_wakeup is not None:
                self._gc_wakeup.set()

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

    # ----------------------------------------------------------------------------- watch

    def watch(
        self,
        rtype: ResourceType,
        namespace: str | None,
        matcher: Matcher | None,
        resource_version: str | None,
        send_initial_events: bool,
    ) -> tuple[Watcher, list[bytes]]:
        """Register a watcher; returns it with the lines to send first (initial state or
        history replay). Raises 410 Expired when the version is older than the history."""
        coll = self.collection(rtype)
        watcher = Watcher(namespace, matcher, self.watcher_backlog)
        first: list[bytes] = []
        if send_initial_events or resource_version in (None, "", "0"):
            for stored in coll.objects.values():
                if namespace and stored.key[0] != namespace:
                    continue
                if matcher is not None and not matcher(stored.labels, stored.fields):
                    continue
                first.append(b'{"type":"ADDED","object":' + stored.raw + b"}\n")
            if send_initial_events:
                first.append(self.bookmark(rtype, initial_events_end=True))
        else:
            try:
                since = int(resource_version)
            except ValueError:
                raise errors.bad_request(f"invalid resource version: {resource_version}") from None
            if since < coll.compacted_rv:
                raise errors.expired(f"too old resource version: {since} ({coll.compacted_rv})")
            for event in coll.history:
                if event.rv > since:
                    line = watcher.line_for(event)
                    if line is not None:
                        first.append(line)
        coll.watchers.add(watcher)
        return watcher, first

    def unwatch(self, rtype: ResourceType, watcher: Watcher) -> None:
        self.collection(rtype).watchers.discard(watcher)
        watcher.close()

    def bookmark(self, rtype: ResourceType, *, initial_events_end: bool = False) -> bytes:
        meta: dict[str, Any] = {"resourceVersion": str(self.rv)}
        if initial_events_end:
            meta["annotations"] = {INITIAL_EVENTS_END: "true"}
        obj = {"kind": rtype.kind, "apiVersion": rtype.api_version, "metadata": meta}
        return b'{"type":"BOOKMARK","object":' + orjson.dumps(obj) + b"}\n"


def _unknown_field_warnings(unknown: list[str], field_validation: str) -> list[str]:
    """fieldValidation for pruned unknown fields: Strict refuses, Ignore is silent, Warn (the
    default) warns."""
    if not unknown:
        return []
    if field_validation == "Strict":
        joined = ", ".join(f'unknown field "{path}"' for path in unknown)
        raise errors.bad_request(f"strict decoding error: {joined}")
    if field_validation == "Ignore":
        return []
    return [f'unknown field "{path}"' for path in unknown]


def check_uid(rtype: ResourceType, name: str, wanted: str | None, stored: Stored) -> None:
    """A UID precondition (update, delete, binding): 409 when the object was recreated."""
    if wanted and wanted != stored.uid:
        raise errors.conflict(
            rtype.plural,
            name,
            rtype.group,
            f"Precondition failed: UID in precondition: {wanted}, UID in object meta: {stored.uid}",
        )


def _same_object(new: dict[str, Any], old: dict[str, Any]) -> bool:
    """Equal apart from resourceVersion (which a write would bump)."""
    if new.keys() != old.keys():
        return False
    for key, value in new.items():
        if key == "metadata":
            old_meta = old["metadata"]
            meta_keys = (value.keys() | old_meta.keys()) - {"resourceVersion"}
            if any(value.get(k) != old_meta.get(k) for k in meta_keys):
                return False
        elif value != old[key]:
            return False
    return True


_DNS_SUBDOMAIN_CHARS = frozenset(string.ascii_lowercase + string.digits + "-.")


def _check_name(rtype: ResourceType, name: str) -> None:
    """Object names are DNS-1123 subdomains (the rule nearly every resource uses)."""
    ok = (
        0 < len(name) <= 253
        and set(name) <= _DNS_SUBDOMAIN_CHARS
        and name[0].isalnum()
        and name[-1].isalnum()
    )
    if not ok:
        raise errors.invalid(
            rtype.kind,
            name,
            rtype.group,
            [
                {
                    "reason": "FieldValueInvalid",
                    "field": "metadata.name",
                    "message": f'Invalid value: "{name}": a lowercase RFC 1123 subdomain must '
                    "consist of lower case alphanumeric characters, '-' or '.', and must start "
                    "and end with an alphanumeric character (e.g. 'example.com')",
                }
            ],
        )


# ------------------------------------------------------------------------ pod subresources


def bind_pod(
    store: Store, rtype: ResourceType, namespace: str, name: str, binding: dict[str, Any]
) -> None:
    """POST pods/NAME/binding: assign the pod to a node, as the real Binding REST does: UID
    precondition, 409 when already assigned, the Binding's annotations copied onto the pod and
    the PodScheduled condition set."""
    if not isinstance(binding, dict):
        raise errors.bad_request("the body of the request was not a JSON object")
    target = binding.get("target") or {}
    node = target.get("name") if isinstance(target, dict) else None
    if not node:
        raise errors.invalid(
            "Binding",
            name,
            "",
            [{"reason": "FieldValueRequired", "field": "target.name", "message": "Required value"}],
        )
    stored = store.get(rtype, namespace, name)
    meta = binding.get("metadata") or {}
    pod = stored.decode()
    check_uid(rtype, name, meta.get("uid"), stored)
    if pod["metadata"].get("deletionTimestamp"):
        raise errors.conflict(
            rtype.plural, name, rtype.group, "pod is being deleted, cannot be assigned to a host"
        )
    current = (pod.get("spec") or {}).get("nodeName")
    if current:
        raise errors.conflict(
            rtype.plural, name, rtype.group, f'pod {name} is already assigned to node "{current}"'
        )
    pod.setdefault("spec", {})["nodeName"] = node
    annotations = meta.get("annotations")
    if annotations:
        pod["metadata"]["annotations"] = {
            **(pod["metadata"].get("annotations") or {}),
            **annotations,
        }
    status = pod.setdefault("status", {})
    conditions = [c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"]
    conditions.append(
        {
            "type": "PodScheduled",
            "status": "True",
            "lastProbeTime": None,
            "lastTransitionTime": now_rfc3339(),
        }
    )
    status["conditions"] = conditions
    store._put(rtype, pod, MODIFIED, stored)


def evict_pod(
    store: Store,
    rtype: ResourceType,
    namespace: str,
    name: str,
    eviction: dict[str, Any],
    pdb_allows: Callable[[dict[str, Any]], str | None],
) -> None:
    """POST pods/NAME/eviction: refused with 429 when a PodDisruptionBudget forbids it, else
    the pod is deleted with the eviction's delete options."""
    stored = store.get(rtype, namespace, name)
    pod = stored.decode()
    if not pod_is_terminal(pod):
        blocked_by = pdb_allows(pod)
        if blocked_by is not None:
            raise errors.ApiError(
                429,
                "TooManyRequests",
                "Cannot evict pod as it would violate the pod's disruption budget.",
                causes=[
                    {
                        "reason": "DisruptionBudget",
                        "message": f"The disruption budget {blocked_by} needs more healthy pods",
                    }
                ],
            )
    options = (eviction or {}).get("deleteOptions") or {}
    store.delete(
        rtype,
        namespace,
        name,
        grace_period=options.get("gracePeriodSeconds"),
        preconditions=options.get("preconditions"),
    )
