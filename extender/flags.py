"""The extender's command-line flags (no heavy imports: parsed before anything starts)."""

from __future__ import annotations

import argparse

from core.kube.flags import add_client_flags


def add_extender_flags(parser: argparse.ArgumentParser) -> None:
    add_client_flags(parser)
    parser.add_argument(
        "--port",
        type=int,
        default=8888,
        help="port for /v1/<verb>, /healthz, /readyz and /metrics (urlPrefix: http://HOST:PORT/v1)",
    )
    parser.add_argument("--bind-address", default="0.0.0.0", help="address to listen on")
    parser.add_argument(
        "--config",
        metavar="FILE",
        help="Volcano scheduler configuration (actions and tiers of plugins)",
    )
    parser.add_argument("--log-format", choices=("text", "json"), default="text")
