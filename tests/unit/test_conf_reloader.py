"""The conf watcher's decisions on one look at the file (`ConfReloader.check`)."""

from __future__ import annotations

from pathlib import Path

from prometheus_client import CollectorRegistry

from extender.conf_reload import BuiltConf, ConfMetrics, ConfReloader, build_conf, conf_hash
from plugins.framework.config import DEFAULT_SCHEDULER_CONF

OTHER = DEFAULT_SCHEDULER_CONF.replace("binpack", "nodeorder")


def reloader(path: Path) -> tuple[ConfReloader, list[BuiltConf], list[tuple[str, str, str]]]:
    applied: list[BuiltConf] = []
    events: list[tuple[str, str, str]] = []
    path.write_text(DEFAULT_SCHEDULER_CONF)
    watcher = ConfReloader(
        str(path),
        build_conf(DEFAULT_SCHEDULER_CONF),
        applied.append,
        ConfMetrics(CollectorRegistry()),
        record=lambda *event: events.append(event),
    )
    return watcher, applied, events


def sample(watcher: ConfReloader, name: str, labels: dict[str, str]) -> float | None:
    for metric in (watcher.metrics.info, watcher.metrics.reloads):
        for family in metric.collect():
            for s in family.samples:
                if s.name == name and s.labels == labels:
                    return s.value
    return None


def test_an_unchanged_or_rewritten_identical_file_is_no_reload(tmp_path: Path) -> None:
    watcher, applied, events = reloader(tmp_path / "conf")
    assert watcher.check() is None
    (tmp_path / "conf").write_text(DEFAULT_SCHEDULER_CONF)
    assert watcher.check() is None
    assert applied == [] and events == []
    assert (
        sample(watcher, "vulcan_scheduler_conf_info", {"hash": conf_hash(DEFAULT_SCHEDULER_CONF)})
        == 1
    )


def test_a_changed_conf_is_applied_and_the_hash_label_moves(tmp_path: Path) -> None:
    watcher, applied, events = reloader(tmp_path / "conf")
    (tmp_path / "conf").write_text(OTHER)
    assert watcher.check() is True
    assert [c.hash for c in applied] == [conf_hash(OTHER)]
    assert sample(watcher, "vulcan_scheduler_conf_info", {"hash": conf_hash(OTHER)}) == 1
    old = conf_hash(DEFAULT_SCHEDULER_CONF)
    assert sample(watcher, "vulcan_scheduler_conf_info", {"hash": old}) is None
    assert [e[:2] for e in events] == [("Normal", "SchedulerConfReloaded")]


def test_an_invalid_conf_is_refused_once_and_the_old_one_stays(tmp_path: Path) -> None:
    watcher, applied, events = reloader(tmp_path / "conf")
    (tmp_path / "conf").write_text("actions: allocate\ntiers:\n- plugins:\n  - name: nosuch\n")
    assert watcher.check() is False
    assert watcher.check() is None  # told once, not at every poll
    assert applied == []
    assert watcher.current.hash == conf_hash(DEFAULT_SCHEDULER_CONF)
    assert len(events) == 1 and events[0][:2] == ("Warning", "SchedulerConfRefused")
    assert "nosuch" in events[0][2]
    assert sample(watcher, "vulcan_scheduler_conf_reloads_total", {"result": "refused"}) == 1
    # Put back as it was: nothing to apply.
    (tmp_path / "conf").write_text(DEFAULT_SCHEDULER_CONF)
    assert watcher.check() is None and applied == []


def test_a_missing_file_keeps_the_conf_in_use(tmp_path: Path) -> None:
    watcher, applied, events = reloader(tmp_path / "conf")
    (tmp_path / "conf").unlink()
    assert watcher.check() is None
    assert applied == [] and events == []
    assert watcher.current.hash == conf_hash(DEFAULT_SCHEDULER_CONF)
