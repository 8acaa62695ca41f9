"""Annotation keys the hollow kubelets read (vulcan's own keys live under `vulcan.sh/`)."""

from __future__ import annotations

from typing import Final

from core.api import keys as _core_keys

# The pod annotations are also spelled in core.api.keys (the workload side sets them); one
# spelling for both.
SIM_DURATION: Final = _core_keys.SIM_DURATION
"""Pod annotation: how long the pod's containers run (Go duration: `30s`, `1.5s`, `0s`; `inf` or
`forever`: until deleted)."""
SIM_EXIT_CODE: Final = _core_keys.SIM_EXIT_CODE
"""Pod annotation: the exit code the containers finish with (an integer)."""
SIM_TERMINATION: Final = _core_keys.SIM_TERMINATION
"""Pod annotation: how long the containers take to stop after SIGTERM (Go duration, default
`0s`; `forever`: until SIGKILL at the end of the grace period)."""
SIM_POD_IP: Final = _core_keys.SIM_POD_IP
"""Pod annotation: the address the hollow kubelet reports as the pod's IP instead of one from its
10.244.0.0/16 pool (e.g. `127.0.0.1`, so a controller's probe of the pod reaches a test server
on this machine, as a hostNetwork pod is reached at its node's address)."""
SIM_NODE_STATE: Final = "vulcan.sh/sim-node-state"
"""Node annotation: `failed` takes the node's hollow kubelet down (NotReady, no lease renewals,
no pod updates); absent or `ready` brings it back."""

NODE_STATE_FAILED: Final = "failed"
NODE_STATE_READY: Final = "ready"
