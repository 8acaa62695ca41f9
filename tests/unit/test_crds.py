"""The CRDs are generated from the models, match Volcano's names, are structural, and their
OpenAPI schema and CEL rules agree with the models on the fixtures and on invalid variants."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import celpy
import jsonschema
import pytest
import yaml

from core.api.crds import all_crds, crd, crd_filename, render
from core.api.registry import KINDS, lookup
from core.manifests import load_all
from tests.helpers import REPO, volcano_fixture_files

CRD_DIR = REPO / "manifests" / "crds"


def test_checked_in_crds_are_what_the_models_generate() -> None:
    files = sorted(p.name for p in CRD_DIR.glob("*.yaml") if p.name != "kustomization.yaml")
    assert files == sorted(crd_filename(info) for info in KINDS)
    for info in KINDS:
        on_disk = (CRD_DIR / crd_filename(info)).read_text()
        assert on_disk == render(crd(info)), f"run `make crds`: {crd_filename(info)} is stale"


@pytest.mark.parametrize(
    ("name", "kind", "scope", "short_names", "status"),
    [
        (
            "podgroups.scheduling.volcano.sh",
            "PodGroup",
            "Namespaced",
            ["pg", "podgroup-v1beta1"],
            False,
        ),
        ("queues.scheduling.volcano.sh", "Queue", "Cluster", ["q", "queue-v1beta1"], True),
        ("jobs.batch.volcano.sh", "Job", "Namespaced", ["vcjob", "vj"], True),
        ("commands.bus.volcano.sh", "Command", "Namespaced", None, False),
        ("jobflows.flow.volcano.sh", "JobFlow", "Namespaced", ["jf"], True),
        ("jobtemplates.flow.volcano.sh", "JobTemplate", "Namespaced", ["jt"], True),
        ("numatopologies.nodeinfo.volcano.sh", "Numatopology", "Cluster", ["numatopo"], False),
    ],
)
def test_crd_names_match_volcano(
    name: str, kind: str, scope: str, short_names: list[str] | None, status: bool
) -> None:
    doc = _crd_by_name(name)
    assert doc["spec"]["names"]["kind"] == kind
    assert doc["spec"]["scope"] == scope
    assert doc["spec"]["names"].get("shortNames") == short_names
    (version,) = doc["spec"]["versions"]
    assert ("subresources" in version) is status
    assert doc["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"


def test_printer_columns() -> None:
    def columns(name: str) -> list[tuple[str, str]]:
        version = _crd_by_name(name)["spec"]["versions"][0]
        return [(c["name"], c["jsonPath"]) for c in version.get("additionalPrinterColumns", [])]

    assert columns("podgroups.scheduling.volcano.sh") == [
        ("STATUS", ".status.phase"),
        ("minMember", ".spec.minMember"),
        ("RUNNINGS", ".status.running"),
        ("AGE", ".metadata.creationTimestamp"),
        ("QUEUE", ".spec.queue"),
    ]
    assert columns("jobs.batch.volcano.sh")[0] == ("STATUS", ".status.state.phase")
    assert columns("queues.scheduling.volcano.sh") == [
        ("STATE", ".status.state"),
        ("WEIGHT", ".spec.weight"),
        ("PARENT", ".spec.parent"),
    ]
    assert columns("jobflows.flow.volcano.sh")[0] == ("Status", ".status.state.phase")


def _nodes(schema: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    yield path, schema
    for key, sub in (schema.get("properties") or {}).items():
        yield from _nodes(sub, f"{path}.{key}")
    if isinstance(schema.get("additionalProperties"), dict):
        yield from _nodes(schema["additionalProperties"], f"{path}[*]")
    if isinstance(schema.get("items"), dict):
        yield from _nodes(schema["items"], f"{path}[]")


@pytest.mark.parametrize("info", KINDS, ids=lambda i: i.kind)
def test_schemas_are_structural(info: Any) -> None:
    schema = crd(info)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    for path, node in _nodes(schema):
        text = yaml.safe_dump(node)
        assert "$ref" not in text, path
        if node.get("x-kubernetes-int-or-string"):
            assert node["anyOf"] == [{"type": "integer"}, {"type": "string"}], path
            continue
        assert "type" in node, f"{info.kind}{path} has no type"
        assert "anyOf" not in node and "oneOf" not in node, path
        assert not ("properties" in node and "additionalProperties" in node), path
        assert "title" not in node and "nullable" not in node, path


def test_pod_templates_preserve_unknown_fields() -> None:
    schema = _crd_by_name("jobs.batch.volcano.sh")["spec"]["versions"][0]["schema"]
    template = schema["openAPIV3Schema"]["properties"]["spec"]["properties"]["tasks"]["items"][
        "properties"
    ]["template"]
    assert template == {"type": "object", "x-kubernetes-preserve-unknown-fields": True}


def test_crd_defaults_are_volcanos() -> None:
    job_spec = _schema_of("jobs.batch.volcano.sh")["properties"]["spec"]["properties"]
    assert job_spec["queue"]["default"] == "default"
    assert job_spec["maxRetry"]["default"] == 3
    assert "default" not in job_spec["minAvailable"]
    queue_spec = _schema_of("queues.scheduling.volcano.sh")["properties"]["spec"]["properties"]
    assert queue_spec["weight"] == {"default": 1, "minimum": 1, "maximum": 65535, "type": "integer"}
    assert queue_spec["dequeueStrategy"]["default"] == "traverse"
    pg_spec = _schema_of("podgroups.scheduling.volcano.sh")["properties"]["spec"]["properties"]
    assert pg_spec["queue"]["default"] == "default"
    assert pg_spec["minMember"]["minimum"] == 0


# ----------------------------------------------------- schema and CEL agree with the models


def _schema_of(name: str) -> dict[str, Any]:
    return _crd_by_name(name)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


def _crd_by_name(name: str) -> dict[str, Any]:
    return next(doc for doc in all_crds() if doc["metadata"]["name"] == name)


def _schema_for(doc: dict[str, Any]) -> dict[str, Any]:
    info = lookup(doc["apiVersion"], doc["kind"])
    assert info is not None
    return _schema_of(info.crd_name)


def schema_errors(doc: dict[str, Any]) -> list[str]:
    validator = jsonschema.Draft7Validator(_schema_for(doc))
    return [f"{'.'.join(map(str, e.path))}: {e.message}" for e in validator.iter_errors(doc)]


_CEL = celpy.Environment()


def cel_failures(doc: dict[str, Any]) -> list[str]:
    """Evaluate every x-kubernetes-validations rule at every node of `doc` it applies to."""
    failures: list[str] = []
    _walk_cel(_schema_for(doc), doc, "", failures)
    return failures


def _walk_cel(schema: dict[str, Any], value: Any, path: str, failures: list[str]) -> None:
    for rule in schema.get("x-kubernetes-validations", []):
        program = _CEL.program(_CEL.compile(rule["rule"]))
        if not program.evaluate({"self": celpy.json_to_cel(value)}):
            failures.append(f"{path}: {rule['message']}")
    if isinstance(value, dict):
        for key, sub in (schema.get("properties") or {}).items():
            if key in value:
                _walk_cel(sub, value[key], f"{path}.{key}", failures)
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(value):
            _walk_cel(schema["items"], item, f"{path}[{index}]", failures)


FIXTURE_DOCS = [
    pytest.param(doc, id=f"{path.name}:{doc['kind']}/{doc['metadata']['name']}")
    for path in volcano_fixture_files()
    for doc in load_all(Path(path).read_text())
]


@pytest.mark.parametrize("doc", FIXTURE_DOCS)
def test_fixtures_pass_the_crd_schema_and_cel(doc: dict[str, Any]) -> None:
    assert schema_errors(doc) == []
    assert cel_failures(doc) == []


def _job_fixture() -> dict[str, Any]:
    path = next(p for p in volcano_fixture_files() if p.name == "lm-mpi-job.yaml")
    return load_all(path.read_text())[0]


def _flow_fixture() -> dict[str, Any]:
    path = next(p for p in volcano_fixture_files() if p.name == "jobflow-pipeline.yaml")
    return load_all(path.read_text())[-1]


def test_cel_rejects_what_validation_rejects() -> None:
    job = copy.deepcopy(_job_fixture())
    job["spec"]["tasks"][1]["minAvailable"] = 5
    assert cel_failures(job) == [
        ".spec.tasks[1]: 'minAvailable' is greater than 'replicas' in task"
    ]
    flow = copy.deepcopy(_flow_fixture())
    flow["spec"]["flows"][1]["dependsOn"]["targets"] = ["job-b"]
    assert cel_failures(flow) == [".spec: jobflow Flow is not DAG"]
    group = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "g"},
        "spec": {"networkTopology": {"highestTierAllowed": 1, "highestTierName": "x"}},
    }
    assert len(cel_failures(group)) == 1


def test_checks_over_the_cel_budget_are_left_to_admission() -> None:
    """Unique task names: a CEL rule on a Job's spec (affordable with the bounds) and the
    webhook. Defined flow targets (flows x targets x flows) and unique task names under a flow's
    patch.jobSpec (once per flow) would be over kube-apiserver's budget: only the webhook."""
    from core.api.admission import admit

    job = copy.deepcopy(_job_fixture())
    job["spec"]["tasks"][1]["name"] = "mpimaster"
    assert cel_failures(job) == [".spec: duplicated task name found"]
    review = admit(job)
    assert not review.allowed
    assert "spec.tasks[1].name: duplicated task name mpimaster" in map(str, review.errors)
    flow_spec = _schema_of("jobflows.flow.volcano.sh")["properties"]["spec"]
    patch = flow_spec["properties"]["flows"]["items"]["properties"]["patch"]
    assert "x-kubernetes-validations" not in patch["properties"]["jobSpec"]
    flow = copy.deepcopy(_flow_fixture())
    flow["spec"]["flows"][1]["dependsOn"]["targets"] = ["job-z"]
    assert cel_failures(flow) == []
    review = admit(flow)
    assert not review.allowed
    assert any("vertex is not defined: job-z" in str(e) for e in review.errors)


def test_lists_and_strings_walked_by_rules_are_bounded_alike_in_crd_and_models() -> None:
    """maxItems/maxLength bound the CEL cost estimate; the models enforce the same limits with
    the API server's wording, so `vulcan validate`, the webhook and the CRD agree."""
    from core.api import limits
    from core.api.admission import admit

    job = copy.deepcopy(_job_fixture())
    task = job["spec"]["tasks"][1]
    job["spec"]["tasks"] = [
        {**copy.deepcopy(task), "name": f"t{i}"} for i in range(limits.MAX_TASKS + 1)
    ]
    message = f"Too many: {limits.MAX_TASKS + 1}: must have at most {limits.MAX_TASKS} items"
    assert any("is too long" in e for e in schema_errors(job))
    review = admit(job)
    assert f"spec.tasks: {message}" in map(str, review.errors)
    job["spec"]["tasks"] = job["spec"]["tasks"][: limits.MAX_TASKS]
    assert schema_errors(job) == [] and admit(job).allowed
    flow = copy.deepcopy(_flow_fixture())
    flow["spec"]["flows"][0]["name"] = "a" * (limits.MAX_FLOW_NAME + 1)
    assert schema_errors(flow)
    review = admit(flow)
    assert not review.allowed
    too_long = f"Too long: may not be more than {limits.MAX_FLOW_NAME} bytes"
    assert f"spec.flows[0].name: {too_long}" in map(str, review.errors)


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda j: j["spec"]["tasks"][0].__setitem__("replicas", "1"), "is not of type 'integer'"),
        (lambda j: j["spec"]["tasks"][0].__setitem__("replicas", -1), "less than the minimum"),
        (lambda j: j["spec"].__setitem__("queue", "Bad_Queue"), "does not match"),
        (lambda j: j["spec"].__setitem__("tasks", []), "should be non-empty"),
        (lambda j: j["spec"]["tasks"][0].__setitem__("topologyPolicy", "all"), "is not one of"),
    ],
)
def test_schema_rejects_what_the_models_reject(mutate: Any, expected: str) -> None:
    from core.api.admission import admit

    job = copy.deepcopy(_job_fixture())
    mutate(job)
    errors = schema_errors(job)
    assert any(expected in e for e in errors), errors
    assert not admit(job).allowed


def test_schema_rejects_bad_quantities() -> None:
    queue = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": "q"},
        "spec": {"capability": {"cpu": "2x"}, "weight": 0},
    }
    errors = schema_errors(queue)
    assert any("does not match" in e for e in errors)
    assert any("less than the minimum of 1" in e for e in errors)
