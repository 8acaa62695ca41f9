"""The CPU cost of one pod watch event through the informer into the extender's cache, on the
raw watch protocol (core.kube.watch_transport) against aiohttp's stream, in the same run.

A server process streams a pod watch at a steady rate (each pod ADDED, then MODIFIED when it
is bound, as kube-apiserver sends them while kube-scheduler binds), so that most events arrive
in a read of their own as on a real cluster; the client process runs a pod informer feeding a
ClusterCache (as the extender wires it) and reports its CPU time per event. The paths alternate
round by round; each path's best round is reported. Last line:
`watch_us_per_event_before=... after=... ratio=...` (before: aiohttp's stream; after: the raw
protocol).
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import socket
import threading
import time
from typing import Any

import orjson

from core.cache import ClusterCache
from core.kube.client import PODS, KubeClient
from core.kube.flags import ClientOptions
from core.kube.informer import Informer
from core.records import PodRecord

NAMESPACE = "bench"


def pod(i: int, rv: int, node: str | None) -> dict[str, Any]:
    """A pod as kube-apiserver writes it in a watch event (defaults and managedFields filled)."""
    name = f"pod-{i}"
    fields: list[dict[str, Any]] = [
        {
            "manager": "python-requests",
            "operation": "Update",
            "apiVersion": "v1",
            "time": "2026-11-29T06:00:00Z",
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:app": {}}}, "f:spec": {}},
        }
    ]
    status: dict[str, Any] = {"phase": "Pending", "qosClass": "Burstable"}
    spec: dict[str, Any] = {
        "containers": [
            {
                "name": "main",
                "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File",
                "imagePullPolicy": "IfNotPresent",
            }
        ],
        "restartPolicy": "Always",
        "terminationGracePeriodSeconds": 30,
        "dnsPolicy": "ClusterFirst",
        "serviceAccountName": "default",
        "serviceAccount": "default",
        "securityContext": {},
        "schedulerName": "default-scheduler",
        "tolerations": [
            {
                "key": "node.kubernetes.io/not-ready",
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 300,
            },
            {
                "key": "node.kubernetes.io/unreachable",
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 300,
            },
        ],
        "priority": 0,
        "enableServiceLinks": True,
        "preemptionPolicy": "PreemptLowerPriority",
    }
    if node:
        spec["nodeName"] = node
        status["conditions"] = [
            {
                "type": "PodScheduled",
                "status": "True",
                "lastProbeTime": None,
                "lastTransitionTime": "2026-11-29T06:00:01Z",
            }
        ]
    return {
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "uid": f"00000000-0000-0000-0000-{i:012d}",
            "resourceVersion": str(rv),
            "creationTimestamp": "2026-11-29T06:00:00Z",
            "labels": {"app": "bench"},
            "managedFields": fields,
        },
        "spec": spec,
        "status": status,
    }


def events(pods: int) -> list[bytes]:
    """Each pod ADDED, then MODIFIED (bound) a few pods later, as one line each."""
    out: list[bytes] = []
    rv = 10
    lag = 4
    for i in range(pods + lag):
        if i < pods:
            rv += 1
            out.append(orjson.dumps({"type": "ADDED", "object": pod(i, rv, None)}) + b"\n")
        if i >= lag:
            rv += 1
            bound = pod(i - lag, rv, f"node-{i % 100}")
            out.append(orjson.dumps({"type": "MODIFIED", "object": bound}) + b"\n")
    return out


# ---------------------------------------------------------------------------- the server


def _read_head(conn: socket.socket, buffer: bytearray) -> bytes:
    while b"\r\n\r\n" not in buffer:
        data = conn.recv(65536)
        if not data:
            raise ConnectionError("client went away")
        buffer += data
    end = buffer.index(b"\r\n\r\n") + 4
    head = bytes(buffer[:end])
    del buffer[:end]
    return head


def _server_main(sock: socket.socket, lines: list[bytes], rate: float) -> None:
    """Blocking and paced by sleeps: one send per event, next to no CPU of its own (the
    machine's other core is the client's to use). A thread per connection."""
    chunks = [b"%x\r\n%s\r\n" % (len(line), line) for line in lines]
    while True:
        conn, _ = sock.accept()
        threading.Thread(target=_answer, args=(conn, chunks, rate), daemon=True).start()


def _answer(conn: socket.socket, chunks: list[bytes], rate: float) -> None:
    empty_list = orjson.dumps({"kind": "PodList", "metadata": {"resourceVersion": "10"}})
    buffer = bytearray()
    try:
        head = _read_head(conn, buffer)
        while b"watch=true" not in head.split(b"\r\n", 1)[0]:  # a list (kept alive)
            conn.sendall(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                b"Content-Length: %d\r\n\r\n%s" % (len(empty_list), empty_list)
            )
            head = _read_head(conn, buffer)
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn.sendall(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n"
        )
        start = time.monotonic()
        for n, chunk in enumerate(chunks):
            wait = start + n / rate - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            conn.sendall(chunk)
        time.sleep(3600)  # the watch stays open; the client ends it
    except OSError:
        pass  # the client closed the connection: its round is over
    finally:
        conn.close()


# ---------------------------------------------------------------------------- the client


async def one_round(url: str, pods: int, raw: bool) -> tuple[float, int]:
    """(CPU seconds of this process from the watch's start to the last pod bound, events)."""
    client = await KubeClient.connect(ClientOptions(master=url, qps=0, burst=0))
    client.raw_watch = raw
    cache = ClusterCache()
    informer: Informer[PodRecord] = Informer(client, PODS, PodRecord)
    informer.add_handlers(cache.on_pod_add, cache.on_pod_update, cache.on_pod_delete)
    done = asyncio.Event()
    bound = 0

    def on_update(_old: PodRecord, new: PodRecord) -> None:
        nonlocal bound
        if new.node is not None:
            bound += 1
            if bound >= pods:
                done.set()

    informer.add_handlers(on_update=on_update)
    await informer._list()  # the (empty) list is not measured
    started = time.process_time()
    task = asyncio.create_task(informer._watch())
    waiter = asyncio.create_task(done.wait())
    await asyncio.wait((task, waiter), return_when=asyncio.FIRST_COMPLETED)
    spent = time.process_time() - started
    if not done.is_set():
        waiter.cancel()
        await client.close()
        raise RuntimeError(f"the watch ended before every pod was bound: {task.exception()}")
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    await client.close()
    assert len(cache.pods) == pods
    return spent, 2 * pods


async def measure(pods: int, rounds: int, rate: float) -> dict[str, float]:
    lines = events(pods)
    best: dict[str, float] = {}
    for _ in range(rounds):
        for label, raw in (("before", False), ("after", True)):
            sock = socket.create_server(("127.0.0.1", 0))
            port = sock.getsockname()[1]
            server = multiprocessing.get_context("fork").Process(
                target=_server_main, args=(sock, lines, rate), daemon=True
            )
            server.start()
            sock.close()
            try:
                spent, count = await one_round(f"http://127.0.0.1:{port}", pods, raw)
            finally:
                server.kill()
                server.join()
            us = spent / count * 1e6
            print(f"{label}: {us:.1f} us/event ({count} events)", flush=True)
            best[label] = min(best.get(label, us), us)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pods", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rate", type=float, default=2000.0, help="events per second sent")
    args = parser.parse_args()
    try:
        import uvloop

        run = uvloop.run
    except ImportError:
        run = asyncio.run
    best = run(measure(args.pods, args.rounds, args.rate))
    before, after = best["before"], best["after"]
    print(f"watch_us_per_event_before={before:.1f} after={after:.1f} ratio={after / before:.2f}")


if __name__ == "__main__":
    main()
