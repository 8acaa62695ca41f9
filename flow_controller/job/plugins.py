"""Volcano's job plugins: `env`, `svc`, `ssh` and the
distributed frameworks `mpi`, `pytorch`, `tensorflow` (`ray` and `hcclrank` in
`plugin_frameworks`; all registered in `plugin_registry`) — the same names, environment
variables, files and mount paths as Volcano, so a training image finds everything where
Volcano puts it.

Pure: a plugin mutates a pod the controller builds (`on_pod_create`) and says which objects
the job needs (`objects`: created when missing, updated on every sync when `refresh`, deleted
when the job is killed); `PluginFailed` when it cannot build the pod. Arguments are Go-style
flags (`--port=2222`); unknown ones are ignored, as Volcano logs and ignores them.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from core.api import keys
from core.api.batch import JobSpec, TaskSpec
from core.api.booleans import bool_or

SVC_MOUNT = "/etc/volcano"
SSH_PATH = "/root/.ssh"


@dataclass(frozen=True, slots=True)
class JobContext:
    name: str
    namespace: str
    spec: JobSpec
    owner: Mapping[str, Any]  # the ownerReference to the Job


@dataclass(frozen=True, slots=True)
class Owned:
    """An object a plugin keeps for the job: `kind` is a key of `job.owned`'s table."""

    kind: str
    body: dict[str, Any]
    refresh: bool = False  # rewritten on every sync (svc's host lists follow scaling)


def parse_flags(args: Sequence[str]) -> dict[str, str]:
    flags: dict[str, str] = {}
    for arg in args:
        name, _, value = arg.lstrip("-").partition("=")
        flags[name] = value if _ else "true"
    return flags


def _containers(pod: dict[str, Any], *, init: bool = True) -> list[dict[str, Any]]:
    spec = pod["spec"]
    found = list(spec.get("containers") or ())
    if init:
        found += list(spec.get("initContainers") or ())
    return found


def _set_env(container: dict[str, Any], name: str, value: str | None = None, **source: Any) -> None:
    env = container.setdefault("env", [])
    env[:] = [e for e in env if e.get("name") != name]
    env.append({"name": name, "value": value} if source == {} else {"name": name, **source})


def _add_port(container: dict[str, Any], name: str, port: int) -> None:
    ports = container.setdefault("ports", [])
    if not any(p.get("containerPort") == port for p in ports):
        ports.append({"name": name, "containerPort": port})


def _env_name(task: str) -> str:
    return task.upper().replace("-", "_")


def hosts(ctx: JobContext, task: TaskSpec) -> list[str]:
    """`<hostname>.<subdomain>` of the task's pods (`<job>-<task>-<i>.<job>` by default; one
    entry when the template names a hostname)."""
    pod_spec = (task.template or {}).get("spec") or {}
    subdomain = pod_spec.get("subdomain") or ctx.name
    if pod_spec.get("hostname"):
        return [f"{pod_spec['hostname']}.{subdomain}"]
    return [f"{ctx.name}-{task.name}-{i}.{subdomain}" for i in range(task.replicas)]


def _task(ctx: JobContext, name: str) -> TaskSpec | None:
    return next((t for t in ctx.spec.tasks or () if t.name == name), None)


def _pod_index(pod: dict[str, Any]) -> int:
    return int(pod["metadata"]["annotations"].get(keys.TASK_INDEX, "0"))


def _pod_task(pod: dict[str, Any]) -> str:
    return pod["metadata"]["annotations"].get(keys.TASK_SPEC, "")


@dataclass(slots=True)
class Plugin:
    name: str
    flags: dict[str, str] = field(default_factory=dict)
    refresh = False  # its objects are rewritten on every sync when they changed

    def on_pod_create(self, pod: dict[str, Any], ctx: JobContext) -> None:
        """Mutate a pod the controller builds."""

    def names(self, ctx: JobContext) -> list[tuple[str, str]]:
        """(kind, name) of the objects it keeps (deleted when the job is killed)."""
        return []

    def objects(self, ctx: JobContext) -> list[Owned]:
        return []

    def flag(self, name: str, default: str) -> str:
        return self.flags.get(name) or default

    def port(self, default: int) -> int:
        try:
            return int(self.flags.get("port") or default)
        except ValueError:
            return default


class Env(Plugin):
    def on_pod_create(self, pod: dict[str, Any], ctx: JobContext) -> None:
        index = str(_pod_index(pod))
        for container in _containers(pod):
            _set_env(container, "VK_TASK_INDEX", index)
            _set_env(container, "VC_TASK_INDEX", index)


class Svc(Plugin):
    refresh = True

    def names(self, ctx: JobContext) -> list[tuple[str, str]]:
        found = [("ConfigMap", f"{ctx.name}-svc"), ("Service", ctx.name)]
        if not bool_or(self.flag("disable-network-policy", "false"), False):
            found.append(("NetworkPolicy", ctx.name))
        return found

    def on_pod_create(self, pod: dict[str, Any], ctx: JobContext) -> None:
        spec = pod["spec"]
        spec.setdefault("hostname", pod["metadata"]["name"])
        spec.setdefault("subdomain", ctx.name)
        config = f"{ctx.name}-svc"
        inject = bool_or(self.flag("inject-hosts-env", "true"), True)
        for container in _containers(pod):
            if inject:
                for task in ctx.spec.tasks or ():
                    for suffix in ("HOSTS", "NUM"):
                        key = f"VC_{_env_name(task.name or '')}_{suffix}"
                        _set_env(
                            container,
                            key,
                            valueFrom={"configMapKeyRef": {"name": config, "key": key}},
                        )
            mounts = container.setdefault("volumeMounts", [])
            if not any(m.get("name") == config for m in mounts):
                mounts.append({"name": config, "mountPath": SVC_MOUNT})
        volumes = spec.setdefault("volumes", [])
        if not any(v.get("name") == config for v in volumes):
            volumes.append({"name": config, "configMap": {"name": config}})

    def objects(self, ctx: JobContext) -> list[Owned]:
        data: dict[str, str] = {}
        for task in ctx.spec.tasks or ():
            found = hosts(ctx, task)
            data[f"{(task.name or '').replace('-', '_')}.host"] = "\n".join(found)
            data[f"VC_{_env_name(task.name or '')}_HOSTS"] = ",".join(found)
            data[f"VC_{_env_name(task.name or '')}_NUM"] = str(len(found))
        meta = {"namespace": ctx.namespace, "ownerReferences": [dict(ctx.owner)]}
        selector = {keys.JOB_NAME: ctx.name, keys.JOB_NAMESPACE: ctx.namespace}
        owned = [
            Owned(
                "ConfigMap",
                {"metadata": {"name": f"{ctx.name}-svc", **meta}, "data": data},
                refresh=True,
            ),
            Owned(
                "Service",
                {
                    "metadata": {"name": ctx.name, **meta},
                    "spec": {
                        "clusterIP": "None",
                        "selector": selector,
                        "publishNotReadyAddresses": bool_or(
                            self.flag("publish-not-ready-addresses", "false"), False
                        ),
                    },
                },
            ),
        ]
        if not bool_or(self.flag("disable-network-policy", "false"), False):
            owned.append(
                Owned(
                    "NetworkPolicy",
                    {
                        "metadata": {"name": ctx.name, **meta},
                        "spec": {
                            "podSelector": {"matchLabels": selector},
                            "ingress": [{"from": [{"podSelector": {"matchLabels": selector}}]}],
                            "policyTypes": ["Ingress"],
                        },
                    },
                )
            )
        return owned


class Ssh(Plugin):
    """Key pair in Secret `<job>-ssh` (generated once; kept on updates, Volcano #1420),
    mounted at `--ssh-key-file-path` (/root/.ssh)."""

    def _path(self) -> str:
        return self.flag("ssh-key-file-path", SSH_PATH)

    def names(self, ctx: JobContext) -> list[tuple[str, str]]:
        return [("Secret", f"{ctx.name}-ssh")]

    def on_pod_create(self, pod: dict[str, Any], ctx: JobContext) -> None:
        secret = f"{ctx.name}-ssh"
        mode = 0o600 if self._path() == SSH_PATH else 0o644
        items = [
            {"key": k, "path": f".ssh/{k}"}
            for k in ("id_rsa", "id_rsa.pub", "authorized_keys", "config")
        ]
        pod["spec"].setdefault("volumes", []).append(
            {"name": secret, "secret": {"secretName": secret, "defaultMode": mode, "items": items}}
        )
        for container in _containers(pod):
            container.setdefault("volumeMounts", []).append(
                {"name": secret, "mountPath": self._path(), "subPath": ".ssh"}
            )

    def objects(self, ctx: JobContext) -> list[Owned]:
        private, public = _key_pair(self.flags)
        port = _int(self.flags.get("ssh-port") or "22", 22)
        config = ["StrictHostKeyChecking no", "UserKnownHostsFile /dev/null"]
        for task in ctx.spec.tasks or ():
            for host in hosts(ctx, task):
                name = host.split(".", 1)[0]
                config += [f"Host {name}", f"  HostName {host}", f"  Port {port}"]
        data = {
            "id_rsa": private,
            "id_rsa.pub": public,
            "authorized_keys": public,
            "config": "\n".join(config) + "\n",
        }
        return [
            Owned(
                "Secret",
                {
                    "metadata": {
                        "name": f"{ctx.name}-ssh",
                        "namespace": ctx.namespace,
                        "ownerReferences": [dict(ctx.owner)],
                    },
                    "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()},
                },
            )
        ]


def _int(text: str, default: int) -> int:
    try:
        return int(text)
    except ValueError:
        return default


def _key_pair(flags: Mapping[str, str]) -> tuple[str, str]:
    if flags.get("ssh-private-key") and flags.get("ssh-public-key"):
        return flags["ssh-private-key"], flags["ssh-public-key"]
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,  # PEM PKCS#1, as Volcano writes it
        serialization.NoEncryption(),
    ).decode()
    public = (
        key.public_key()
        .public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
        .decode()
    )
    return private, public + "\n"


class Mpi(Plugin):
    def on_pod_create(self, pod: dict[str, Any], ctx: JobContext) -> None:
        port = self.port(22)
        for container in _containers(pod):
            _add_port(container, "mpijob-port", port)
        worker = _task(ctx, self.flag("worker", "worker"))
        if worker is None or _pod_task(pod) != self.flag("master", "master"):
            return
        for container in _containers(pod):
            _set_env(container, "MPI_HOST", ",".join(hosts(ctx, worker)))


class Pytorch(Plugin):
    def on_pod_create(self, pod: dict[str, Any], ctx: JobContext) -> None:
        master = _task(ctx, self.flag("master", "master"))
        if master is None:
            return
        worker = _task(ctx, self.flag("worker", "worker"))
        port = self.port(23456)
        address = hosts(ctx, master)[0]
        world = master.replicas + (worker.replicas if worker is not None else 0)
        task, index = _pod_task(pod), _pod_index(pod)
        rank = 0 if task == master.name else index + 1 if worker and task == worker.name else None
        for container in _containers(pod, init=False):
            _set_env(container, "MASTER_ADDR", address)
            _set_env(container, "MASTER_PORT", str(port))
            _set_env(container, "WORLD_SIZE", str(world))
            if rank is not None:
                _set_env(container, "RANK", str(rank))
            _add_port(container, "pytorchjob-port", port)


class Tensorflow(Plugin):
    def on_pod_create(self, pod: dict[str, Any], ctx: JobContext) -> None:
        tasks = list(ctx.spec.tasks or ())
        if len(tasks) == 1 and tasks[0].replicas == 1:
            return
        port = self.port(2222)
        roles = {self.flag(role, role): role for role in ("ps", "worker", "chief", "evaluator")}
        cluster = {
            roles[t.name or ""]: [f"{h}:{port}" for h in hosts(ctx, t)]
            for t in tasks
            if (t.name or "") in roles
        }
        task = _pod_task(pod)
        config = {
            "cluster": cluster,
            "task": {"type": roles.get(task, task), "index": _pod_index(pod)},
        }
        for container in _containers(pod, init=False):
            _set_env(container, "TF_CONFIG", json.dumps(config))


class PluginFailed(Exception):
    """A plugin cannot build the job's pod (Volcano's OnPodCreate error: the sync fails and
    is retried, up to `--max-requeue-num`, then the job is terminated)."""
