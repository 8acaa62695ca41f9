"""The CPU cost of a pod watch event through the informer into the extender's cache: the old
path (aiohttp's stream, a record built for every event) against the new (the raw watch protocol
of core.kube.watch_transport, PodRecord.refresh), in the same run.

A server process streams a pod watch at a steady rate, so that most events arrive in a read of
their own as on a real cluster: every pod ADDED, then every one MODIFIED by its binding (and,
with --status-writes, by a kubelet status write no record reads). The client process runs a pod
informer feeding a ClusterCache (as the extender wires it) and reads its CPU time at each
phase's last event. The paths alternate round by round; each path's best round is reported.
Last line: `watch_us_per_event_before=... after=... ratio=...` (the ADDED and binding MODIFIED
together).
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

from bench.extender_objects import DEFAULT_TOLERATIONS
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
        "tolerations": [dict(t) for t in DEFAULT_TOLERATIONS],
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


def kubelet_status(obj: dict[str, Any]) -> dict[str, Any]:
    """`obj` after its kubelet's first status write (nothing a record reads changes)."""
    status = obj["status"]
    status.update(podIP="10.0.0.1", hostIP="192.168.0.1", startTime="2026-11-29T06:00:02Z")
    status["conditions"].append({"type": "Initialized", "status": "True"})
    status["containerStatuses"] = [
        {"name": "main", "ready": False, "restartCount": 0, "state": {"waiting": {}}}
    ]
    obj["metadata"]["managedFields"].append({"manager": "kubelet", "operation": "Update"})
    return obj


def events(pods: int, status_writes: bool) -> list[bytes]:
    """Every pod ADDED, then every one MODIFIED by its binding, then (`status_writes`) by its
    kubelet's first status write, one line each, in that order: the CPU is read at each
    phase's last event."""
    rv = 10
    phases: list[list[bytes]] = [[], [], []]
    for i in range(pods):
        for phase, (kind, obj) in enumerate(
            (
                ("ADDED", pod(i, rv + 1, None)),
                ("MODIFIED", pod(i, rv + 2, f"node-{i % 100}")),
                ("MODIFIED", kubelet_status(pod(i, rv + 3, f"node-{i % 100}"))),
            )
        ):
            phases[phase].append(orjson.dumps({"type": kind, "object": obj}) + b"\n")
        rv += 3
    return phases[0] + phases[1] + (phases[2] if status_writes else [])


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


PHASES = ("added", "bound", "status")


async def one_round(url: str, pods: int, phases: int, after: bool) -> dict[str, float]:
    """CPU µs of this process per event of each phase (added, bound, status), on the old path
    (aiohttp's stream, every record built) or the new (the raw protocol, PodRecord.refresh)."""
    client = await KubeClient.connect(ClientOptions(master=url, qps=0, burst=0))
    client.raw_watch = after
    cache = ClusterCache()
    informer: Informer[PodRecord] = Informer(client, PODS, PodRecord)
    if not after:
        informer._refresh = None
    informer.add_handlers(cache.on_pod_add, cache.on_pod_update, cache.on_pod_delete)
    done = asyncio.Event()
    marks: list[float] = []
    seen = 0

    def count(*_: PodRecord) -> None:
        nonlocal seen
        seen += 1
        if seen % pods == 0:
            marks.append(time.process_time())
            if len(marks) == phases:
                done.set()

    informer.add_handlers(count, count)
    await informer._list()  # the (empty) list is not measured
    started = time.process_time()
    task = asyncio.create_task(informer._watch())
    waiter = asyncio.create_task(done.wait())
    await asyncio.wait((task, waiter), return_when=asyncio.FIRST_COMPLETED)
    if not done.is_set():
        waiter.cancel()
        await client.close()
        raise RuntimeError(f"the watch ended before every event came: {task.exception()}")
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    await client.close()
    assert len(cache.pods) == pods and all(p.node for p in cache.pods.values())
    return {
        PHASES[n]: (mark - (marks[n - 1] if n else started)) / pods * 1e6
        for n, mark in enumerate(marks)
    }


async def measure(pods: int, rounds: int, rate: float, status_writes: bool) -> dict[str, float]:
    """Each path's best round, per phase and over the ADDED and binding MODIFIED together."""
    lines = events(pods, status_writes)
    phases = 3 if status_writes else 2
    best: dict[str, float] = {}
    for _ in range(rounds):
        for label, after in (("before", False), ("after", True)):
            sock = socket.create_server(("127.0.0.1", 0))
            port = sock.getsockname()[1]
            server = multiprocessing.get_context("fork").Process(
                target=_server_main, args=(sock, lines, rate), daemon=True
            )
            server.start()
            sock.close()
            try:
                costs = await one_round(f"http://127.0.0.1:{port}", pods, phases, after)
            finally:
                server.kill()
                server.join()
            costs["event"] = (costs["added"] + costs["bound"]) / 2
            print(label, " ".join(f"{k}={v:.1f}us" for k, v in costs.items()), flush=True)
            for phase, us in costs.items():
                key = f"{label}_{phase}"
                best[key] = min(best.get(key, us), us)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pods", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rate", type=float, default=2000.0, help="events per second sent")
    parser.add_argument(
        "--status-writes",
        action="store_true",
        help="each pod also MODIFIED by a kubelet status write its record does not read",
    )
    args = parser.parse_args()
    try:
        import uvloop

        run = uvloop.run
    except ImportError:
        run = asyncio.run
    best = run(measure(args.pods, args.rounds, args.rate, args.status_writes))
    for phase in PHASES if args.status_writes else PHASES[:2]:
        before, after = best[f"before_{phase}"], best[f"after_{phase}"]
        print(f"{phase}: before={before:.1f}us after={after:.1f}us ratio={after / before:.2f}")
    before, after = best["before_event"], best["after_event"]
    print(f"watch_us_per_event_before={before:.1f} after={after:.1f} ratio={after / before:.2f}")


if __name__ == "__main__":
    main()
