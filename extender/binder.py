"""Binding pods for kube-scheduler: the Binding is created through the API (UID precondition),
once per pod even when kube-scheduler sends the same bind again or concurrently.

- Concurrent binds for one UID share one API call (single flight) and one answer.
- "Already bound to the same node" is success; bound elsewhere is an error naming that node.
- The HTTP handler is cancelled when kube-scheduler gives up (aiohttp handler cancellation), and
  the cancellation reaches this code before the Binding is created, so no Binding is created
  for a caller that went away.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from core.kube.client import PODS, ApiError, KubeClient
from extender.protocol import BindingArgs

log = logging.getLogger("vulcan.extender.bind")

BindHook = Callable[[BindingArgs], Awaitable[dict[str, str] | None]]


class BindError(Exception):
    """A bind that failed; the message goes back to kube-scheduler as `Error`. `result` is the
    `result` label of vulcan_extender_binds_total for this answer."""

    def __init__(self, message: str, result: str = "error") -> None:
        super().__init__(message)
        self.result = result


class _Abandoned(BindError):
    """The attempt another caller was waiting on was cancelled (its client went away)."""


class Binder:
    def __init__(
        self,
        client: KubeClient,
        *,
        annotations_for: BindHook | None = None,
    ) -> None:
        self.client = client
        self._in_flight: dict[str, asyncio.Future[str]] = {}
        # The gang issue stamps placement annotations on the Binding through this hook.
        self._annotations_for = annotations_for

    async def bind(self, args: BindingArgs) -> str:
        """Bind and return how ("bound", "already_bound") or raise BindError. Safe to call
        again and concurrently for one pod."""
        key = args.pod_uid or f"{args.pod_namespace}/{args.pod_name}"
        shared = self._in_flight.get(key)
        if shared is not None:
            # The same pod is being bound right now: share that attempt's outcome, or try
            # again ourselves if that caller went away before finishing.
            try:
                await asyncio.shield(shared)
                return "already_bound"  # by the attempt it shared: one Binding per pod
            except _Abandoned:
                return await self.bind(args)
        future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._in_flight[key] = future
        try:
            result = await self._bind_once(args)
        except BaseException as exc:
            if not future.done():
                future.set_exception(
                    exc
                    if isinstance(exc, BindError)
                    else _Abandoned(f"bind of {args.pod_namespace}/{args.pod_name} was abandoned")
                )
                future.exception()  # mark retrieved: waiters may not exist
            raise
        else:
            future.set_result(result)
            return result
        finally:
            self._in_flight.pop(key, None)

    async def _bind_once(self, args: BindingArgs) -> str:
        annotations = await self._annotations_for(args) if self._annotations_for else None
        try:
            await self.client.bind_pod(
                args.pod_namespace,
                args.pod_name,
                args.node,
                uid=args.pod_uid or None,
                annotations=annotations,
            )
        except ApiError as exc:
            if exc.conflict:
                return await self._resolve_conflict(args, exc)
            if exc.not_found:
                raise BindError(
                    f"pod {args.pod_namespace}/{args.pod_name} not found", "not_found"
                ) from None
            raise BindError(
                f"binding {args.pod_namespace}/{args.pod_name} to {args.node} failed: {exc}"
            ) from None
        log.debug(
            "bound", extra={"pod": f"{args.pod_namespace}/{args.pod_name}", "node": args.node}
        )
        return "bound"

    async def _resolve_conflict(self, args: BindingArgs, exc: ApiError) -> str:
        """409: already bound (by an earlier attempt of ours) or a different pod (UID)."""
        try:
            pod: Any = await self.client.get(PODS, args.pod_name, args.pod_namespace)
        except ApiError:
            raise BindError(f"binding {args.pod_namespace}/{args.pod_name} failed: {exc}") from None
        uid = (pod.get("metadata") or {}).get("uid")
        if args.pod_uid and uid != args.pod_uid:
            raise BindError(
                f"pod {args.pod_namespace}/{args.pod_name} has UID {uid}, not "
                f"{args.pod_uid}: it was recreated",
                "uid_mismatch",
            )
        node = (pod.get("spec") or {}).get("nodeName")
        if node == args.node:
            return "already_bound"
        raise BindError(
            f'pod {args.pod_namespace}/{args.pod_name} is already bound to node "{node}"',
            "bound_elsewhere",
        )
