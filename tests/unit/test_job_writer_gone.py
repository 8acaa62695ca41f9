"""JobWriter.gone_groups: the PodGroups of finished jobs it deleted are remembered so a later
sync does not delete them again, and forgotten with their job (the set does not grow with every
job a long-lived controller has seen)."""

from __future__ import annotations

from typing import Any

from core.records import JobRecord
from flow_controller.job import objects
from flow_controller.job.writer import JobWriter


class _Informer:
    def add_handlers(self, **handlers: Any) -> None:
        self.handlers = handlers


def test_a_deleted_job_takes_its_gone_podgroup_along() -> None:
    writer = JobWriter(None, None, None, _Informer())  # type: ignore[arg-type]
    job = JobRecord({"metadata": {"name": "tf", "namespace": "ns", "uid": "u1"}, "spec": {}})
    other = JobRecord({"metadata": {"name": "mpi", "namespace": "ns", "uid": "u2"}, "spec": {}})
    key = f"ns/{objects.podgroup_name('tf', 'u1')}"
    kept = f"ns/{objects.podgroup_name('mpi', 'u2')}"
    writer.gone_groups.update({key, kept})
    writer.job_deleted(job)
    assert writer.gone_groups == {kept}
    writer.job_deleted(other)
    assert writer.gone_groups == set()
