"""The conversion between events.k8s.io/v1 and core/v1 Events (one storage, two APIs)."""

from __future__ import annotations

from sim.apiserver.events import field_aliases, to_core, to_events
from sim.apiserver.objects import field_values
from sim.apiserver.registry import BUILTINS

NEW = {
    "apiVersion": "events.k8s.io/v1",
    "kind": "Event",
    "metadata": {"name": "p.1", "namespace": "default"},
    "eventTime": "2026-01-02T03:04:05.000006Z",
    "series": {"count": 3, "lastObservedTime": "2026-01-02T03:05:00.000000Z"},
    "reportingController": "vulcan/extender",
    "reportingInstance": "ext-0",
    "action": "Binding",
    "reason": "GangAdmitted",
    "regarding": {"kind": "Pod", "namespace": "default", "name": "p", "uid": "u1"},
    "related": {"kind": "PodGroup", "name": "g"},
    "note": "admitted",
    "type": "Normal",
    "deprecatedSource": {"component": "old", "host": "h"},
    "deprecatedFirstTimestamp": "2026-01-02T03:04:05Z",
    "deprecatedLastTimestamp": "2026-01-02T03:05:00Z",
    "deprecatedCount": 3,
}


def test_every_field_has_its_counterpart() -> None:
    core = to_core(NEW)
    assert core == {
        "kind": "Event",
        "apiVersion": "v1",
        "metadata": NEW["metadata"],
        "involvedObject": NEW["regarding"],
        "reason": "GangAdmitted",
        "message": "admitted",
        "source": {"component": "old", "host": "h"},
        "firstTimestamp": "2026-01-02T03:04:05Z",
        "lastTimestamp": "2026-01-02T03:05:00Z",
        "count": 3,
        "type": "Normal",
        "eventTime": NEW["eventTime"],
        "series": NEW["series"],
        "action": "Binding",
        "related": NEW["related"],
        "reportingComponent": "vulcan/extender",
        "reportingInstance": "ext-0",
    }
    assert to_events(core) == NEW


def test_zero_values_are_written_as_go_writes_them() -> None:
    minimal = {"metadata": {"name": "e"}, "regarding": {"kind": "Pod", "name": "p"}, "note": "n"}
    core = to_core(minimal)
    assert core["source"] == {} and core["firstTimestamp"] is None
    assert core["lastTimestamp"] is None and core["eventTime"] is None
    assert core["reportingComponent"] == "" and core["reportingInstance"] == ""
    assert "count" not in core and "series" not in core and "reason" not in core
    back = to_events({"metadata": {"name": "e"}, "involvedObject": {}, "message": "m"})
    assert back["eventTime"] is None and back["regarding"] == {}
    assert back["deprecatedSource"] == {} and back["deprecatedFirstTimestamp"] is None
    assert "reportingController" not in back and "deprecatedCount" not in back
    assert back["note"] == "m"


def test_fields_the_other_api_does_not_have_are_dropped() -> None:
    assert "message" not in to_core({"metadata": {}, "message": "core name on the new API"})
    assert "note" not in to_events({"metadata": {}, "note": "new name on the core API"})


def test_stored_events_select_under_both_apis_names() -> None:
    core_events = next(t for t in BUILTINS if t.group == "" and t.plural == "events")
    fields = field_values(core_events, to_core(NEW))
    assert fields["involvedObject.name"] == fields["regarding.name"] == "p"
    assert fields["regarding.uid"] == "u1"
    assert fields["reportingComponent"] == fields["reportingController"] == "vulcan/extender"
    assert fields["source"] == "old"
    aliases = {"involvedObject.kind": "Pod"}
    field_aliases(aliases)
    assert aliases["regarding.kind"] == "Pod" and aliases["reportingController"] == ""
