"""Volcano's admission webhooks, served by the extender process over HTTPS.

Paths are Volcano's (`/queues/mutate`, `/queues/validate`, `/podgroups/mutate`,
`/podgroups/validate`, `/jobs/mutate`, `/jobs/validate`, `/jobflows/validate`,
`/cronjobs/validate`, `/hypernodes/validate` (its rules in `webhook_hypernodes`)) and
vulcan's `/pods/mutate` (`webhook_pods`: a waiting gang's members behind the queue-allocation
gate); each answers an `admission.k8s.io/v1` (or v1beta1) AdmissionReview with
the rules of `core.api`: mutations are the JSONPatch from an object to
`core.api.admission.apply_defaults(object)`, validations the errors of `core.api.validation`
against a `ClusterView` of the extender's cache (`webhook_view`).

Denials carry no status code, as Volcano's do: kube-apiserver then answers 403 with
`<resource> "<name>" is forbidden: admission webhook "<webhook>" denied the request: <message>`.
The pod webhook never refuses: its configuration ignores failures, and it only adds a gate.
"""

from __future__ import annotations

import base64
import contextlib
import logging
import ssl
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web

from core.api import keys
from core.api.admission import apply_defaults, decode
from core.api.base import KubeObject
from core.api.batch import Job
from core.api.cronjob import CronJob
from core.api.errors import FieldError, InvalidObject
from core.api.flow import JobFlow
from core.api.scheduling import PodGroup, Queue
from core.api.topology import HyperNode
from core.api.validation import (
    validate,
    validate_job_update,
    validate_queue,
    validate_queue_delete,
)
from core.kube.client import KubeClient
from core.records import PodRecord
from extender.webhook_hypernodes import others, review_hypernode
from extender.webhook_pods import gate_patch
from extender.webhook_view import WebhookView

log = logging.getLogger("vulcan.extender.webhooks")

SYNC_WAIT = 5.0  # seconds a review may wait for the caches at start (under the 10 s timeout)
_MISSING = object()


@dataclass(slots=True)
class Verdict:
    allowed: bool = True
    message: str = ""
    code: int | None = None
    patch: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


Handler = Callable[[dict[str, Any]], Awaitable[Verdict]]


def _deny(errors: list[FieldError], *, with_fields: bool = True) -> Verdict:
    """Volcano returns all problems as one message. Fields are named for writes (they say what
    to fix); a refused delete has nothing to fix, so only the reasons are given."""
    parts = [str(e) if with_fields else e.reason for e in errors]
    return Verdict(allowed=False, message="; ".join(parts))


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def defaults_patch(
    raw: dict[str, Any], before: dict[str, Any], after: dict[str, Any]
) -> list[dict[str, Any]]:
    """JSONPatch operations that apply to `raw` the changes from `before` to `after` (the
    model's view of the object before and after Volcano's defaults). Only what the defaults
    changed is touched; whatever else `raw` holds stays as the user wrote it."""
    ops: list[dict[str, Any]] = []
    _diff(raw, before, after, "", ops)
    return ops


def _diff(
    raw: Any, before: dict[str, Any], after: dict[str, Any], path: str, ops: list[dict[str, Any]]
) -> None:
    for key, value in after.items():
        old = before.get(key, _MISSING)
        if old == value:
            continue
        where = f"{path}/{_escape(key)}"
        current = raw.get(key, _MISSING) if isinstance(raw, dict) else _MISSING
        if isinstance(value, dict) and isinstance(old, dict) and isinstance(current, dict):
            _diff(current, old, value, where, ops)
        else:
            ops.append(
                {"op": "add" if current is _MISSING else "replace", "path": where, "value": value}
            )
    for key in before:
        if key not in after and isinstance(raw, dict) and key in raw:
            ops.append({"op": "remove", "path": f"{path}/{_escape(key)}"})


def _decode(obj: Any) -> KubeObject:
    """The model of a reviewed object; the API server already pruned it against the CRD, so
    unknown fields are not this webhook's business."""
    if not isinstance(obj, dict):
        raise InvalidObject("object", "", [FieldError("object", "Required value")])
    _, model = decode(obj, strict_fields=False)
    return model


class AdmissionWebhooks:
    """The HTTPS application and its handlers."""

    def __init__(
        self,
        client: KubeClient,
        view: WebhookView,
        *,
        gated: Callable[[PodRecord], bool] | None = None,
    ) -> None:
        self.client = client
        self.view = view
        # The pods a waiting gang's members are gated among (vulcan's); None: none are.
        self.gated = gated
        self.app = web.Application(client_max_size=16 * 1024 * 1024)
        routes: dict[str, Handler] = {
            "/queues/mutate": self.mutate_defaults,
            "/queues/validate": self.validate_queue,
            "/podgroups/mutate": self.mutate_podgroup,
            "/podgroups/validate": self.validate_podgroup,
            "/jobs/mutate": self.mutate_defaults,
            "/jobs/validate": self.validate_job,
            "/jobflows/validate": self.validate_jobflow,
            "/cronjobs/validate": self.validate_cronjob,
            "/hypernodes/validate": self.validate_hypernode,
            "/pods/mutate": self.mutate_pod,
        }
        for path, handler in routes.items():
            self.app.router.add_post(path, self._review(path, handler))
        self.app.router.add_get("/healthz", self._healthz)
        self._runner: web.AppRunner | None = None
        self.port = 0

    # --------------------------------------------------------------------- plumbing

    def _review(
        self, path: str, handler: Handler
    ) -> Callable[[web.Request], Awaitable[web.Response]]:
        async def serve(request: web.Request) -> web.Response:
            started = time.perf_counter()
            try:
                review = orjson.loads(await request.read())
                req = review["request"]
                uid = req["uid"]
            except (orjson.JSONDecodeError, KeyError, TypeError):
                return web.Response(status=400, text="expected an AdmissionReview with a request")
            try:
                verdict = await handler(req)
            except InvalidObject as exc:
                verdict = _deny(exc.errors)
            except Exception:  # a bug here must not read as "allowed"
                log.exception("admission webhook %s failed", path)
                verdict = Verdict(
                    allowed=False, code=500, message=f"vulcan's {path} webhook failed"
                )
            response: dict[str, Any] = {"uid": uid, "allowed": verdict.allowed}
            if not verdict.allowed:
                status: dict[str, Any] = {"message": verdict.message}
                if verdict.code is not None:
                    status["code"] = verdict.code
                response["status"] = status
            elif verdict.patch:
                response["patchType"] = "JSONPatch"
                response["patch"] = base64.b64encode(orjson.dumps(verdict.patch)).decode()
            if verdict.warnings:
                response["warnings"] = verdict.warnings
            log.debug(
                "admission review",
                extra={
                    "path": path,
                    "operation": req.get("operation"),
                    "name": req.get("name"),
                    "allowed": verdict.allowed,
                    "seconds": round(time.perf_counter() - started, 6),
                },
            )
            body = {
                "apiVersion": review.get("apiVersion") or "admission.k8s.io/v1",
                "kind": "AdmissionReview",
                "response": response,
            }
            return web.Response(body=orjson.dumps(body), content_type="application/json")

        return serve

    async def _healthz(self, request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def _synced(self) -> Verdict | None:
        if await self.view.wait_synced(SYNC_WAIT):
            return None
        return Verdict(
            allowed=False,
            code=503,
            message="vulcan's admission webhook has not synced its view of the cluster yet; "
            "retry in a moment",
        )

    # --------------------------------------------------------------------- mutating

    async def mutate_defaults(self, req: dict[str, Any]) -> Verdict:
        """Queues on CREATE, Jobs on CREATE and UPDATE: Volcano's defaults as a JSONPatch.

        Jobs are defaulted on UPDATE as well (beyond Volcano): `kubectl apply` of an unchanged
        manifest replaces `spec.tasks` (an atomic list) with the manifest's tasks, which lack
        the defaults added at create (task names, maxRetry, minAvailable). Defaulting them again
        makes the update equal to the stored object, so the re-apply is a no-op instead of a
        change the validating webhook refuses. The defaults only fill what is unset, so nothing
        a user wrote is overridden."""
        obj = req.get("object")
        operation = req.get("operation")
        if not isinstance(obj, dict) or operation not in ("CREATE", "UPDATE"):
            return Verdict()
        try:
            model = _decode(obj)
        except (InvalidObject, LookupError):
            return Verdict()  # left to schema validation and the validating webhook
        if operation == "UPDATE" and not isinstance(model, Job):
            return Verdict()
        return Verdict(patch=defaults_patch(obj, model.to_dict(), apply_defaults(model).to_dict()))

    async def mutate_podgroup(self, req: dict[str, Any]) -> Verdict:
        """A PodGroup in the default queue moves to its namespace's queue
        (`scheduling.volcano.sh/queue-name` annotation on the Namespace), as Volcano does."""
        obj = req.get("object")
        if req.get("operation") != "CREATE" or not isinstance(obj, dict):
            return Verdict()
        spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
        if (spec.get("queue") or keys.DEFAULT_QUEUE) != keys.DEFAULT_QUEUE:
            return Verdict()
        namespace = req.get("namespace") or (obj.get("metadata") or {}).get("namespace") or ""
        if await self._synced() is not None:
            return Verdict()  # not known yet: leave the queue as it is rather than refuse
        # The extender's cache follows the namespaces' queue annotation (a lister, as Volcano).
        queue = self.view.cache.namespace_queues.get(namespace)
        if not queue or queue == keys.DEFAULT_QUEUE:
            return Verdict()
        if "spec" not in obj:
            return Verdict(patch=[{"op": "add", "path": "/spec", "value": {"queue": queue}}])
        op = "replace" if "queue" in spec else "add"
        return Verdict(patch=[{"op": op, "path": "/spec/queue", "value": queue}])

    async def mutate_pod(self, req: dict[str, Any]) -> Verdict:
        """A member of a gang not running yet is created behind the queue-allocation gate
        (`webhook_pods`); a view not synced yet gates nothing rather than wait."""
        obj = req.get("object")
        if self.gated is None or req.get("operation") != "CREATE" or not isinstance(obj, dict):
            return Verdict()
        if not self.view.cache.synced.is_set():
            return Verdict()
        namespace = req.get("namespace") or (obj.get("metadata") or {}).get("namespace") or ""
        return Verdict(patch=gate_patch(obj, namespace, self.gated, self.view.cache.podgroups))

    # -------------------------------------------------------------------- validating

    async def validate_queue(self, req: dict[str, Any]) -> Verdict:
        operation = req.get("operation")
        if operation not in ("CREATE", "UPDATE", "DELETE"):
            return Verdict()
        not_synced = await self._synced()
        if not_synced:
            return not_synced
        if operation == "DELETE":
            old = _decode(req.get("oldObject"))
            assert isinstance(old, Queue)
            errors = validate_queue_delete(old, await self.view.build())
            return _deny(errors, with_fields=False) if errors else Verdict()
        queue = apply_defaults(_decode(req.get("object")))
        assert isinstance(queue, Queue)
        old_queue = _decode(req.get("oldObject")) if operation == "UPDATE" else None
        assert old_queue is None or isinstance(old_queue, Queue)
        view = await self.view.build(queue.spec.parent)
        errors = validate_queue(queue, view, old=old_queue)
        return _deny(errors) if errors else Verdict()

    async def validate_podgroup(self, req: dict[str, Any]) -> Verdict:
        if req.get("operation") != "CREATE":
            return Verdict()  # Volcano validates PodGroups on CREATE only
        not_synced = await self._synced()
        if not_synced:
            return not_synced
        group = apply_defaults(_decode(req.get("object")))
        assert isinstance(group, PodGroup)
        errors = validate(group, await self.view.build(group.spec.queue))
        return _deny(errors) if errors else Verdict()

    async def validate_job(self, req: dict[str, Any]) -> Verdict:
        operation = req.get("operation")
        if operation == "UPDATE":
            # Both sides as defaulted, like CREATE: the verdict on an unchanged re-apply is the
            # same whether or not the mutating webhook ran first.
            old = apply_defaults(_decode(req.get("oldObject")))
            new = apply_defaults(_decode(req.get("object")))
            assert isinstance(old, Job) and isinstance(new, Job)
            errors = validate_job_update(old, new)
            return _deny(errors) if errors else Verdict()
        if operation != "CREATE":
            return Verdict()
        not_synced = await self._synced()
        if not_synced:
            return not_synced
        # Judged as defaulted (the mutating webhook's work is idempotent), so the verdict is
        # the same whether or not the mutating webhook is registered, as `vulcan validate`.
        job = apply_defaults(_decode(req.get("object")))
        assert isinstance(job, Job)
        errors = validate(job, await self.view.build(job.spec.queue))
        return _deny(errors) if errors else Verdict()

    async def validate_jobflow(self, req: dict[str, Any]) -> Verdict:
        if req.get("operation") not in ("CREATE", "UPDATE"):
            return Verdict()
        flow = _decode(req.get("object"))
        assert isinstance(flow, JobFlow)
        errors = validate(flow)
        return _deny(errors) if errors else Verdict()

    async def validate_cronjob(self, req: dict[str, Any]) -> Verdict:
        """Volcano's /cronjobs/validate: CREATE and UPDATE judged alike (schedule, time zone,
        name length, the job template as a Job's spec)."""
        if req.get("operation") not in ("CREATE", "UPDATE"):
            return Verdict()
        cronjob = apply_defaults(_decode(req.get("object")))
        assert isinstance(cronjob, CronJob)
        errors = validate(cronjob)
        return _deny(errors) if errors else Verdict()

    async def validate_hypernode(self, req: dict[str, Any]) -> Verdict:
        """Volcano's /hypernodes/validate (CREATE, UPDATE) plus the tree rules."""
        if req.get("operation") not in ("CREATE", "UPDATE"):
            return Verdict()
        if not await self.view.hypernodes_synced(SYNC_WAIT):
            return Verdict(allowed=False, code=503, message="HyperNodes are not synced yet")
        hypernode = _decode(req.get("object"))
        assert isinstance(hypernode, HyperNode)
        view = await self.view.build()
        view.hypernodes = others(dict(view.hypernodes or {}), hypernode.metadata.name or "")
        errors, warnings = review_hypernode(hypernode, view)
        return _deny(errors) if errors else Verdict(warnings=warnings)

    # ------------------------------------------------------------------------ serving

    async def start(self, host: str, port: int, ssl_context: ssl.SSLContext) -> int:
        self._runner = web.AppRunner(
            self.app, access_log=None, handle_signals=False, shutdown_timeout=1.0
        )
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port, ssl_context=ssl_context, reuse_address=True)
        await site.start()
        sockets = site._server.sockets if site._server else ()  # type: ignore[union-attr]
        self.port = sockets[0].getsockname()[1] if sockets else port
        return self.port

    async def stop(self) -> None:
        if self._runner is not None:
            with contextlib.suppress(Exception):
                await self._runner.cleanup()
            self._runner = None
