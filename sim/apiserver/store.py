"""The embedded API server's in-memory storage: objects, resourceVersions, watch history and
watch fan-out, deletion with grace periods and finalizers, and ownerReference garbage collection.

Memory and speed: an object is kept as its encoded JSON (`raw`) plus the few fields selectors
read, not as a dict (a 2.8 KB pod is ~16 KB as Python dicts, ~3 KB as bytes). It is decoded only
when written again. Every change is encoded once into one watch line shared by every watcher.
Each operation runs without awaiting, so it is atomic on the event loop.

This module is the front of the storage: `Store` combines the parts, each in its own module,
and every public name is importable from here.

- store_collection: `Stored`, `Event`, `Watcher`, `Collection` (objects, history, fan-out).
- store_core: `StoreCore`, the state, reads, write primitives and watch registration.
- store_admission: defaulting, validation and the built-in admission plugins.
- store_create / store_update / store_delete: the write operations (and the garbage collector).
- store_pods: the pods/binding and pods/eviction subresources.
"""

from __future__ import annotations

from sim.apiserver.store_collection import (
    ADDED,
    BOOKMARK,
    DELETED,
    INITIAL_EVENTS_END,
    MODIFIED,
    Collection,
    Event,
    Key,
    Matcher,
    Stored,
    Watcher,
)
from sim.apiserver.store_core import StoreCore, check_uid, now_rfc3339
from sim.apiserver.store_create import StoreCreate
from sim.apiserver.store_delete import FOREGROUND, ORPHAN, StoreDeletion
from sim.apiserver.store_pods import bind_pod, evict_pod
from sim.apiserver.store_update import StoreUpdate

__all__ = [
    "ADDED",
    "BOOKMARK",
    "DELETED",
    "FOREGROUND",
    "INITIAL_EVENTS_END",
    "MODIFIED",
    "ORPHAN",
    "Collection",
    "Event",
    "Key",
    "Matcher",
    "Store",
    "StoreCore",
    "Stored",
    "Watcher",
    "bind_pod",
    "check_uid",
    "evict_pod",
    "now_rfc3339",
]


class Store(StoreCreate, StoreUpdate, StoreDeletion):
    """The storage of the embedded API server: `StoreCore`'s state, reads and watches, with
    create, update, and delete plus garbage collection."""
