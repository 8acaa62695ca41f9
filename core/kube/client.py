"""The one client every vulcan component uses to reach the API server.

Two paths over one connection pool:
- the raw JSON path (`request`, `get`, `list`, `create`, `patch`, `stream` ...): bytes in,
  orjson out, no kubernetes-asyncio models — used by informers and hot writes (bindings, status);
- `typed`: a kubernetes-asyncio `ApiClient` for the places where speed does not matter.

Every request passes the QPS/burst limiter. 429, 5xx and connection loss are retried with
exponential backoff (honouring Retry-After); other 4xx are raised at once as `ApiError`
(409 too: a conflict is for the caller to resolve, not to retry blindly).
"""

from __future__ import annotations

import asyncio
import logging
import os
import ssl
from collections.abc import AsyncIterable, AsyncIterator, Collection, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode

import aiohttp
import orjson
from kubernetes_asyncio import config as kube_config
from kubernetes_asyncio.client import ApiClient, Configuration

from core.kube.backoff import Backoff, TokenBucket
from core.kube.flags import ClientOptions

# Flag helpers live in core.kube.flags (no heavy imports); re-exported for callers here.
from core.kube.flags import add_client_flags as add_client_flags
from core.kube.flags import options_from_args as options_from_args
from core.kube.go_transport import GoTransport, TransportError
from core.kube.watch_transport import Sink, WatchFailed
from core.kube.watch_transport import watch as raw_watch

log = logging.getLogger("vulcan.kube.client")

JSON = "application/json"
MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"


class ApiError(Exception):
    """A request the API server refused (or that could not be completed)."""

    def __init__(self, status: int, reason: str, message: str, body: Any = None) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message
        self.body = body

    @property
    def retryable(self) -> bool:
        return self.status == 429 or self.status >= 500 or self.status == 0

    @property
    def not_found(self) -> bool:
        return self.status == 404

    @property
    def conflict(self) -> bool:
        return self.status == 409

    @property
    def expired(self) -> bool:
        return self.status == 410

    @classmethod
    def from_response(cls, status: int, body: bytes) -> ApiError:
        try:
            parsed = orjson.loads(body)
        except orjson.JSONDecodeError:
            parsed = None
        if isinstance(parsed, dict) and parsed.get("kind") == "Status":
            return cls(
                status, str(parsed.get("reason") or ""), str(parsed.get("message") or ""), parsed
            )
        return cls(status, "", body.decode(errors="replace")[:500], parsed)


@dataclass(frozen=True, slots=True)
class Resource:
    """A resource type as the REST API addresses it."""

    group: str
    version: str
    plural: str
    namespaced: bool
    kind: str = ""

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def reference(self, name: str, namespace: str = "", uid: str = "") -> dict[str, str]:
        """An object of this kind as an event's `regarding` (or any object reference)."""
        ref = {"apiVersion": self.api_version, "kind": self.kind, "name": name, "uid": uid}
        if namespace:
            ref["namespace"] = namespace
        return ref

    def path(
        self,
        namespace: str | None = None,
        name: str | None = None,
        subresource: str | None = None,
    ) -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{quote(namespace, safe='')}"
        base += f"/{self.plural}"
        if name is not None:
            base += f"/{quote(name, safe='')}"
            if subresource:
                base += f"/{subresource}"
        return base


PODS = Resource("", "v1", "pods", True, "Pod")
NODES = Resource("", "v1", "nodes", False, "Node")
NAMESPACES = Resource("", "v1", "namespaces", False, "Namespace")
EVENTS = Resource("events.k8s.io", "v1", "events", True, "Event")
LEASES = Resource("coordination.k8s.io", "v1", "leases", True, "Lease")
PRIORITY_CLASSES = Resource("scheduling.k8s.io", "v1", "priorityclasses", False, "PriorityClass")
PODGROUPS = Resource("scheduling.volcano.sh", "v1beta1", "podgroups", True, "PodGroup")
QUEUES = Resource("scheduling.volcano.sh", "v1beta1", "queues", False, "Queue")
VCJOBS = Resource("batch.volcano.sh", "v1alpha1", "jobs", True, "Job")
CRONJOBS = Resource("batch.volcano.sh", "v1alpha1", "cronjobs", True, "CronJob")
COMMANDS = Resource("bus.volcano.sh", "v1alpha1", "commands", True, "Command")
JOBFLOWS = Resource("flow.volcano.sh", "v1alpha1", "jobflows", True, "JobFlow")
JOBTEMPLATES = Resource("flow.volcano.sh", "v1alpha1", "jobtemplates", True, "JobTemplate")
HYPERNODES = Resource("topology.volcano.sh", "v1alpha1", "hypernodes", False, "HyperNode")
NUMATOPOLOGIES = Resource(
    "nodeinfo.volcano.sh", "v1alpha1", "numatopologies", False, "Numatopology"
)
CONFIGMAPS = Resource("", "v1", "configmaps", True, "ConfigMap")
PVCS = Resource("", "v1", "persistentvolumeclaims", True, "PersistentVolumeClaim")
SERVICES = Resource("", "v1", "services", True, "Service")
SECRETS = Resource("", "v1", "secrets", True, "Secret")
NETWORK_POLICIES = Resource("networking.k8s.io", "v1", "networkpolicies", True, "NetworkPolicy")


async def load_configuration(options: ClientOptions) -> Configuration:
    """kubeconfig (explicit, or $KUBECONFIG / ~/.kube/config), in-cluster service account, or
    just --master; --master overrides the server of a kubeconfig, as in Kubernetes."""
    configuration = Configuration()
    kubeconfig = options.kubeconfig or os.environ.get("KUBECONFIG")
    default_path = os.path.expanduser("~/.kube/config")
    if kubeconfig or (
        not options.master
        and os.path.exists(default_path)
        and not os.environ.get("KUBERNETES_SERVICE_HOST")
    ):
        await kube_config.load_kube_config(
            config_file=kubeconfig or default_path,
            context=options.context,
            client_configuration=configuration,
        )
    elif os.environ.get("KUBERNETES_SERVICE_HOST") and not options.master:
        kube_config.load_incluster_config(client_configuration=configuration)
    elif not options.master:
        raise ValueError("no kubeconfig, no in-cluster service account and no --master given")
    if options.master:
        configuration.host = options.master.rstrip("/")
    configuration.connection_pool_maxsize = options.connections
    return configuration


def _header_lines(headers: Mapping[str, str], skip: Collection[str]) -> bytes:
    return b"".join(
        f"{name}: {value}\r\n".encode() for name, value in headers.items() if name not in skip
    )


_PROXY_VARIABLES = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY")


def _proxy_configured() -> bool:
    return any(os.environ.get(name) for name in _PROXY_VARIABLES)


class KubeClient:
    def __init__(self, configuration: Configuration, options: ClientOptions | None = None) -> None:
        self.options = options or ClientOptions()
        self.configuration = configuration
        self.host = configuration.host.rstrip("/")
        self.typed = ApiClient(configuration)
        self.typed.user_agent = self.options.user_agent
        # kubernetes-asyncio's session carries the TLS settings of the kubeconfig (in its
        # connector). It trusts the environment, which makes aiohttp look up ~/.netrc in a
        # worker thread and the proxy variables on every request (~15% of the extender's time
        # under a burst of binds). Kubernetes clients do not read netrc; they do honour proxy
        # variables, so only when one is set is the environment trusted.
        shared: aiohttp.ClientSession = self.typed.rest_client.pool_manager
        if configuration.proxy or _proxy_configured():
            self._session = shared
        else:
            self._session = aiohttp.ClientSession(
                connector=shared.connector, connector_owner=False, trust_env=False
            )
        self._limiter = TokenBucket(self.options.qps, self.options.burst)
        self._timeout = aiohttp.ClientTimeout(total=self.options.request_timeout)
        # The raw POST path (`request(..., lean=True)`), with the kubeconfig's TLS settings
        # (kubernetes-asyncio keeps them in its connector's SSL context). Not through a proxy
        # or to a TLS server name other than the host's: aiohttp's path serves those.
        context = getattr(shared.connector, "_ssl", None)
        self._ssl = context if isinstance(context, ssl.SSLContext) else None
        self._lean: GoTransport | None = None
        if not (
            configuration.proxy
            or _proxy_configured()
            or configuration.tls_server_name
            or (self.host.startswith("https:") and not isinstance(context, ssl.SSLContext))
        ):
            self._lean = GoTransport(
                self.options.connections,
                ssl_context=self._ssl,
                user_agent=self.options.user_agent.encode(),
            )
        # Watches on the raw protocol (core.kube.watch_transport) where the raw POST goes too;
        # False: through aiohttp (`stream`), as through a proxy.
        self.raw_watch = self._lean is not None
        # At most `connections` lean requests at once, as aiohttp's connector limits the rest:
        # a gang's burst of released binds then reuses kept connections instead of opening
        # (and, over TLS, handshaking) one per member.
        self._lean_slots = asyncio.Semaphore(max(1, self.options.connections))

    @classmethod
    async def connect(cls, options: ClientOptions | None = None, **kwargs: Any) -> KubeClient:
        options = options or ClientOptions(**kwargs)
        return cls(await load_configuration(options), options)

    async def close(self) -> None:
        if self._lean is not None:
            await self._lean.close()
        if self._session is not self.typed.rest_client.pool_manager:
            await self._session.close()
        await self.typed.close()

    async def __aenter__(self) -> KubeClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _url(self, path: str, query: Mapping[str, Any] | None) -> str:
        if not query:
            return self.host + path
        return (
            self.host
            + path
            + "?"
            + urlencode({k: _query_value(v) for k, v in query.items() if v is not None})
        )

    async def _headers(self, content_type: str | None) -> dict[str, str]:
        headers = {"Accept": JSON, "User-Agent": self.options.user_agent}
        if content_type:
            headers["Content-Type"] = content_type
        auth = (await self.configuration.auth_settings()).get("BearerToken")
        if auth and auth.get("value"):
            headers["Authorization"] = auth["value"]
        return headers

    # -------------------------------------------------------------------- the raw path

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        content_type: str = JSON,
        retry: bool = True,
        lean: bool = False,
    ) -> Any:
        """One API call; returns the decoded JSON answer. Raises ApiError.

        `lean`: a request with a body sent on the raw transport (core.kube.go_transport)
        instead of aiohttp's client, for the writes made per pod (a Binding, an admitted
        member's patch, a Volcano Job's pod); same retries, same errors (a 429's Retry-After
        is not read there: the backoff alone spaces the retries)."""
        data = body if isinstance(body, bytes | None) else orjson.dumps(body)
        url = self._url(path, query)
        raw = self._lean if lean and data is not None else None
        backoff = Backoff(self.options.retry_initial, self.options.retry_max)
        while True:
            await self._limiter.acquire()
            retry_after: str | None = None
            try:
                headers = await self._headers(content_type if data is not None else None)
                if raw is not None:
                    assert data is not None
                    async with self._lean_slots:
                        status, answer = await raw.post(
                            url,
                            data,
                            content_type.encode(),
                            self.options.request_timeout,
                            _header_lines(headers, skip=("Content-Type", "User-Agent")),
                            method.encode(),
                        )
                    if status < 300:
                        return orjson.loads(answer) if answer else None
                    error = ApiError.from_response(status, answer)
                else:
                    async with self._session.request(
                        method, url, data=data, headers=headers, timeout=self._timeout
                    ) as response:
                        answer = await response.read()
                        if response.status < 300:
                            return orjson.loads(answer) if answer else None
                        error = ApiError.from_response(response.status, answer)
                        retry_after = response.headers.get("Retry-After")
            except (TimeoutError, aiohttp.ClientError, ConnectionError, TransportError) as exc:
                error = ApiError(0, "ConnectionError", f"{type(exc).__name__}: {exc}")
            if not (retry and error.retryable) or backoff.attempt >= self.options.max_retries:
                raise error
            delay = backoff.next_delay()
            if retry_after and retry_after.isdigit():
                delay = max(delay, float(retry_after))
            log.debug("retrying %s %s in %.2fs: %s", method, path, delay, error)
            await asyncio.sleep(delay)

    async def get(self, resource: Resource, name: str, namespace: str | None = None) -> Any:
        return await self.request("GET", resource.path(namespace, name))

    async def list(self, resource: Resource, namespace: str | None = None, **query: Any) -> Any:
        return await self.request("GET", resource.path(namespace), query=query)

    async def create(
        self,
        resource: Resource,
        obj: Mapping[str, Any],
        namespace: str | None = None,
        *,
        lean: bool = False,
    ) -> Any:
        """`lean`: on the raw transport, as a Binding (for a write made per pod)."""
        ns = namespace or (obj.get("metadata") or {}).get("namespace")
        return await self.request("POST", resource.path(ns), body=obj, lean=lean)

    async def replace(
        self, resource: Resource, obj: Mapping[str, Any], subresource: str | None = None
    ) -> Any:
        meta = obj["metadata"]
        path = resource.path(meta.get("namespace"), meta["name"], subresource)
        return await self.request("PUT", path, body=obj)

    async def patch(
        self,
        resource: Resource,
        name: str,
        patch: Any,
        namespace: str | None = None,
        *,
        subresource: str | None = None,
        content_type: str = MERGE_PATCH,
        lean: bool = False,
    ) -> Any:
        """`lean`: on the raw transport, as a Binding (for a write made per pod)."""
        return await self.request(
            "PATCH",
            resource.path(namespace, name, subresource),
            body=patch,
            content_type=content_type,
            lean=lean,
        )

    async def delete(
        self,
        resource: Resource,
        name: str,
        namespace: str | None = None,
        *,
        grace_period: int | None = None,
        propagation: str | None = None,
        uid: str | None = None,
    ) -> Any:
        options: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1"}
        if grace_period is not None:
            options["gracePeriodSeconds"] = grace_period
        if propagation:
            options["propagationPolicy"] = propagation
        if uid:
            options["preconditions"] = {"uid": uid}
        return await self.request("DELETE", resource.path(namespace, name), body=options)

    async def bind_pod(
        self,
        namespace: str,
        name: str,
        node: str,
        *,
        uid: str | None = None,
        annotations: Mapping[str, str] | None = None,
    ) -> None:
        """POST pods/NAME/binding (raw: kubernetes-asyncio 36 raises on this success)."""
        meta: dict[str, Any] = {"name": name, "namespace": namespace}
        if uid:
            meta["uid"] = uid
        if annotations:
            meta["annotations"] = dict(annotations)
        binding = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": meta,
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        await self.request("POST", PODS.path(namespace, name, "binding"), body=binding, lean=True)

    async def stream(
        self, path: str, query: Mapping[str, Any], read_timeout: float
    ) -> AsyncIterator[bytes]:
        """A watch: yields one raw JSON line per event. Errors (incl. non-200) raise ApiError;
        the caller decides about retrying (informers relist or resume)."""
        await self._limiter.acquire()
        url = self._url(path, query)
        timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=self.options.request_timeout, sock_read=read_timeout
        )
        try:
            async with self._session.get(
                url, headers=await self._headers(None), timeout=timeout
            ) as response:
                if response.status != 200:
                    raise ApiError.from_response(response.status, await response.read())
                async for line in split_lines(response.content.iter_any()):
                    yield line
        except (TimeoutError, aiohttp.ClientError, ConnectionError) as exc:
            raise ApiError(0, "ConnectionError", f"{type(exc).__name__}: {exc}") from exc

    async def watch(
        self, path: str, query: Mapping[str, Any], read_timeout: float, sink: Sink
    ) -> None:
        """A watch until the server ends it: `sink` gets each read's complete lines (one event
        a line) in one call, from the connection's own callback. Errors (incl. non-200, and
        whatever `sink` raised) raise; the caller decides about retrying."""
        if not self.raw_watch:
            async for line in self.stream(path, query, read_timeout):
                sink([line])
            return
        await self._limiter.acquire()
        url = self._url(path, query)
        headers = _header_lines(await self._headers(None), skip=())
        try:
            await raw_watch(
                url,
                headers,
                sink,
                read_timeout=read_timeout,
                connect_timeout=self.options.request_timeout,
                ssl_context=self._ssl,
            )
        except WatchFailed as exc:
            if exc.status:
                raise ApiError.from_response(exc.status, exc.body) from exc
            raise ApiError(0, "ConnectionError", f"WatchFailed: {exc}") from exc


async def split_lines(chunks: AsyncIterable[bytes]) -> AsyncIterator[bytes]:
    """The non-blank lines of a stream read as it arrives, a watch's events. Chunks are split
    in C (`bytes.split`), every event of a read at once: reading line by line goes through the
    stream reader's Python search and an await per event, which under a stream of pod events
    cost the extender more than decoding them."""
    parts: list[bytes] = []  # a line begun in earlier chunks
    async for chunk in chunks:
        if b"\n" not in chunk:
            parts.append(chunk)
            continue
        lines = chunk.split(b"\n")
        if parts:
            parts.append(lines[0])
            lines[0] = b"".join(parts)
            parts = []
        tail = lines.pop()
        if tail:
            parts.append(tail)
        for line in lines:
            if line.strip():
                yield line
    last = b"".join(parts)
    if last.strip():
        yield last


def _query_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
