"""The constants of the extender-latency benchmark: the cluster's size and shape, the candidate
counts and rounds measured, the seed, and the servers' limits."""

from __future__ import annotations

JSON = "application/json"
HEADERS = {"Content-Type": JSON}
COUNTS = (500, 1_000, 5_000, 10_000)
QUICK_COUNTS = (500, 5_000)
HEADLINE = 5_000  # the candidate count of the last line
# Measured rounds per candidate count (after WARMUP untimed ones). A round costs ~2-60 ms per
# server, so these keep the whole run to a couple of minutes while giving p99 a few samples.
ROUNDS = {500: 1_000, 1_000: 1_000, 5_000: 400, 10_000: 200}
QUICK_ROUNDS = {500: 200, 5_000: 60}
WARMUP = 10
NODES = 10_000
PODS = 20_000
FULL_NODE_EVERY = 50  # every 50th node has all its GPUs taken by bound pods
GPUS_PER_NODE = 8
SEED = 20240301
REGION = "us-west-2"
STARTUP_TIMEOUT = 600.0
CLIENT_MAX_SIZE = 256 * 1024 * 1024  # the extender's own limit (extender/server.py)
METRIC = "vulcan_extender_request_duration_seconds"
