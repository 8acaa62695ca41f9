"""manifests/monitoring: `kubectl kustomize` renders the ServiceMonitor, the PrometheusRule and the
Grafana dashboard ConfigMap, the dashboard is a Grafana model with Prometheus targets, every alert
is complete, and every metric name the rules and the dashboard use is one that a live extender
and live controllers serve on /metrics."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import yaml

from tests.helpers import REPO, announced_url, sim_apiserver_process, stop_process, vulcan_process

MONITORING = REPO / "manifests" / "monitoring"
DASHBOARD = MONITORING / "dashboards" / "vulcan.json"
RULES = MONITORING / "prometheusrule.yaml"
NAMESPACE = "vulcan-system"

# ------------------------------------------------------------------------ PromQL metric names

# PromQL string literals: label values and regexes, never metric names.
_PROMQL_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
# vulcan's own names and the Volcano-compatible ones it serves (volcano_queue_*, ...); not
# preceded by a name character or `$` (a Grafana variable).
_METRIC_NAME = re.compile(r"(?<![\w:$])(?:vulcan|volcano)_[A-Za-z0-9_:]*")


def metric_names(promql: str) -> set[str]:
    return set(_METRIC_NAME.findall(_PROMQL_STRING.sub('""', promql)))


def dashboard_queries(dashboard: dict[str, Any]) -> list[str]:
    """Every PromQL of the dashboard: panel targets (rows' nested panels too) and the query
    variables."""
    queries: list[str] = []

    def panel(p: dict[str, Any]) -> None:
        queries.extend(t["expr"] for t in p.get("targets", []) if t.get("expr"))
        for nested in p.get("panels", []):
            panel(nested)

    for p in dashboard.get("panels", []):
        panel(p)
    for variable in dashboard.get("templating", {}).get("list", []):
        if variable.get("type") == "query":
            query = variable.get("query")
            queries.append(query["query"] if isinstance(query, dict) else str(query))
    return queries


def rule_expressions(rule_object: dict[str, Any]) -> list[str]:
    return [rule["expr"] for group in rule_object["spec"]["groups"] for rule in group["rules"]]


# --------------------------------------------------------------------- /metrics exposition


@dataclass
class Exposition:
    """What scrapes of /metrics offer a query: the series names with samples, and the series
    names `# TYPE` lines promise (a family with labels has no sample until a first child)."""

    samples: set[str] = field(default_factory=set)
    declared: set[str] = field(default_factory=set)

    def add(self, text: str) -> None:
        for line in text.splitlines():
            if line.startswith("# TYPE "):
                _, _, family, kind = line.split(maxsplit=3)
                self.declared.update(_series_of(family, kind))
            elif line and not line.startswith("#"):
                match = re.match(r"[A-Za-z_:][A-Za-z0-9_:]*", line)
                assert match, line
                self.samples.add(match.group())

    def exports(self, name: str) -> bool:
        return name in self.samples or name in self.declared


def _series_of(family: str, kind: str) -> set[str]:
    """The series names of a family: _bucket/_sum/_count only for histograms (and summaries),
    _total for counters (whichever way the client spells the family)."""
    if kind == "histogram":
        return {f"{family}_bucket", f"{family}_sum", f"{family}_count"}
    if kind == "summary":
        return {family, f"{family}_sum", f"{family}_count"}
    if kind == "counter":
        return {family if family.endswith("_total") else f"{family}_total"}
    return {family}


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as response:
        return response.read().decode()


def _scrape_until(url: str, needle: str, timeout: float = 20.0) -> str:
    deadline = time.monotonic() + timeout
    while True:
        text = _get(f"{url}/metrics")
        if needle in text:
            return text
        assert time.monotonic() < deadline, f"{url}/metrics never showed {needle!r}"
        time.sleep(0.1)


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Exposition]:
    """/metrics of a real `vulcan extender` and `vulcan controllers` against an embedded API
    server."""
    kubeconfig = tmp_path_factory.mktemp("monitoring") / "kubeconfig"
    apiserver, _ = sim_apiserver_process(kubeconfig)
    processes = [apiserver]
    exposition = Exposition()
    try:
        common = ("--kubeconfig", str(kubeconfig), "--port", "0", "--bind-address", "127.0.0.1")
        # Logs are not read here: DEVNULL, so a full pipe can never stall a process.
        extender = vulcan_process("extender", *common, stderr=subprocess.DEVNULL)
        processes.append(extender)
        controllers = vulcan_process(
            "controllers",
            *common,
            # The embedded server has kube-system, not vulcan-system, for the Lease.
            "--leader-elect-resource-namespace",
            "kube-system",
            stderr=subprocess.DEVNULL,
        )
        processes.append(controllers)
        extender_url = announced_url(extender, "vulcan extender listening on http://127.0.0.1:")
        controllers_url = announced_url(
            controllers, "vulcan controllers listening on http://127.0.0.1:"
        )
        # The queue gauges exist from the extender's first scheduling pass (over the queues the
        # controllers create); the controllers' metrics are complete once they lead.
        exposition.add(
            _scrape_until(extender_url.removesuffix("/v1"), "# TYPE volcano_queue_share")
        )
        exposition.add(_scrape_until(controllers_url, "vulcan_controller_leader 1.0"))
    finally:
        for process in reversed(processes):
            stop_process(process)
    yield exposition


# ------------------------------------------------------------------------------- rendering


@pytest.fixture(scope="module")
def rendered() -> list[dict[str, Any]]:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl not on PATH: cannot render manifests/monitoring (kubectl kustomize)")
    result = subprocess.run(
        [kubectl, "kustomize", str(MONITORING)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def _one(rendered: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    (found,) = [doc for doc in rendered if doc["kind"] == kind]
    return found


def test_kustomize_renders_the_three_monitoring_objects(rendered: list[dict[str, Any]]) -> None:
    assert sorted(
        (doc["apiVersion"], doc["kind"], doc["metadata"]["name"], doc["metadata"]["namespace"])
        for doc in rendered
    ) == [
        ("monitoring.coreos.com/v1", "PrometheusRule", "vulcan", NAMESPACE),
        ("monitoring.coreos.com/v1", "ServiceMonitor", "vulcan", NAMESPACE),
        ("v1", "ConfigMap", "vulcan-grafana-dashboard", NAMESPACE),
    ]
    # kustomize ships the rules as written.
    source = yaml.safe_load(RULES.read_text())
    assert _one(rendered, "PrometheusRule")["spec"] == source["spec"]


def test_servicemonitor_scrapes_the_vulcan_services(rendered: list[dict[str, Any]]) -> None:
    spec = _one(rendered, "ServiceMonitor")["spec"]
    assert spec["selector"] == {"matchLabels": {"app.kubernetes.io/part-of": "vulcan"}}
    # Without a namespaceSelector it watches its own namespace (vulcan-system).
    assert spec.get("namespaceSelector", {"matchNames": [NAMESPACE]}) == {"matchNames": [NAMESPACE]}
    assert [(e["port"], e["path"], e["interval"]) for e in spec["endpoints"]] == [
        ("http", "/metrics", "30s")
    ]


def test_dashboard_configmap(rendered: list[dict[str, Any]]) -> None:
    config_map = _one(rendered, "ConfigMap")
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert list(config_map["data"]) == ["vulcan.json"]
    assert json.loads(config_map["data"]["vulcan.json"]) == json.loads(DASHBOARD.read_text())


# ------------------------------------------------------------------------------- contents


def _panels(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    flat: list[dict[str, Any]] = []
    for panel in dashboard["panels"]:
        flat.append(panel)
        flat.extend(panel.get("panels", []))
    return flat


def test_dashboard_is_a_grafana_model_with_prometheus_targets() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"] and dashboard["title"] and isinstance(dashboard["schemaVersion"], int)
    panels = _panels(dashboard)
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    graphs = [p for p in panels if p["type"] != "row"]
    assert len(graphs) >= 10
    for panel in graphs:
        assert panel["title"] and set(panel["gridPos"]) >= {"h", "w", "x", "y"}, panel["title"]
        assert panel["datasource"]["type"] == "prometheus", panel["title"]
        targets = panel["targets"]
        assert targets and all(t["expr"].strip() for t in targets), panel["title"]
        refs = [t["refId"] for t in targets]
        assert len(refs) == len(set(refs)), panel["title"]
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["query"] == "prometheus"


def test_dashboard_covers_what_an_operator_asks() -> None:
    used: set[str] = set().union(
        *map(metric_names, dashboard_queries(json.loads(DASHBOARD.read_text())))
    )
    assert used >= {
        # queues' deserved vs allocated
        "volcano_queue_deserved_milli_cpu",
        "volcano_queue_allocated_milli_cpu",
        "volcano_queue_deserved_memory_bytes",
        "volcano_queue_allocated_memory_bytes",
        # gang wait and admission latency, extender verbs, scheduling pass: quantiles
        "vulcan_gang_wait_duration_seconds_bucket",
        "vulcan_gang_admission_duration_seconds_bucket",
        "vulcan_extender_request_duration_seconds_bucket",
        "vulcan_schedule_pass_duration_seconds_bucket",
        # binds in flight (held ones included)
        "vulcan_extender_binds_in_flight",
        # controller reconcile rates and errors
        "vulcan_controller_syncs_total",
    }
    for query in dashboard_queries(json.loads(DASHBOARD.read_text())):
        if "_bucket" in query:
            assert "histogram_quantile(" in query, query


def test_every_alert_is_complete() -> None:
    rules = [r for g in yaml.safe_load(RULES.read_text())["spec"]["groups"] for r in g["rules"]]
    names = [r["alert"] for r in rules]
    assert len(names) == len(set(names))
    for rule in rules:
        assert rule["expr"].strip() and re.fullmatch(r"\d+[smh]", rule["for"]), rule["alert"]
        assert rule["labels"]["severity"] in {"critical", "warning", "info"}, rule["alert"]
        assert rule["annotations"]["summary"].strip(), rule["alert"]
        assert len(rule["annotations"]["description"]) > 80, rule["alert"]
    used: set[str] = set().union(*(metric_names(r["expr"]) for r in rules))
    assert used >= {
        "vulcan_gang_timeouts_total",  # gangs past their timeout
        "vulcan_extender_binds_total",  # failed binds
        "vulcan_extender_requests_total",  # verb errors
        "volcano_queue_capacity_milli_cpu",  # over capability
        "volcano_queue_share",  # stuck over deserved
        "vulcan_controller_leader",  # not leading
        "vulcan_controller_syncs_total",  # reconcile failures
    }
    assert any('up{job="vulcan-extender"}' in r["expr"] for r in rules)  # extender down
    # Volcano's overused is 1 for an idle queue that deserves nothing: no rule may read it.
    assert not any("volcano_queue_overused" in metric_names(r["expr"]) for r in rules)


def test_no_install_overlay_includes_monitoring_and_the_comment_says_so() -> None:
    overlays = sorted((REPO / "manifests" / "overlays").glob("*/kustomization.yaml"))
    assert overlays
    for overlay in overlays:
        resources = yaml.safe_load(overlay.read_text()).get("resources") or []
        assert not any("monitoring" in str(r) for r in resources), overlay
    comment = (MONITORING / "kustomization.yaml").read_text()
    assert "No install overlay includes this directory" in comment
    assert "overlays include this directory" not in comment


# ------------------------------------------------------------------- names the code exports


def test_metric_names_are_read_from_promql() -> None:
    assert metric_names(
        "sum by (verb) (rate(vulcan_extender_requests_total{code!=\"vulcan_x\", a=~'volcano_y'}"
        "[$__rate_interval])) / on() group_left volcano_queue_share > $vulcan_var"
    ) == {"vulcan_extender_requests_total", "volcano_queue_share"}


def test_every_metric_name_used_is_exported(live: Exposition) -> None:
    rules = yaml.safe_load(RULES.read_text())
    queries = dashboard_queries(json.loads(DASHBOARD.read_text())) + rule_expressions(rules)
    for query in queries:  # no query slips through without a name to check (but `up`)
        assert metric_names(query) or re.search(r"\bup\{", query), query
    used = set().union(*map(metric_names, queries))
    missing = sorted(name for name in used if not live.exports(name))
    assert not missing, f"not served by the extender or the controllers: {missing}"


def test_a_name_the_code_does_not_export_fails(live: Exposition) -> None:
    # Served names, histograms and labelled families with no observation yet included.
    for name in (
        "vulcan_gang_wait_duration_seconds_bucket",
        "vulcan_gang_wait_duration_seconds_count",
        "vulcan_extender_binds_total",
        "vulcan_controller_leader",
        "volcano_queue_capacity_milli_cpu",
    ):
        assert live.exports(name), name
    for name in (
        "vulcan_extender_binds_held",  # no such metric
        "vulcan_gang_wait_duration_seconds",  # a histogram's base name has no series
        "vulcan_extender_binds_in_flight_bucket",  # a gauge has no buckets
        "vulcan_extender_requests",  # a counter's series end in _total
        "volcano_queue_capability_milli_cpu",  # Volcano spells it capacity
    ):
        assert not live.exports(name), name
