"""kube-apiserver's IgnoreManagedFieldsTimestampsTransformer in the embedded store: an update
whose only change is the time of an otherwise unchanged managedFields entry writes nothing (a
client-side re-apply whose merge patch a mutating webhook undoes stays a no-op, as on a real
kube-apiserver v1.36.2); any other change, or an entry added, is still written."""

from __future__ import annotations

import copy
from typing import Any

from sim.apiserver.server import build_store


def _entry(manager: str, time: str) -> dict[str, Any]:
    return {
        "manager": manager,
        "operation": "Update",
        "apiVersion": "v1",
        "time": time,
        "fieldsType": "FieldsV1",
        "fieldsV1": {"f:data": {"f:mode": {}}},
    }


def test_a_managed_fields_time_alone_writes_nothing() -> None:
    store = build_store()
    configmaps = store.registry.get("", "v1", "configmaps")
    assert configmaps is not None
    body = {
        "metadata": {
            "name": "settings",
            "managedFields": [_entry("kubectl", "2026-01-01T00:00:00Z")],
        },
        "data": {"mode": "fast"},
    }
    created, _ = store.create(configmaps, "default", copy.deepcopy(body))
    first = created.decode()
    later = copy.deepcopy(first)
    later["metadata"]["managedFields"][0]["time"] = "2026-01-01T00:00:09Z"
    stored, _ = store.update(configmaps, "default", "settings", later)
    assert stored is created  # no new version, no event
    assert stored.decode()["metadata"]["managedFields"][0]["time"] == "2026-01-01T00:00:00Z"

    changed = copy.deepcopy(later)
    changed["data"]["mode"] = "slow"
    stored, _ = store.update(configmaps, "default", "settings", changed)
    assert stored is not created
    assert stored.decode()["metadata"]["managedFields"][0]["time"] == "2026-01-01T00:00:09Z"

    current = stored.decode()
    added = copy.deepcopy(current)
    added["metadata"]["managedFields"].append(_entry("other", "2026-01-01T00:00:10Z"))
    again, _ = store.update(configmaps, "default", "settings", added)
    assert again is not stored  # an entry added is news even when no value changed
