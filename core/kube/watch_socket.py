"""A watch's connection read on the event loop's reader callbacks, TLS through ssl.MemoryBIO,
with reads that come in quick succession gathered: after a read that followed the previous one
within `window`, the socket is left alone for `window` before it is read again, and what arrived
meanwhile is one read.

Why: each read costs a wakeup of the event loop, and on this machine that wakeup (not the
parsing, not the decoding) was most of what a pod event cost the extender: the API server
sends every event on its own, so a burst of pods made one read, one wakeup, per event. Why not
uvloop's transport, paused and resumed: its TLS transport held back what it had already
decrypted when resumed (the pod watch stalled). Here nothing is held back: every read takes all
the socket has, and everything decrypted from it is delivered before the socket is left alone.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import time
from typing import Any, Protocol

READ_SIZE = 256 * 1024


class _Receiver(Protocol):
    def connection_made(self, transport: Any) -> None: ...
    def data_received(self, data: bytes) -> None: ...
    def connection_lost(self, exc: Exception | None) -> None: ...


class SocketReader:
    """The transport a watch protocol gets (`write`, `abort`) over a connected socket."""

    def __init__(
        self,
        sock: socket.socket,
        tls: ssl.SSLObject | None,
        incoming: ssl.MemoryBIO,
        outgoing: ssl.MemoryBIO,
        receiver: _Receiver,
        window: float,
    ) -> None:
        self.sock = sock
        self.tls = tls
        self.incoming = incoming
        self.outgoing = outgoing
        self.receiver = receiver
        self.window = window
        self.loop = asyncio.get_running_loop()
        self.closed = False
        self.last_read = 0.0
        self.rearm: asyncio.TimerHandle | None = None

    def start(self) -> None:
        self.receiver.connection_made(self)
        if not self.closed:
            self.loop.add_reader(self.sock.fileno(), self._readable)

    def write(self, data: bytes) -> None:
        """A small write (the request): sent at once or the connection fails."""
        if self.tls is not None:
            self.tls.write(data)
            data = self.outgoing.read()
        try:
            self.sock.sendall(data)
        except OSError as exc:  # (a full send buffer too: a watch only sends its request)
            self._lost(exc)

    def abort(self) -> None:
        self._lost(None)

    # ------------------------------------------------------------------------ reading

    def _readable(self) -> None:
        try:
            data = self.sock.recv(READ_SIZE)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self._lost(exc)
            return
        if self.tls is None:
            if not data:
                self._lost(None)
                return
            self.receiver.data_received(data)
        elif not self._decrypt(data):
            return
        if self.closed:
            return
        now = time.monotonic()
        # (A full read left more waiting: reading on costs no wakeup.)
        if now - self.last_read < self.window and len(data) < READ_SIZE:
            self.loop.remove_reader(self.sock.fileno())
            self.rearm = self.loop.call_later(self.window, self._resume)
        self.last_read = now

    def _decrypt(self, data: bytes) -> bool:
        """Everything `data` decrypts to, delivered; False once the connection is over."""
        assert self.tls is not None
        if data:
            self.incoming.write(data)
        else:
            self.incoming.write_eof()
        plain: list[bytes] = []
        ended: Exception | None = None
        over = not data
        while True:
            try:
                chunk = self.tls.read(READ_SIZE)
            except ssl.SSLWantReadError:
                break
            except ssl.SSLZeroReturnError:  # the server's close_notify
                over = True
                break
            except ssl.SSLError as exc:
                ended, over = exc, True
                break
            if not chunk:
                over = True
                break
            plain.append(chunk)
        pending = self.outgoing.read()  # e.g. an answer to a TLS 1.3 key update
        if pending and not over:
            try:
                self.sock.sendall(pending)
            except OSError as exc:
                ended, over = exc, True
        if plain:
            self.receiver.data_received(b"".join(plain))
        if over:
            self._lost(ended)
            return False
        return True

    def _resume(self) -> None:
        self.rearm = None
        if not self.closed:
            self.loop.add_reader(self.sock.fileno(), self._readable)

    def _lost(self, exc: Exception | None) -> None:
        if self.closed:
            return
        self.closed = True
        if self.rearm is not None:
            self.rearm.cancel()
        self.loop.remove_reader(self.sock.fileno())
        self.sock.close()
        self.receiver.connection_lost(exc)


async def connect(
    host: str,
    port: int,
    context: ssl.SSLContext | None,
    receiver: _Receiver,
    window: float,
) -> SocketReader:
    """A connection to host:port (TLS with `context`, its name checked as `host`), read into
    `receiver`. Raises OSError (ssl.SSLError among them) when it cannot be made."""
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    error: OSError | None = None
    for family, kind, proto, _, address in infos:
        sock = socket.socket(family, kind, proto)
        sock.setblocking(False)
        try:
            await loop.sock_connect(sock, address)
            break
        except OSError as exc:
            sock.close()
            error = exc
        except BaseException:  # cancelled (the connect timeout)
            sock.close()
            raise
    else:
        raise error or OSError(f"no address for {host}")
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        tls = None
        if context is not None:
            tls = context.wrap_bio(incoming, outgoing, server_hostname=host)
            await _handshake(loop, sock, tls, incoming, outgoing)
    except BaseException:
        sock.close()
        raise
    reader = SocketReader(sock, tls, incoming, outgoing, receiver, window)
    reader.start()
    return reader


async def _handshake(
    loop: asyncio.AbstractEventLoop,
    sock: socket.socket,
    tls: ssl.SSLObject,
    incoming: ssl.MemoryBIO,
    outgoing: ssl.MemoryBIO,
) -> None:
    while True:
        try:
            tls.do_handshake()
            break
        except ssl.SSLWantReadError:
            pass
        pending = outgoing.read()
        if pending:
            await loop.sock_sendall(sock, pending)
        data = await loop.sock_recv(sock, READ_SIZE)
        if not data:
            raise ConnectionResetError("the server closed the connection in the handshake")
        incoming.write(data)
    pending = outgoing.read()
    if pending:
        await loop.sock_sendall(sock, pending)
