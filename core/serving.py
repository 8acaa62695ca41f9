"""Starting an aiohttp application the way every vulcan server wants it."""

from __future__ import annotations

import ssl
from collections.abc import Callable

from aiohttp import web


async def start_app(
    app: web.Application,
    host: str,
    port: int,
    *,
    shutdown_timeout: float,
    ssl_context: ssl.SSLContext | None = None,
    site: Callable[[web.AppRunner], web.BaseSite] | None = None,
) -> tuple[web.AppRunner, int]:
    """Serve `app` on host:port (port 0: any free port); returns the runner (`cleanup()` stops
    it, waiting for in-flight requests up to `shutdown_timeout`) and the port bound. `site`:
    what listens instead of a plain TCPSite (the extender's answers its verbs itself).

    No access log: it costs more than most requests. `handler_cancellation`: when a client goes
    away its handler is cancelled — a watch is unregistered at once, and a bind that
    kube-scheduler abandoned never creates a Binding afterwards.
    """
    runner = web.AppRunner(
        app,
        access_log=None,
        handle_signals=False,
        shutdown_timeout=shutdown_timeout,
        handler_cancellation=True,
    )
    await runner.setup()
    served = (
        site(runner)
        if site is not None
        else web.TCPSite(
            runner, host, port, reuse_address=True, backlog=1024, ssl_context=ssl_context
        )
    )
    await served.start()
    sockets = served._server.sockets if served._server else ()  # type: ignore[union-attr]
    return runner, (sockets[0].getsockname()[1] if sockets else port)
