"""Create in the embedded API server's `Store`: the three steps of a create (decoding and the
built-in mutating admission plugins, the registry's name generation, system metadata and
validation, then the write) and the object-name rules they enforce.

Separate from updates and deletes: a create has its own steps (generateName and its retries,
namespace existence, status on create) that nothing else shares.
"""

from __future__ import annotations

import secrets
import string
import uuid
from typing import Any

from sim.apiserver import errors
from sim.apiserver.objects import default_node, label_namespace
from sim.apiserver.registry import ResourceType
from sim.apiserver.store_admission import StoreAdmission
from sim.apiserver.store_collection import ADDED, Stored
from sim.apiserver.store_core import now_rfc3339

_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # Kubernetes' generateName alphabet
_GENERATED_SUFFIX = 5
_GENERATE_NAME_TRIES = 8


def _generate_name(prefix: str) -> str:
    return prefix + "".join(secrets.choice(_NAME_ALPHABET) for _ in range(_GENERATED_SUFFIX))


class StoreCreate(StoreAdmission):
    """`create` and its three steps."""

    def create(
        self,
        rtype: ResourceType,
        namespace: str,
        obj: dict[str, Any],
        *,
        field_validation: str = "",
    ) -> tuple[Stored, list[str]]:
        """Create `obj` in `namespace`. Returns the stored object and warnings."""
        self.begin_create(rtype, namespace, obj)
        warnings = self.finish_create(rtype, obj, field_validation)
        return self.commit_create(rtype, obj), warnings

    # A create runs in three steps so that admission webhooks fit where kube-apiserver calls
    # them: mutating webhooks after `begin_create` (the built-in admission plugins), validating
    # webhooks after `finish_create` (the registry's own defaulting and validation), and
    # `commit_create` last. `create` runs them back to back.

    def begin_create(self, rtype: ResourceType, namespace: str, obj: dict[str, Any]) -> None:
        """Decoding checks and the built-in mutating admission plugins (NamespaceLifecycle,
        Priority, DefaultTolerationSeconds, TaintNodesByCondition), in place."""
        if not isinstance(obj, dict):
            raise errors.bad_request("the body of the request was not a JSON object")
        meta = obj.get("metadata")
        if meta is None:
            meta = obj["metadata"] = {}
        if not isinstance(meta, dict):
            raise errors.bad_request("metadata must be an object")
        obj["apiVersion"] = rtype.api_version
        obj["kind"] = rtype.kind
        if rtype.namespaced:
            body_ns = meta.get("namespace")
            if body_ns and body_ns != namespace:
                raise errors.bad_request(
                    "the namespace of the provided object does not match the namespace sent on "
                    "the request"
                )
            meta["namespace"] = namespace
            if self._namespaces.objects.get(("", namespace)) is None:
                raise errors.not_found("namespaces", namespace)
        else:
            meta.pop("namespace", None)
        if rtype.status_on_create == "drop":
            obj.pop("status", None)
        elif rtype.status_on_create == "pod":
            self._default_new_pod(obj)
        if rtype.kind == "Node" and rtype.group == "":
            default_node(obj)

    def finish_create(
        self, rtype: ResourceType, obj: dict[str, Any], field_validation: str = ""
    ) -> list[str]:
        """The registry's BeforeCreate: name (generateName), system metadata, defaulting and
        validation. Raises 422 for an invalid object; returns warnings."""
        meta = obj["metadata"]
        if not meta.get("name"):
            prefix = meta.get("generateName")
            if not prefix:
                raise errors.invalid(
                    rtype.kind,
                    "",
                    rtype.group,
                    [
                        {
                            "reason": "FieldValueRequired",
                            "field": "metadata.name",
                            "message": "Required value: name or generateName is required",
                        }
                    ],
                )
            meta["name"] = _generate_name(prefix)
        _check_name(rtype, meta["name"])
        for server_field in ("resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds"):
            meta.pop(server_field, None)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = now_rfc3339()
        meta["generation"] = 1
        if rtype.kind == "Namespace" and rtype.group == "":
            label_namespace(obj)
        return self._admit(rtype, obj, field_validation)

    def commit_create(self, rtype: ResourceType, obj: dict[str, Any]) -> Stored:
        """Store a prepared object: 409 AlreadyExists when the name is taken. A generated name
        that collides is generated again (kube-apiserver's RetryGenerateName, up to 8 tries)."""
        meta = obj["metadata"]
        objects = self.collection(rtype).objects
        namespace = (meta.get("namespace") or "") if rtype.namespaced else ""
        prefix = meta.get("generateName")
        generated = bool(prefix) and meta["name"][:-_GENERATED_SUFFIX] == prefix
        for _ in range(_GENERATE_NAME_TRIES if generated else 1):
            if (namespace, meta["name"]) not in objects:
                return self._put(rtype, obj, ADDED, None)
            if generated:
                meta["name"] = _generate_name(prefix)
        raise errors.already_exists(rtype.plural, meta["name"], rtype.group)


_DNS_SUBDOMAIN_CHARS = frozenset(string.ascii_lowercase + string.digits + "-.")


def _check_name(rtype: ResourceType, name: str) -> None:
    """Object names are DNS-1123 subdomains (the rule nearly every resource uses)."""
    ok = (
        0 < len(name) <= 253
        and set(name) <= _DNS_SUBDOMAIN_CHARS
        and name[0].isalnum()
        and name[-1].isalnum()
    )
    if not ok:
        raise errors.invalid(
            rtype.kind,
            name,
            rtype.group,
            [
                {
                    "reason": "FieldValueInvalid",
                    "field": "metadata.name",
                    "message": f'Invalid value: "{name}": a lowercase RFC 1123 subdomain must '
                    "consist of lower case alphanumeric characters, '-' or '.', and must start "
                    "and end with an alphanumeric character (e.g. 'example.com')",
                }
            ],
        )
