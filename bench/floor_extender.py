"""The cheapest scheduler extender Python can be, for `bench/sim_throughput.py`'s floor phase:
every node passes filter, prioritize prefers none (`[]`), bind creates the pod's Binding. No
cache, no informers, no policy; raw HTTP on httptools both ways.

    .venv/bin/python -m bench.floor_extender --kubeconfig PATH [--port 0]

Why a floor: the throughput benchmark runs the whole cluster (API server, hollow kubelets, the
scheduler stand-in, the extender, the load generator) on the same few cores, all in Python. Its
ratio therefore mixes two costs: the extender's own work, and the test bed's cost of an extender
round trip at all (three more HTTP exchanges per pod in the stand-in, a slower pace at which
every watch carries fewer events per read). The rate with this extender is the most any extender
can reach on this machine and this test bed; vulcan's rate against it is the extender's own share.
`bench/real_throughput.py` runs it against a real kube-apiserver the same way (its kubeconfig
then carries a token).

It prints `floor extender listening on http://127.0.0.1:PORT/v1` when ready. The kubeconfig is
read at the first bind (the cluster may start after this process, to be pointed at it).
"""

from __future__ import annotations

import argparse
import asyncio
import ssl
from pathlib import Path
from typing import Any, cast

import httptools
import orjson
import uvloop
import yaml

from core.kube.go_transport import GoTransport, TransportError

BIND_TIMEOUT = 30.0


class Binder:
    """Creates Bindings on the API server the kubeconfig names: as its first user's bearer
    token when it has one (a real kube-apiserver; the embedded cluster without --rbac needs
    none), its TLS unverified when the cluster says `insecure-skip-tls-verify`."""

    def __init__(self, kubeconfig: Path) -> None:
        self.kubeconfig = kubeconfig
        self.transport: GoTransport | None = None
        self._server = ""

    def _connect(self) -> GoTransport:
        config = yaml.safe_load(self.kubeconfig.read_text())
        cluster = config["clusters"][0]["cluster"]
        self._server = cluster["server"].rstrip("/")
        token = ((config.get("users") or [{}])[0].get("user") or {}).get("token")
        context = None
        if cluster.get("insecure-skip-tls-verify"):
            context = ssl.create_default_context()
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        headers = f"Authorization: Bearer {token}\r\n".encode() if token else b""
        return GoTransport(max_idle_per_host=64, headers=headers, ssl_context=context)

    async def bind(self, args: dict[str, Any]) -> bytes:
        if self.transport is None:
            self.transport = self._connect()
        namespace, name = args["PodNamespace"], args["PodName"]
        body = orjson.dumps(
            {
                "apiVersion": "v1",
                "kind": "Binding",
                "metadata": {"name": name, "namespace": namespace, "uid": args["PodUID"]},
                "target": {"apiVersion": "v1", "kind": "Node", "name": args["Node"]},
            }
        )
        url = f"{self._server}/api/v1/namespaces/{namespace}/pods/{name}/binding"
        try:
            status, answer = await self.transport.post(url, body, b"application/json", BIND_TIMEOUT)
        except (TimeoutError, TransportError) as exc:
            return orjson.dumps({"Error": f"binding {namespace}/{name}: {exc}"})
        if status >= 300:
            return orjson.dumps({"Error": f"binding {namespace}/{name}: {status} {answer[:200]!r}"})
        return b'{"Error":""}'


class ExtenderConnection(asyncio.Protocol):
    def __init__(self, binder: Binder) -> None:
        self.binder = binder
        self.parser = httptools.HttpRequestParser(self)
        self.transport: asyncio.Transport | None = None
        self._url = b""
        self._body: list[bytes] = []

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError:
            self._reply(b'{"Error":"malformed request"}', b"400 Bad Request")
            assert self.transport is not None
            self.transport.close()

    def on_message_begin(self) -> None:
        self._url = b""
        self._body = []

    def on_url(self, url: bytes) -> None:
        self._url += url

    def on_body(self, body: bytes) -> None:
        self._body.append(body)

    def on_message_complete(self) -> None:
        verb = self._url.rsplit(b"/", 1)[-1]
        body = b"".join(self._body)
        if verb == b"filter":
            args = orjson.loads(body)
            self._reply(
                orjson.dumps(
                    {
                        "Nodes": args.get("Nodes"),
                        "NodeNames": args.get("NodeNames"),
                        "FailedNodes": {},
                        "Error": "",
                    }
                )
            )
        elif verb == b"prioritize":
            self._reply(b"[]")
        elif verb == b"bind":
            # Answered in order: kube-scheduler (like Go) sends one request at a time.
            task = asyncio.ensure_future(self.binder.bind(orjson.loads(body)))
            task.add_done_callback(self._bound)
        elif verb == b"preempt":
            self._reply(b'{"NodeNameToMetaVictims":{}}')
        else:
            self._reply(b'{"Error":"not found"}', b"404 Not Found")

    def _bound(self, done: asyncio.Future[bytes]) -> None:
        if done.cancelled():
            return
        error = done.exception()
        self._reply(orjson.dumps({"Error": f"bind: {error!r}"}) if error else done.result())

    def _reply(self, body: bytes, status: bytes = b"200 OK") -> None:
        if self.transport is None or self.transport.is_closing():
            return
        self.transport.write(
            b"HTTP/1.1 %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
            % (status, len(body), body)
        )


async def serve(kubeconfig: Path, host: str, port: int) -> None:
    binder = Binder(kubeconfig)
    server = await asyncio.get_running_loop().create_server(
        lambda: ExtenderConnection(binder), host, port
    )
    bound = server.sockets[0].getsockname()[1]
    print(f"floor extender listening on http://{host}:{bound}/v1", flush=True)
    async with server:
        await server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kubeconfig", type=Path, required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    uvloop.run(serve(args.kubeconfig, args.host, args.port))


if __name__ == "__main__":
    main()
