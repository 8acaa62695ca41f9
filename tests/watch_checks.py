"""What an informer's watch must survive, as scenarios run against the embedded API server
(tests/integration/test_watch_paths.py) and a real kube-apiserver (tests/real/test_watch_real.py):
a watch cut in the middle of an event, a 410 Gone, a slow handler, an object larger than a read.

A scenario gets a `Cluster`: a client straight to the API server (to write with) and a factory
for clients that go through `CuttingProxy`, a TCP proxy that can cut the watch's connection
after a given number of the server's bytes (TLS passes through it untouched).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from core.kube.client import CONFIGMAPS, KubeClient
from core.kube.informer import Informer

NAMESPACE = "default"
WAIT = 120.0  # seconds an awaited state may take on a busy machine (not a measurement)


class Blob:
    """A ConfigMap as the scenarios' informers keep it: its size and a digest of its data."""

    __slots__ = ("digest", "key", "rv", "size")

    def __init__(self, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        self.key = f"{meta['namespace']}/{meta['name']}"
        self.rv = meta.get("resourceVersion", "")
        data = (obj.get("data") or {}).get("blob", "")
        self.size = len(data)
        self.digest = hashlib.sha256(data.encode()).hexdigest()


def config_map(name: str, label: str, blob: str = "") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {"watch-test": label}},
        "data": {"blob": blob},
    }


class CuttingProxy:
    """Forwards TCP connections to (host, port); `cut_after(n)`: the connection carrying the
    server's next n bytes gets exactly those, then both its sides are closed."""

    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.port = port
        self.server: asyncio.Server | None = None
        self.cuts = 0
        self.connections = 0
        self._budget: int | None = None
        self.cut_done = asyncio.Event()
        self._writers: set[asyncio.StreamWriter] = set()

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return int(self.server.sockets[0].getsockname()[1])

    def cut_after(self, count: int) -> None:
        self._budget = count
        self.cut_done.clear()

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()
        for writer in list(self._writers):
            writer.transport.abort()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            up_reader, up_writer = await asyncio.open_connection(self.host, self.port)
        except OSError:
            writer.transport.abort()
            return
        self._writers.update((writer, up_writer))
        upstream = asyncio.create_task(self._pipe(reader, up_writer, None))
        try:
            await self._pipe(up_reader, writer, (writer, up_writer))
        finally:
            upstream.cancel()
            for side in (writer, up_writer):
                side.transport.abort()
                self._writers.discard(side)

    async def _pipe(
        self,
        source: asyncio.StreamReader,
        sink: asyncio.StreamWriter,
        both: tuple[asyncio.StreamWriter, asyncio.StreamWriter] | None,
    ) -> None:
        with contextlib.suppress(ConnectionError, OSError):
            while data := await source.read(65536):
                if both is not None and self._budget is not None:
                    if len(data) >= self._budget:
                        sink.write(data[: self._budget])
                        await sink.drain()
                        self._budget = None
                        self.cuts += 1
                        self.cut_done.set()
                        return  # the caller aborts both sides: cut mid-stream
                    self._budget -= len(data)
                sink.write(data)
                await sink.drain()


@dataclass
class Cluster:
    """`writer`: a client straight to the API server; `through(url)`: a client for `url` (the
    proxy's) as the cluster's clients are made; `host`, `port`: the API server's address."""

    writer: KubeClient
    through: Callable[[str], Awaitable[KubeClient]]
    scheme: str
    host: str
    port: int


async def _watching(
    cluster: Cluster, label: str
) -> tuple[CuttingProxy, KubeClient, Informer[Blob], asyncio.Task[None]]:
    proxy = CuttingProxy(cluster.host, cluster.port)
    port = await proxy.start()
    client = await cluster.through(f"{cluster.scheme}://127.0.0.1:{port}")
    informer: Informer[Blob] = Informer(
        client, CONFIGMAPS, Blob, namespace=NAMESPACE, label_selector=f"watch-test={label}"
    )
    return proxy, client, informer, asyncio.create_task(informer.run())


async def _stop(proxy: CuttingProxy, client: KubeClient, task: asyncio.Task[None]) -> None:
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    await client.close()
    await proxy.close()


async def _until(what: str, check: Callable[[], bool], changed: asyncio.Event) -> None:
    """Wait until `check()` holds, re-checking whenever `changed` is set."""

    async def wait() -> None:
        while not check():
            await changed.wait()
            changed.clear()

    try:
        await asyncio.wait_for(wait(), WAIT)
    except TimeoutError:
        raise AssertionError(f"timed out waiting for {what}") from None


async def cut_mid_event(cluster: Cluster, size: int) -> None:
    """The watch is cut inside an event of `size` bytes: the informer resumes from the last
    version it applied (no relist) and gets that object whole, once."""
    proxy, client, informer, task = await _watching(cluster, "cut")
    try:
        added: list[Blob] = []
        changed = asyncio.Event()
        informer.add_handlers(on_add=lambda b: (added.append(b), changed.set()))
        await informer.wait_synced(WAIT)
        await cluster.writer.create(CONFIGMAPS, config_map("cut-small", "cut"))
        await _until("the small object", lambda: len(added) == 1, changed)
        proxy.cut_after(size // 2)  # within the big event's bytes, whatever framing precedes
        blob = "x" * size
        await cluster.writer.create(CONFIGMAPS, config_map("cut-big", "cut", blob))
        await asyncio.wait_for(proxy.cut_done.wait(), WAIT)
        await _until("the big object after the cut", lambda: len(added) == 2, changed)
        big = added[1]
        assert big.key == f"{NAMESPACE}/cut-big"
        assert big.size == size
        assert big.digest == hashlib.sha256(blob.encode()).hexdigest()
        assert proxy.cuts == 1
        assert informer.relists == 1  # resumed from its resourceVersion, not relisted
        await cluster.writer.create(CONFIGMAPS, config_map("cut-after", "cut"))
        await _until("an object after the resumption", lambda: len(added) == 3, changed)
        assert [b.key.split("/")[1] for b in added] == ["cut-small", "cut-big", "cut-after"]
    finally:
        await _stop(proxy, client, task)


async def gone_while_away(
    cluster: Cluster, expire: Callable[[Informer[Blob]], Awaitable[None]]
) -> None:
    """Stopped, then resumed from a resourceVersion the server no longer has (`expire` makes it
    so): the 410 Gone makes the informer relist, and what changed meanwhile reaches its
    handlers (the delete it missed too)."""
    proxy, client, informer, task = await _watching(cluster, "gone")
    try:
        for name in ("gone-a", "gone-b"):
            await cluster.writer.create(CONFIGMAPS, config_map(name, "gone"))
        deleted: list[str] = []
        added: list[str] = []
        changed = asyncio.Event()
        informer.add_handlers(
            on_add=lambda b: (added.append(b.key), changed.set()),
            on_delete=lambda b: (deleted.append(b.key), changed.set()),
        )
        await _until("both objects", lambda: len(informer.items) == 2, changed)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await cluster.writer.delete(CONFIGMAPS, "gone-a", NAMESPACE)
        await cluster.writer.create(CONFIGMAPS, config_map("gone-c", "gone"))
        await expire(informer)
        relists = informer.relists
        task = asyncio.create_task(informer.run())
        await _until("the missed delete and create", lambda: len(deleted) == 1, changed)
        await _until("the missed create", lambda: f"{NAMESPACE}/gone-c" in added, changed)
        assert deleted == [f"{NAMESPACE}/gone-a"]
        assert sorted(informer.items) == [f"{NAMESPACE}/gone-b", f"{NAMESPACE}/gone-c"]
        assert informer.relists == relists + 1
    finally:
        await _stop(proxy, client, task)


def _create_in_thread(
    make_writer: Callable[[], Awaitable[KubeClient]], names: list[str], label: str
) -> threading.Thread:
    """Creates the objects from a thread with its own loop: the watching loop is busy in a slow
    handler, and the writes must not wait for it."""

    async def create() -> None:
        writer = await make_writer()
        try:
            for name in names:
                await writer.create(CONFIGMAPS, config_map(name, label, name))
        finally:
            await writer.close()

    thread = threading.Thread(target=lambda: asyncio.run(create()), daemon=True)
    thread.start()
    return thread


async def slow_reader(
    cluster: Cluster, make_writer: Callable[[], Awaitable[KubeClient]], count: int
) -> None:
    """A handler that takes its time on every event, while objects keep coming: every one is
    delivered, once, in order, and the watch keeps going."""
    proxy, client, informer, task = await _watching(cluster, "slow")
    try:
        added: list[str] = []
        changed = asyncio.Event()

        def slow(blob: Blob) -> None:
            time.sleep(0.005)  # a handler slower than the writes (blocks the loop, as one would)
            added.append(blob.key.split("/")[1])
            changed.set()

        informer.add_handlers(on_add=slow, on_update=lambda *_: added.append("update!"))
        await informer.wait_synced(WAIT)
        names = [f"slow-{i:04d}" for i in range(count)]
        thread = _create_in_thread(make_writer, names, "slow")
        await _until(f"{count} objects", lambda: len(added) >= count, changed)
        await asyncio.to_thread(thread.join)
        assert added == names
        assert all(informer.items[f"{NAMESPACE}/{n}"].size == len(n) for n in names)
    finally:
        await _stop(proxy, client, task)
