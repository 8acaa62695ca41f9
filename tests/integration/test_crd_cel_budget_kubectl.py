"""`kubectl apply` of a CRD whose CEL rule is over kube-apiserver's cost budget: the embedded API
server refuses it with kube-apiserver's message (the expected text is what a real
kube-apiserver v1.36.2 answered to the same file), and accepts the bounded variant."""

from __future__ import annotations

from pathlib import Path

import yaml

from tests.integration.test_kubectl import Kubectl, kubectl  # noqa: F401  (fixture)


def _crd(max_items: int | None, max_length: int | None) -> dict[str, object]:
    name: dict[str, object] = {"type": "string"}
    if max_length is not None:
        name["maxLength"] = max_length
    tasks: dict[str, object] = {
        "type": "array",
        "items": {"type": "object", "properties": {"name": name}},
    }
    if max_items is not None:
        tasks["maxItems"] = max_items
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "trainings.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"kind": "Training", "plural": "trainings", "singular": "training"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "spec": {
                                    "type": "object",
                                    "properties": {"tasks": tasks},
                                    "x-kubernetes-validations": [
                                        {
                                            "rule": "self.tasks.all(t, self.tasks.exists_one("
                                            "u, u.name == t.name))",
                                            "message": "duplicated task name",
                                        }
                                    ],
                                }
                            },
                        }
                    },
                }
            ],
        },
    }


HINT = (
    "(try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, "
    "maps, and strings are declared)"
)
RULE = "spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule"
# kubectl's output for the real kube-apiserver v1.36.2, same file, same command.
REFUSED = (
    'The CustomResourceDefinition "trainings.example.com" is invalid: \n'
    f"* {RULE}: Forbidden: estimated rule cost exceeds budget by factor of more than 100x {HINT}\n"
    f"* {RULE}: Forbidden: contributed to estimated rule cost total exceeding cost limit for "
    "entire OpenAPIv3 schema\n"
    "* spec.validation.openAPIV3Schema: Forbidden: x-kubernetes-validations estimated rule cost "
    f"total for entire OpenAPIv3 schema exceeds budget by factor of more than 100x {HINT}"
)
REFUSED_SLIGHTLY = (
    f'The CustomResourceDefinition "trainings.example.com" is invalid: {RULE}: Forbidden: '
    f"estimated rule cost exceeds budget by factor of 3.2x {HINT}"
)


async def test_unbounded_rule_is_refused_with_kube_apiservers_message(
    kubectl: Kubectl,  # noqa: F811
    tmp_path: Path,
) -> None:
    manifest = tmp_path / "crd.yaml"
    manifest.write_text(yaml.safe_dump(_crd(None, None)))
    code, _, err = await kubectl("apply", "--server-side", "-f", str(manifest), check=False)
    assert code != 0
    assert err.strip() == REFUSED
    manifest.write_text(yaml.safe_dump(_crd(1000, 63)))
    code, _, err = await kubectl("apply", "--server-side", "-f", str(manifest), check=False)
    assert code != 0
    assert err.strip() == REFUSED_SLIGHTLY
    code, _, err = await kubectl("get", "crd", "trainings.example.com", check=False)
    assert code != 0 and "NotFound" in err

    manifest.write_text(yaml.safe_dump(_crd(200, 63)))
    _, out, _ = await kubectl("apply", "--server-side", "-f", str(manifest))
    assert "customresourcedefinition.apiextensions.k8s.io/trainings.example.com" in out
