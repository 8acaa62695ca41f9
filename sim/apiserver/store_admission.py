"""Built-in defaulting, validation and admission of the embedded API server's `Store`: the
PriorityClass lookups of the Priority admission plugin, pod defaulting on create, and the
schema (custom resources) or strategy (built-ins) validation every create and update runs.

Separate from the create and update paths because both use it (`StoreCreate` and `StoreUpdate`
subclass `StoreAdmission`), and it is about what an object must look like, not how it is stored.
"""

from __future__ import annotations

from typing import Any

from sim.apiserver import errors, webhook_config
from sim.apiserver.crd_cel_budget import validate_crd_cel_cost
from sim.apiserver.objects import default_pod, validate_pod
from sim.apiserver.registry import ResourceType
from sim.apiserver.schema import apply_schema
from sim.apiserver.store_core import StoreCore
from sim.apiserver.workload_defaults import default_workload


class StoreAdmission(StoreCore):
    """PriorityClass lookups, pod defaulting and the validation run on every write."""

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
        elif rtype.group in ("apps", "batch"):
            default_workload(rtype.group, rtype.kind, obj)
        elif rtype.kind == "Pod" and rtype.group == "":
            causes = validate_pod(obj)
            if causes:
                raise errors.invalid(rtype.kind, name, rtype.group, causes)
        elif rtype.kind == "CustomResourceDefinition" and rtype.group == "apiextensions.k8s.io":
            # kube-apiserver refuses rules whose estimated CEL cost is over its budget.
            causes = validate_crd_cel_cost(obj)
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
