"""Volcano's CronJob controller (`cronjob-controller`, pkg/controllers/cronjob), which follows
Kubernetes' cronjob_controllerv2: at each schedule time a Volcano Job is made from
`spec.jobTemplate`, named `<cronjob>-<scheduled time in minutes since epoch>` and owned by the
CronJob.

One reconcile (`sync`):
1. the CronJob's Jobs (by controller ownerReference) update `status.active` (finished ones leave
   it: `SawCompletedJob`; vanished ones: `MissingJob`) and `status.lastSuccessfulTime` (the
   newest Completed Job's transition time, as Volcano);
2. unless suspended, the most recent unmet schedule time within `startingDeadlineSeconds` is run
   under `concurrencyPolicy`: Forbid skips it while a Job is active (`JobAlreadyActive`),
   Replace deletes the active Jobs first (`SuccessfulDelete`), Allow just creates
   (`SuccessfulCreate`); `status.lastScheduleTime` records it;
3. finished Jobs beyond `successfulJobsHistoryLimit` / `failedJobsHistoryLimit` are deleted,
   oldest first;
4. the CronJob is looked at again at its next schedule time (a timer on the injectable clock).

Where the two differ we follow Kubernetes' event reasons and messages (Volcano's are
`ForbidConcurrent`/`ReplaceConcurrent`/`StaleReference`), and Volcano where the Job is
Volcano's: finished means Completed, Failed or Terminated; the scheduled-timestamp annotation;
adopting an existing Job of ours with the same name (a restart between create and status write).
Terminated Jobs count as failed for the history limit (Volcano never trims them).
"""

from __future__ import annotations

import copy
import logging

from core.controller.clock import Clock
from core.controller.fresh import FreshRecords
from core.controller.metrics import ControllerMetrics
from core.controller.runtime import Builder, ObjectRef, Reconciler
from core.kube.client import CRONJOBS, VCJOBS, KubeClient
from core.kube.events import EventRecorder
from core.records import FlowObjectRecord, JobRecord
from flow_controller.cronjob.sync import CronJobSync, controller_uid

log = logging.getLogger("vulcan.controllers.cronjob")

CRONJOB = "cronjob-controller"


class CronJobReconciler(Reconciler[str]):
    name = CRONJOB

    def __init__(
        self,
        client: KubeClient,
        recorder: EventRecorder,
        metrics: ControllerMetrics,
        clock: Clock,
    ) -> None:
        self.client = client
        self.recorder = recorder
        self.metrics = metrics
        # The runtime's clock too: the requeue at the next schedule time is timed on it.
        self.clock = clock
        # Jobs this controller deleted that the informer may still list for a moment: not
        # "unexpected" (forgotten when the informer sees them go).
        self.deleted: set[str] = set()

    def setup(self, watch: Builder[str]) -> None:
        self.watch = watch
        self.cronjobs = watch.primary(CRONJOBS, FlowObjectRecord, on_delete=self._deleted)
        # The active list this controller wrote a moment ago decides whether Forbid skips and
        # whether a schedule time was run already: a reconcile decides on the informer's copy
        # or on the newer one that write returned (`core.controller.fresh`).
        self.fresh = FreshRecords(self.cronjobs)
        self.jobs = watch.watch(
            VCJOBS,
            JobRecord,
            on_add=self._owner_key,
            on_update=lambda _old, job: self._owner_key(job),
            on_delete=self._job_deleted,
        )

    def _deleted(self, cronjob: FlowObjectRecord) -> None:
        self.fresh.forget(cronjob.key)

    def _job_deleted(self, job: JobRecord) -> str | None:
        self.deleted.discard(job.uid)
        return self._owner_key(job)

    @staticmethod
    def _owner_key(job: JobRecord) -> str | None:
        owner = controller_uid(job)
        return None if owner is None else f"{job.namespace}/{owner[0]}"

    def reference(self, key: str) -> ObjectRef:
        namespace, name = key.split("/", 1)
        cronjob = self.cronjobs.items.get(key)
        return CRONJOBS.reference(name, namespace, cronjob.uid if cronjob else "")

    async def reconcile(self, key: str) -> float | None:
        """One sync; the seconds until the CronJob's next schedule time."""
        record = await self.fresh.get(key)
        if record is None:
            self.watch.forget(key)
            return None
        obj = copy.deepcopy(record.obj)  # the informer's is shared
        if obj["metadata"].get("deletionTimestamp"):
            return None
        sync = CronJobSync(self, obj)
        try:
            await sync.run()
        finally:
            await sync.write_status()
        if sync.requeue_at is None:
            return None
        return (sync.requeue_at - self.clock.now()).total_seconds()
