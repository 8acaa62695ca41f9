"""The JSON a hollow kubelet writes: its Node (registration and status), its Lease, and the
status of the pods it runs, shaped the way a real kubelet reports them. Pure functions."""

from __future__ import annotations

import hashlib
import uuid
from datetime import UTC, datetime
from typing import Any

from core.kube.events import micro_time
from sim.kubelet.pods import BACKOFF, CREATING, STARTED, SUCCEEDED, PodRun
from sim.kubelet.profiles import NodeProfile

# Reported only when the API server's /version cannot be read: a hollow kubelet reports the API
# server's gitVersion, as a kubelet built with its control plane does (kubectl warns about a
# kubelet/server skew otherwise).
KUBELET_VERSION = "v1.36.0-vulcan-hollow"
RUNTIME_VERSION = "vulcan-hollow://1"
CONTAINER_ID_SCHEME = "vulcan-hollow://"
OS_IMAGE = "Vulcan Hollow Node"
KERNEL_VERSION = "6.8.0-vulcan-hollow"
KUBELET_PORT = 10250
LEASE_NAMESPACE = "kube-node-lease"
NOT_READY_MESSAGE = "container runtime is down (vulcan sim: node failed)"


def rfc3339(ts: float) -> str:
    """A metav1.Time: RFC 3339, UTC, second precision."""
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def go_duration(seconds: float) -> str:
    """Go's time.Duration.String() for the durations a kubelet prints (`10s`, `5m0s`, `50ms`)."""
    if seconds < 1:
        return f"{round(seconds * 1000)}ms"
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes}m{secs}s"
    if minutes:
        return f"{minutes}m{secs}s"
    return f"{secs}s"


def _stable_id(*parts: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, "vulcan-hollow:" + ":".join(parts)))


# ----------------------------------------------------------------------------------- nodes


def node_labels(name: str, profile: NodeProfile) -> dict[str, str]:
    return {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/os": "linux",
        "beta.kubernetes.io/arch": "amd64",
        "node.kubernetes.io/instance-type": profile.instance_type,
        **profile.labels,
    }


def node_conditions(
    ready: bool, heartbeat: float, ready_since: float, registered_at: float
) -> list[dict[str, Any]]:
    """The four conditions a kubelet owns. Pressure conditions never change in the sim, so
    their transition time is the registration."""
    beat = rfc3339(heartbeat)
    since = rfc3339(registered_at)

    def condition(type_: str, status: str, reason: str, message: str, at: str) -> dict[str, Any]:
        return {
            "type": type_,
            "status": status,
            "lastHeartbeatTime": beat,
            "lastTransitionTime": at,
            "reason": reason,
            "message": message,
        }

    return [
        condition(
            "MemoryPressure",
            "False",
            "KubeletHasSufficientMemory",
            "kubelet has sufficient memory available",
            since,
        ),
        condition(
            "DiskPressure",
            "False",
            "KubeletHasNoDiskPressure",
            "kubelet has no disk pressure",
            since,
        ),
        condition(
            "PIDPressure",
            "False",
            "KubeletHasSufficientPID",
            "kubelet has sufficient PID available",
            since,
        ),
        condition(
            "Ready",
            "True" if ready else "False",
            "KubeletReady" if ready else "KubeletNotReady",
            "kubelet is posting ready status" if ready else NOT_READY_MESSAGE,
            rfc3339(ready_since),
        ),
    ]


def node_status(
    name: str,
    ip: str,
    profile: NodeProfile,
    *,
    ready: bool,
    heartbeat: float,
    ready_since: float,
    registered_at: float,
    kubelet_version: str = KUBELET_VERSION,
) -> dict[str, Any]:
    return {
        "capacity": dict(profile.capacity),
        "allocatable": dict(profile.capacity),
        "conditions": node_conditions(ready, heartbeat, ready_since, registered_at),
        "addresses": [
            {"type": "InternalIP", "address": ip},
            {"type": "Hostname", "address": name},
        ],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": KUBELET_PORT}},
        "nodeInfo": {
            "machineID": _stable_id("machine", name).replace("-", ""),
            "systemUUID": _stable_id("system", name),
            "bootID": str(uuid.uuid4()),  # a new boot per kubelet process, as on a real host
            "kernelVersion": KERNEL_VERSION,
            "osImage": OS_IMAGE,
            "containerRuntimeVersion": RUNTIME_VERSION,
            "kubeletVersion": kubelet_version,
            "kubeProxyVersion": "",
            "operatingSystem": "linux",
            "architecture": "amd64",
        },
    }


def node_object(
    name: str, ip: str, profile: NodeProfile, now: float, kubelet_version: str = KUBELET_VERSION
) -> dict[str, Any]:
    """The Node a kubelet registers: labels, and its whole status (nodes may set status on
    create)."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": node_labels(name, profile),
            "annotations": {
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
            },
        },
        "spec": {},
        "status": node_status(
            name,
            ip,
            profile,
            ready=True,
            heartbeat=now,
            ready_since=now,
            registered_at=now,
            kubelet_version=kubelet_version,
        ),
    }


def lease_object(node: str, node_uid: str, duration_seconds: int, now: float) -> dict[str, Any]:
    """The node's heartbeat Lease in kube-node-lease, owned by its Node as the kubelet sets it
    (so the Lease goes when the Node is deleted)."""
    meta: dict[str, Any] = {"name": node, "namespace": LEASE_NAMESPACE}
    if node_uid:
        meta["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "Node", "name": node, "uid": node_uid}
        ]
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": meta,
        "spec": {
            "holderIdentity": node,
            "leaseDurationSeconds": duration_seconds,
            "renewTime": micro_time(now),
        },
    }


# ------------------------------------------------------------------------------------ pods


def image_id(image: str) -> str:
    """A plausible image digest reference (`docker.io/library/busybox@sha256:...`)."""
    name = image.split("@", 1)[0]
    last = name.rsplit("/", 1)[-1]
    if ":" in last:
        name = name[: len(name) - len(last)] + last.split(":", 1)[0]
    if "/" not in name:
        name = "docker.io/library/" + name
    elif "." not in name.split("/", 1)[0] and ":" not in name.split("/", 1)[0]:
        name = "docker.io/" + name
    return f"{name}@sha256:{hashlib.sha256(image.encode()).hexdigest()}"


def _condition(
    run: PodRun, type_: str, status: str, now: str, reason: str | None, message: str | None
) -> dict[str, Any]:
    # lastTransitionTime moves only when the status does; the run remembers the transitions.
    previous = run.transitions.get(type_)
    at = previous[1] if previous is not None and previous[0] == status else now
    run.transitions[type_] = (status, at)
    # reason/message are always sent, null when absent: conditions are merged by type, and a
    # stale reason would otherwise survive the change.
    return {
        "type": type_,
        "status": status,
        "lastProbeTime": None,
        "lastTransitionTime": at,
        "reason": reason,
        "message": message,
    }


def _names(containers: tuple[tuple[str, str], ...]) -> str:
    return "[" + " ".join(name for name, _ in containers) + "]"


def pod_status(run: PodRun, host_ip: str, now: float) -> dict[str, Any]:
    """The status a kubelet reports for `run` in its current state (a strategic merge patch
    body for pods/NAME/status: conditions merge by type, the container lists are replaced)."""
    stamp = rfc3339(now)
    state = run.state
    initialized = state != CREATING or not run.init_containers
    if state == CREATING:
        phase = "Pending"
        sandbox, ready, ready_reason = "False", "False", "ContainersNotReady"
        ready_message: str | None = f"containers with unready status: {_names(run.containers)}"
    elif state in (STARTED, BACKOFF):
        phase = "Running"
        sandbox = "True"
        ready = "True" if state == STARTED else "False"
        ready_reason = None if state == STARTED else "ContainersNotReady"
        ready_message = (
            None
            if state == STARTED
            else f"containers with unready status: {_names(run.containers)}"
        )
    else:
        phase = run.phase
        sandbox, ready = "False", "False"
        ready_reason = "PodCompleted" if phase == SUCCEEDED else "PodFailed"
        ready_message = None
    conditions = [
        _condition(run, "PodReadyToStartContainers", sandbox, stamp, None, None),
        _condition(
            run,
            "Initialized",
            "True" if initialized else "False",
            stamp,
            "PodCompleted"
            if phase == SUCCEEDED
            else (None if initialized else "ContainersNotInitialized"),
            None
            if initialized
            else f"containers with incomplete status: {_names(run.init_containers)}",
        ),
        _condition(run, "Ready", ready, stamp, ready_reason, ready_message),
        _condition(run, "ContainersReady", ready, stamp, ready_reason, ready_message),
    ]
    status: dict[str, Any] = {
        "phase": phase,
        "conditions": conditions,
        "hostIP": host_ip,
        "hostIPs": [{"ip": host_ip}],
        "startTime": rfc3339(run.start_time),
        "containerStatuses": [
            _container_status(run, name, image) for name, image in run.containers
        ],
    }
    if run.pod_ip:
        status["podIP"] = run.pod_ip
        status["podIPs"] = [{"ip": run.pod_ip}]
    if run.init_containers:
        status["initContainerStatuses"] = [
            _init_container_status(run, name, image) for name, image in run.init_containers
        ]
    return status


def _container_status(run: PodRun, name: str, image: str) -> dict[str, Any]:
    state = run.state
    status: dict[str, Any] = {
        "name": name,
        "image": image,
        "imageID": "",
        "ready": state == STARTED,
        "started": state == STARTED,
        "restartCount": run.restart_count,
        "lastState": {"terminated": run.last_terminated} if run.last_terminated else {},
    }
    if state == CREATING:
        reason = "PodInitializing" if run.init_containers else "ContainerCreating"
        status["state"] = {"waiting": {"reason": reason}}
        return status
    status["imageID"] = image_id(image)
    if run.container_id:
        status["containerID"] = run.container_id
    if state == STARTED:
        status["state"] = {"running": {"startedAt": rfc3339(run.started_at)}}
    elif state == BACKOFF:
        message = (
            f"back-off {go_duration(run.backoff or 0.0)} restarting failed container={name} "
            f"pod={run.name}_{run.namespace}({run.uid})"
        )
        status["state"] = {"waiting": {"reason": "CrashLoopBackOff", "message": message}}
    else:
        status["state"] = {"terminated": dict(run.terminated or {})}
    return status


def _init_container_status(run: PodRun, name: str, image: str) -> dict[str, Any]:
    if run.state == CREATING:
        return {
            "name": name,
            "image": image,
            "imageID": "",
            "ready": False,
            "started": False,
            "restartCount": 0,
            "state": {"waiting": {"reason": "PodInitializing"}},
            "lastState": {},
        }
    started = rfc3339(run.start_time)
    # Init containers ran to completion before the main ones started; their IDs are stable.
    container_id = CONTAINER_ID_SCHEME + hashlib.sha256(f"{run.uid}/{name}".encode()).hexdigest()
    return {
        "name": name,
        "image": image,
        "imageID": image_id(image),
        "containerID": container_id,
        "ready": True,
        "started": False,
        "restartCount": 0,
        "state": {
            "terminated": {
                "exitCode": 0,
                "reason": "Completed",
                "startedAt": started,
                "finishedAt": started,
                "containerID": container_id,
            }
        },
        "lastState": {},
    }


def terminated_state(run: PodRun, exit_code: int, now: float) -> dict[str, Any]:
    """`state.terminated` of containers that exited with `exit_code` now."""
    return {
        "exitCode": exit_code,
        "reason": "Completed" if exit_code == 0 else "Error",
        "startedAt": rfc3339(run.started_at),
        "finishedAt": rfc3339(now),
        "containerID": run.container_id,
    }


def never_started_state() -> dict[str, Any]:
    """`state.terminated` of containers a deletion stopped before they ever ran (the kubelet's
    wording for containers it cannot find when the pod is terminated)."""
    return {
        "exitCode": 137,
        "reason": "ContainerStatusUnknown",
        "message": "The container could not be located when the pod was terminated",
    }
