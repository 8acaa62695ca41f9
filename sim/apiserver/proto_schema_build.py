"""Builds `proto_schema.json`, the field tables the embedded API server decodes protobuf
request bodies with (`sim.apiserver.protobuf`), from Kubernetes' `generated.proto` files.

Not run by the tests or at start-up: the table is committed. To rebuild it (e.g. for a newer
Kubernetes), fetch github.com/kubernetes/api and github.com/kubernetes/apimachinery and run

    python -m sim.apiserver.proto_schema_build OUT.json FILE.proto ...

with their `generated.proto` files (core/v1, apps/v1, batch/v1, ... and apimachinery's
pkg/apis/meta/v1, pkg/api/resource, pkg/util/intstr, pkg/runtime). Only the messages reachable
from `ROOTS` are kept. A table row is `[json name, field number, label, type]`: label is
`optional`, `repeated` or `map` (then type is `[key type, value type]`); a type is a protobuf
scalar name or a fully qualified message name. Field numbers and names are Kubernetes' facts.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

# The kinds a client may send as protobuf (kubectl's typed clients do for built-in kinds).
ROOTS = [
    f"k8s.io.api.{group}.{kind}"
    for group, kinds in {
        "core.v1": "Namespace ConfigMap Secret Service ServiceAccount Pod Node Event "
        "PersistentVolumeClaim PersistentVolume LimitRange ResourceQuota Endpoints Binding",
        "apps.v1": "Deployment StatefulSet DaemonSet ReplicaSet",
        "batch.v1": "Job CronJob",
        "rbac.v1": "Role ClusterRole RoleBinding ClusterRoleBinding",
        "scheduling.v1": "PriorityClass",
        "policy.v1": "PodDisruptionBudget Eviction",
        "coordination.v1": "Lease",
        "networking.v1": "NetworkPolicy Ingress",
        "autoscaling.v1": "Scale",
        "authorization.v1": "SelfSubjectAccessReview",
    }.items()
    for kind in kinds.split()
] + ["k8s.io.apimachinery.pkg.apis.meta.v1.DeleteOptions"]

_PACKAGE = re.compile(r"^package\s+([\w.]+);", re.M)
_MESSAGE = re.compile(r"^message\s+(\w+)\s*\{(.*?)^\}", re.M | re.S)
_FIELD = re.compile(
    r"^\s*(optional|repeated)?\s*(map<\s*([\w.]+)\s*,\s*([\w.]+)\s*>|[\w.]+)\s+(\w+)\s*=\s*(\d+)",
    re.M,
)
SCALARS = {"string", "bytes", "bool", "int32", "int64", "uint32", "uint64", "double", "float"}


def parse(files: list[Path]) -> dict[str, list[list[Any]]]:
    messages: dict[str, list[tuple[str, int, str, Any]]] = {}
    packages: dict[str, str] = {}
    for path in files:
        text = re.sub(r"//[^\n]*", "", path.read_text())
        package = _PACKAGE.search(text)
        assert package, path
        for match in _MESSAGE.finditer(text):
            name = f"{package.group(1)}.{match.group(1)}"
            packages[name] = package.group(1)
            rows = []
            for field in _FIELD.finditer(match.group(2)):
                label, kind, key, value, json_name, number = field.groups()
                if kind.startswith("map<"):
                    rows.append((json_name, int(number), "map", [key, value]))
                else:
                    rows.append((json_name, int(number), label or "optional", kind))
            messages[name] = rows

    def resolve(kind: str, package: str) -> str:
        kind = kind.lstrip(".")  # a leading dot: fully qualified
        if kind in SCALARS:
            return kind
        return kind if f"{kind}" in messages else f"{package}.{kind}"

    table: dict[str, list[list[Any]]] = {}
    todo = list(ROOTS)
    while todo:
        name = todo.pop()
        if name in table:
            continue
        rows = []
        for json_name, number, label, kind in messages[name]:
            if label == "map":
                kind = [resolve(kind[0], packages[name]), resolve(kind[1], packages[name])]
                todo.extend(k for k in kind if k not in SCALARS)
            else:
                kind = resolve(kind, packages[name])
                if kind not in SCALARS:
                    todo.append(kind)
            rows.append([json_name, number, label, kind])
        table[name] = rows
    return dict(sorted(table.items()))


def main(argv: list[str]) -> int:
    out, *files = argv
    table = parse([Path(f) for f in files])
    Path(out).write_text(json.dumps(table, separators=(",", ":"), sort_keys=True) + "\n")
    print(f"{out}: {len(table)} messages")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
