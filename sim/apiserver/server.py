"""The embedded Kubernetes API server: aiohttp over the in-memory store.

Speaks the REST API that kubectl, kubernetes-asyncio and a stock kube-scheduler (JSON mode) use:
CRUD, the three patch types, `/status`, `pods/binding`, `pods/eviction`, watches (resume, 410,
bookmarks, watch-list), selectors, discovery: what kubectl and client-go expect of kube-apiserver.

This module assembles it: `build_store` (the built-in types, the CRDs and the objects a fresh
cluster has), the kubeconfig, and `EmbeddedApiServer`, which serves an `ApiServer` over that store.
The HTTP side is `ApiServer` (`sim.apiserver.routes`) and its route mixins
(`sim.apiserver.routes_discovery`, `sim.apiserver.routes_read`, `sim.apiserver.routes_write`,
`sim.apiserver.routes_common`); their public names are re-exported here.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import os
import ssl
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import orjson
import yaml
from aiohttp import web

from core.gc_pauses import freeze_on_growth
from core.serving import start_app
from sim.apiserver.objects import DEFAULT_TOLERATION_SECONDS
from sim.apiserver.rbac import MASTERS, Rbac, read_token_file
from sim.apiserver.registry import (
    BUILTINS,
    Registry,
    load_crds,
    resource_type_from_crd,
)
from sim.apiserver.routes import ApiServer as ApiServer
from sim.apiserver.routes_common import JSON as JSON
from sim.apiserver.routes_common import Target as Target
from sim.apiserver.routes_read import DEFAULT_WATCH_TIMEOUT as DEFAULT_WATCH_TIMEOUT
from sim.apiserver.routes_read import decode_continue as decode_continue
from sim.apiserver.routes_read import encode_continue as encode_continue
from sim.apiserver.routes_write import STRATEGIC as STRATEGIC
from sim.apiserver.store import Store, now_rfc3339

log = logging.getLogger("vulcan.sim.apiserver")

_FREEZE_AFTER_GROWTH = 5000  # stored objects added before long-lived objects are frozen


# --------------------------------------------------------------------------- assembly


SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
SYSTEM_PRIORITY_CLASSES = (
    ("system-node-critical", 2000001000),
    ("system-cluster-critical", 2000000000),
)


def build_store(
    crd_dir: Path | None = None,
    *,
    watch_history: int = 10_000,
    default_not_ready_toleration_seconds: int = DEFAULT_TOLERATION_SECONDS,
    default_unreachable_toleration_seconds: int = DEFAULT_TOLERATION_SECONDS,
) -> Store:
    """A store with the built-in types, the CRDs, system namespaces and priority classes. The
    toleration seconds are kube-apiserver's --default-not-ready-toleration-seconds and
    --default-unreachable-toleration-seconds."""
    crds = load_crds(crd_dir)
    registry = Registry(BUILTINS)
    for crd in crds:
        for rtype in resource_type_from_crd(crd):
            registry.add(rtype)
    store = Store(
        registry,
        watch_history=watch_history,
        default_not_ready_toleration_seconds=default_not_ready_toleration_seconds,
        default_unreachable_toleration_seconds=default_unreachable_toleration_seconds,
    )
    namespaces = registry.get("", "v1", "namespaces")
    assert namespaces is not None
    for name in SYSTEM_NAMESPACES:
        store.create(
            namespaces,
            "",
            {
                "metadata": {"name": name},
                "spec": {"finalizers": ["kubernetes"]},
                "status": {"phase": "Active"},
            },
        )
    priority = registry.get("scheduling.k8s.io", "v1", "priorityclasses")
    assert priority is not None
    for name, value in SYSTEM_PRIORITY_CLASSES:
        store.create(
            priority,
            "",
            {
                "metadata": {"name": name},
                "value": value,
                "description": "Used for system critical pods.",
            },
        )
    crd_type = registry.get("apiextensions.k8s.io", "v1", "customresourcedefinitions")
    assert crd_type is not None
    for crd in crds:
        doc = orjson.loads(orjson.dumps(crd))
        doc["status"] = {
            "conditions": [
                {"type": "Established", "status": "True", "lastTransitionTime": now_rfc3339()}
            ]
        }
        store.create(crd_type, "", doc)
    return store


def kubeconfig(url: str, token: str | None = None, ca_pem: bytes | None = None) -> dict[str, Any]:
    cluster: dict[str, Any] = {"server": url}
    if ca_pem:
        cluster["certificate-authority-data"] = base64.b64encode(ca_pem).decode()
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "vulcan", "cluster": cluster}],
        "users": [{"name": "vulcan", "user": {"token": token} if token else {}}],
        "contexts": [
            {
                "name": "vulcan",
                "context": {"cluster": "vulcan", "user": "vulcan", "namespace": "default"},
            }
        ],
        "current-context": "vulcan",
        "preferences": {},
    }


def write_kubeconfig(
    path: str | os.PathLike[str], url: str, token: str | None = None, ca_pem: bytes | None = None
) -> None:
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(yaml.safe_dump(kubeconfig(url, token, ca_pem), sort_keys=False))


class EmbeddedApiServer:
    """`async with EmbeddedApiServer() as server:` serves on 127.0.0.1 (port 0 = any free port)
    and yields itself; `server.url` is the base URL."""

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        crd_dir: Path | None = None,
        watch_history: int = 10_000,
        bookmark_interval: float = 10.0,
        kubeconfig_out: str | os.PathLike[str] | None = None,
        default_not_ready_toleration_seconds: int = DEFAULT_TOLERATION_SECONDS,
        default_unreachable_toleration_seconds: int = DEFAULT_TOLERATION_SECONDS,
        token_auth_file: str | os.PathLike[str] | None = None,
        audit_log_path: str | os.PathLike[str] | None = None,
        tls_cert_file: str | os.PathLike[str] | None = None,
        tls_private_key_file: str | os.PathLike[str] | None = None,
        tls_ca_file: str | os.PathLike[str] | None = None,
    ) -> None:
        self.host = host
        # HTTPS when given a serving certificate (kubectl sends tokens only over HTTPS); the
        # kubeconfig written then trusts `tls_ca_file`.
        self.ssl_context: ssl.SSLContext | None = None
        self.ca_pem: bytes | None = None
        if tls_cert_file is not None and tls_private_key_file is not None:
            self.ssl_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            self.ssl_context.load_cert_chain(tls_cert_file, tls_private_key_file)
            self.ca_pem = Path(tls_ca_file).read_bytes() if tls_ca_file else None
        self.port = port
        self.store = build_store(
            crd_dir,
            watch_history=watch_history,
            default_not_ready_toleration_seconds=default_not_ready_toleration_seconds,
            default_unreachable_toleration_seconds=default_unreachable_toleration_seconds,
        )
        self.api = ApiServer(self.store, bookmark_interval=bookmark_interval)
        # With a token file, requests are authenticated by it and authorized by RBAC; the
        # kubeconfig written carries the token of its first system:masters user.
        self.admin_token: str | None = None
        if token_auth_file is not None:
            tokens = read_token_file(token_auth_file)
            self.api.rbac = Rbac(
                self.store, tokens, Path(audit_log_path) if audit_log_path else None
            )
            self.admin_token = next(
                (t for t, user in tokens.items() if MASTERS in user.groups), None
            )
        self.kubeconfig_out = kubeconfig_out
        self._runner: web.AppRunner | None = None
        self._gc_task: asyncio.Task[None] | None = None
        self._freeze_task: asyncio.Task[None] | None = None
        self.url = ""

    async def start(self) -> EmbeddedApiServer:
        self._runner, self.port = await start_app(
            self.api.app, self.host, self.port, shutdown_timeout=1.0, ssl_context=self.ssl_context
        )
        scheme = "https" if self.ssl_context is not None else "http"
        self.url = f"{scheme}://{self.host}:{self.port}"
        self.api.server_address = f"{self.host}:{self.port}"
        # A full GC over 100k stored pods otherwise pauses the event loop for ~250 ms.
        self._freeze_task = asyncio.create_task(
            freeze_on_growth(self._stored_count, growth=_FREEZE_AFTER_GROWTH),
            name="apiserver-freeze",
        )
        self._gc_task = asyncio.create_task(self.store.run_garbage_collector(), name="apiserver-gc")
        if self.kubeconfig_out:
            write_kubeconfig(self.kubeconfig_out, self.url, self.admin_token, self.ca_pem)
        log.info("embedded API server serving", extra={"url": self.url})
        return self

    def _stored_count(self) -> int:
        return sum(len(c.objects) for c in self.store.collections.values())

    async def restart(self, while_down: Callable[[Store], None] | None = None) -> None:
        """Stop serving and serve the same objects again on the same port, as a kube-apiserver
        restarts over the same etcd: open watches break, and watches resuming from a version
        before the restart get 410 Expired (the new watch cache has no history)."""
        if self._runner is not None:
            await self._runner.cleanup()
        if while_down is not None:
            while_down(self.store)  # e.g. writes through another API server replica
        self.store.reset_watch_cache()
        self._runner, _ = await start_app(
            self.api.app, self.host, self.port, shutdown_timeout=1.0, ssl_context=self.ssl_context
        )

    async def stop(self) -> None:
        if self._freeze_task is not None:
            self._freeze_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._freeze_task
        if self._gc_task is not None:
            self._gc_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._gc_task
        for coll in self.store.collections.values():
            for watcher in list(coll.watchers):
                watcher.close()
        if self._runner is not None:
            await self._runner.cleanup()
        await self.api.admission.close()

    async def __aenter__(self) -> EmbeddedApiServer:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()


@contextlib.asynccontextmanager
async def embedded_apiserver(**kwargs: Any) -> AsyncIterator[EmbeddedApiServer]:
    async with EmbeddedApiServer(**kwargs) as server:
        yield server
