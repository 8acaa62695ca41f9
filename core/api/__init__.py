"""Volcano-compatible API models (PodGroup, Queue, Job, Command, JobFlow, JobTemplate), their
admission rules, and the CRDs generated from them."""

from core.api.batch import Command, Job, JobSpec, LifecyclePolicy, TaskSpec
from core.api.errors import FieldError, InvalidObject
from core.api.flow import JobFlow, JobTemplate
from core.api.registry import KINDS, KindInfo, lookup
from core.api.scheduling import PodGroup, Queue

__all__ = [
    "KINDS",
    "Command",
    "FieldError",
    "InvalidObject",
    "Job",
    "JobFlow",
    "JobSpec",
    "JobTemplate",
    "KindInfo",
    "LifecyclePolicy",
    "PodGroup",
    "Queue",
    "TaskSpec",
    "lookup",
]
