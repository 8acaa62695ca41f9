"""`flow.volcano.sh/v1alpha1` JobFlow and JobTemplate."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import ConfigDict, Field

from core.api import limits
from core.api.base import KubeModel, KubeObject, cel
from core.api.batch import UNIQUE_TASK_NAMES, JobPhase, JobSpec, TaskState

FLOW_GROUP = "flow.volcano.sh"
FLOW_VERSION = "v1alpha1"
FLOW_API_VERSION = f"{FLOW_GROUP}/{FLOW_VERSION}"

JobFlowPhase = Literal["Succeed", "Terminating", "Failed", "Running", "Pending"]


class HttpHeader(KubeModel):
    name: str | None = None
    value: str | None = None


class HttpGet(KubeModel):
    task_name: str | None = Field(default=None, max_length=253)
    path: str | None = None
    port: int | None = Field(default=None, ge=0, le=65535)
    http_header: HttpHeader | None = None


class TcpSocket(KubeModel):
    task_name: str | None = Field(default=None, max_length=253)
    port: int = Field(ge=0, le=65535)


class TaskStatusProbe(KubeModel):
    task_name: str | None = Field(default=None, max_length=253)
    phase: str | None = Field(default=None, max_length=63)


class Probe(KubeModel):
    """Accepted by the API but, as in Volcano, not acted upon by the controller."""

    http_get_list: list[HttpGet] | None = None
    tcp_socket_list: list[TcpSocket] | None = None
    task_status_list: list[TaskStatusProbe] | None = None


FlowName = Annotated[str, Field(max_length=limits.MAX_FLOW_NAME)]


class FlowDependsOn(KubeModel):
    targets: list[FlowName] | None = Field(default=None, max_length=limits.MAX_FLOW_TARGETS)
    probe: Probe | None = None


class FlowPatch(KubeModel):
    """Accepted by the API but, as in Volcano, not applied by the controller."""

    job_spec: JobSpec | None = None


class Flow(KubeModel):
    name: str = Field(min_length=1, max_length=limits.MAX_FLOW_NAME)
    depends_on: FlowDependsOn | None = None
    patch: FlowPatch | None = None


class JobFlowSpec(KubeModel):
    model_config = ConfigDict(
        json_schema_extra=cel(
            (
                "!has(self.flows) || self.flows.all(f, !has(f.dependsOn) || "
                "!has(f.dependsOn.targets) || f.dependsOn.targets.all(t, t != f.name))",
                "jobflow Flow is not DAG",
            ),
        )
    )

    # Every target names a flow: checked by the validating webhook and `vulcan validate`
    # (core.api.validation.validate_jobflow, Volcano's "vertex is not defined"), not by CEL: a
    # lookup of every target among every flow costs flows x targets x flows string comparisons,
    # over kube-apiserver's budget at any useful bound.
    flows: list[Flow] | None = Field(default=None, max_length=limits.MAX_FLOWS)
    job_retain_policy: Literal["retain", "delete"] | None = None


class JobRunningHistory(KubeModel):
    start_timestamp: str | None = None
    end_timestamp: str | None = None
    state: JobPhase | None = None


class JobStatusEntry(KubeModel):
    name: str | None = None
    state: JobPhase | None = None
    start_timestamp: str | None = None
    end_timestamp: str | None = None
    restart_count: int | None = None
    running_histories: list[JobRunningHistory] | None = None


class FlowCondition(KubeModel):
    phase: JobPhase | None = None
    create_time: str | None = None
    running_duration: str | None = None
    task_status_count: dict[str, TaskState] | None = None


class JobFlowState(KubeModel):
    phase: JobFlowPhase | None = None


class JobFlowStatus(KubeModel):
    pending_jobs: list[str] | None = None
    running_jobs: list[str] | None = None
    failed_jobs: list[str] | None = None
    completed_jobs: list[str] | None = None
    terminated_jobs: list[str] | None = None
    # Volcano's spelling, kept for wire compatibility.
    un_know_jobs: list[str] | None = Field(default=None, alias="unKnowJobs")
    job_status_list: list[JobStatusEntry] | None = None
    conditions: dict[str, FlowCondition] | None = None
    state: JobFlowState | None = None


class JobFlow(KubeObject):
    spec: JobFlowSpec = Field(default_factory=JobFlowSpec)
    status: JobFlowStatus | None = None


class JobTemplateStatus(KubeModel):
    job_depends_on_list: list[str] | None = None


class JobTemplate(KubeObject):
    """Its `spec` is a whole batch JobSpec, exactly as in Volcano."""

    spec: JobSpec = Field(default_factory=JobSpec, json_schema_extra=UNIQUE_TASK_NAMES)
    status: JobTemplateStatus | None = None
