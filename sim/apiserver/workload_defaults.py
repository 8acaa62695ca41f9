"""kube-apiserver's defaulting of the workload kinds (apps/v1 and batch/v1 SetDefaults_*), and
the Job strategy's generated selector, in place on every write.

What kubectl and the controllers read back depends on these: `kubectl rollout status` refuses a
StatefulSet or DaemonSet whose update strategy is not `RollingUpdate`, the Deployment controller
reads maxSurge/maxUnavailable, and a Job's pods are selected by `batch.kubernetes.io/
controller-uid` (kube-apiserver adds that selector, and the labels to the pod template, unless
`manualSelector` is true). Pod templates are not defaulted here (a real server defaults them as
pods; the controllers compare templates stored by this same server either way).
"""

from __future__ import annotations

from typing import Any

JOB_CONTROLLER_UID = "batch.kubernetes.io/controller-uid"
JOB_NAME = "batch.kubernetes.io/job-name"


def default_workload(group: str, kind: str, obj: dict[str, Any]) -> None:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    if group == "apps":
        if kind == "Deployment":
            _deployment(spec)
        elif kind == "StatefulSet":
            _statefulset(spec)
        elif kind == "DaemonSet":
            _daemonset(spec)
        elif kind == "ReplicaSet":
            spec.setdefault("replicas", 1)
    elif group == "batch" and kind == "Job":
        _job(obj, spec)


def _deployment(spec: dict[str, Any]) -> None:
    spec.setdefault("replicas", 1)
    strategy = spec.setdefault("strategy", {})
    if isinstance(strategy, dict):
        strategy.setdefault("type", "RollingUpdate")
        if strategy["type"] == "RollingUpdate":
            rolling = strategy.setdefault("rollingUpdate", {})
            if isinstance(rolling, dict):
                rolling.setdefault("maxUnavailable", "25%")
                rolling.setdefault("maxSurge", "25%")
    spec.setdefault("revisionHistoryLimit", 10)
    spec.setdefault("progressDeadlineSeconds", 600)


def _statefulset(spec: dict[str, Any]) -> None:
    spec.setdefault("replicas", 1)
    spec.setdefault("podManagementPolicy", "OrderedReady")
    strategy = spec.setdefault("updateStrategy", {})
    if isinstance(strategy, dict):
        strategy.setdefault("type", "RollingUpdate")
        rolling = strategy.get("rollingUpdate")
        # Only a given rollingUpdate gets its partition (kubectl's rollout status then
        # reports a "partitioned roll out").
        if strategy["type"] == "RollingUpdate" and isinstance(rolling, dict):
            rolling.setdefault("partition", 0)
    spec.setdefault("revisionHistoryLimit", 10)
    spec.setdefault(
        "persistentVolumeClaimRetentionPolicy", {"whenDeleted": "Retain", "whenScaled": "Retain"}
    )


def _daemonset(spec: dict[str, Any]) -> None:
    strategy = spec.setdefault("updateStrategy", {})
    if isinstance(strategy, dict):
        strategy.setdefault("type", "RollingUpdate")
        if strategy["type"] == "RollingUpdate":
            rolling = strategy.setdefault("rollingUpdate", {})
            if isinstance(rolling, dict):
                rolling.setdefault("maxUnavailable", 1)
                rolling.setdefault("maxSurge", 0)
    spec.setdefault("revisionHistoryLimit", 10)


def _job(obj: dict[str, Any], spec: dict[str, Any]) -> None:
    if spec.get("completions") is None and spec.get("parallelism") is None:
        spec["completions"] = 1
    spec.setdefault("parallelism", 1)
    spec.setdefault("backoffLimit", 6)
    spec.setdefault("completionMode", "NonIndexed")
    spec.setdefault("suspend", False)
    if spec.get("podReplacementPolicy") is None:
        spec["podReplacementPolicy"] = "TerminatingOrFailed"
    meta = obj.get("metadata") or {}
    uid, name = meta.get("uid"), meta.get("name")
    if spec.get("manualSelector") is True or not uid or spec.get("selector"):
        return
    spec["selector"] = {"matchLabels": {JOB_CONTROLLER_UID: uid}}
    template = spec.setdefault("template", {})
    if isinstance(template, dict):
        template_meta = template.setdefault("metadata", {})
        if isinstance(template_meta, dict):
            labels = template_meta.setdefault("labels", {})
            if isinstance(labels, dict):
                labels.setdefault(JOB_CONTROLLER_UID, uid)
                labels.setdefault(JOB_NAME, name)
                labels.setdefault("controller-uid", uid)
                labels.setdefault("job-name", name)
