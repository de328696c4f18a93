"""Dashboards, alerts and scrape config as code, proven with the real tools (promtool, amtool).

Needs Debian's `prometheus` (promtool) and `prometheus-alertmanager` (amtool) and the Python packages
`grafana-foundation-sdk` and `pyyaml`; a missing tool fails the test, it does not skip it.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
OBS = ROOT / "infra" / "observability"
DASHBOARDS = OBS / "dashboards"
MESH_PORTS = {"gateway": "127.0.0.1:8080", "embedding": "127.0.0.1:9101", "retrieval": "127.0.0.1:9102",
              "reasoning": "127.0.0.1:9103", "ocr": "127.0.0.1:9104"}

# Metrics the alerts and dashboards use that the code does not declare yet (name -> type); none now:
# every name must be declared in services/ or gateway/ (the live test in tests/system asks Prometheus).
PENDING_METRICS: dict[str, str] = {}
# prometheus_client's process collector, and Prometheus's own per-target series.
STANDARD_SERIES = {"up", "process_cpu_seconds_total", "process_resident_memory_bytes"}
# What a Grafana variable stands for when promtool parses a dashboard query.
GRAFANA_VARIABLES = {"$__rate_interval": "1m", "$__interval": "1m", "$__range": "1h"}


def tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} not found: install the Debian packages prometheus and prometheus-alertmanager")
    return path


def run(*args: str, cwd: Path = OBS) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(args), cwd=cwd, capture_output=True, text=True, timeout=120)


def passes(*args: str, cwd: Path = OBS) -> str:
    result = run(*args, cwd=cwd)
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"{' '.join(args)} failed:\n{output}"
    return output


def load(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def alert_rules() -> list[dict[str, Any]]:
    return [rule for group in load(OBS / "alerts.yml")["groups"] for rule in group["rules"] if "alert" in rule]


def dashboard_files() -> list[Path]:
    return sorted(DASHBOARDS.glob("*.json"))


# ---- Prometheus -------------------------------------------------------------------------------------

def test_prometheus_config_is_valid():
    passes(tool("promtool"), "check", "config", "prometheus.yml")


def test_prometheus_scrapes_every_mesh_process_by_job():
    config = load(OBS / "prometheus.yml")
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    assert set(jobs) == set(MESH_PORTS)
    for name, target in MESH_PORTS.items():
        assert [t for static in jobs[name]["static_configs"] for t in static["targets"]] == [target], name
        assert jobs[name].get("metrics_path", "/metrics") == "/metrics"
    assert config["rule_files"] == ["alerts.yml"]
    targets = [t for am in config["alerting"]["alertmanagers"] for s in am["static_configs"] for t in s["targets"]]
    assert targets == ["127.0.0.1:9093"]


def test_alert_rules_are_valid():
    passes(tool("promtool"), "check", "rules", "alerts.yml")


def test_alert_unit_tests_pass():
    passes(tool("promtool"), "test", "rules", "tests/alerts_test.yml")


def test_every_alert_has_a_firing_and_a_silent_unit_test():
    firing: set[str] = set()
    silent: set[str] = set()
    for case in load(OBS / "tests" / "alerts_test.yml")["tests"]:
        for check in case.get("alert_rule_test", []):
            (firing if check.get("exp_alerts") else silent).add(check["alertname"])
    names = {rule["alert"] for rule in alert_rules()}
    assert names - firing == set(), "alerts without a unit test where they fire"
    assert names - silent == set(), "alerts without a unit test where they stay silent"
    assert (firing | silent) - names == set(), "unit tests of alerts that do not exist"


def test_alerts_carry_severity_family_and_text():
    rules = alert_rules()
    assert len({rule["alert"] for rule in rules}) == len(rules), "duplicate alert names"
    for rule in rules:
        assert rule["labels"]["severity"] in {"warning", "critical"}, rule["alert"]
        assert rule["labels"].get("family"), rule["alert"]
        assert rule["annotations"].get("summary") and rule["annotations"].get("description"), rule["alert"]


# ---- Alertmanager -----------------------------------------------------------------------------------

def test_alertmanager_config_is_valid():
    passes(tool("amtool"), "check-config", "alertmanager.yml")


@pytest.mark.parametrize(("severity", "receiver"), [("critical", "mesh-critical"), ("warning", "mesh-warning")])
def test_alertmanager_routes_by_severity(severity: str, receiver: str):
    output = passes(tool("amtool"), "config", "routes", "test", "--config.file", "alertmanager.yml",
                    f"severity={severity}", "alertname=MeshProcessDown", "job=embedding")
    assert output.split()[0] == receiver, output


def test_alertmanager_inhibits_warnings_by_criticals_of_the_same_family():
    config = load(OBS / "alertmanager.yml")
    rules = config["inhibit_rules"]
    assert any(r["source_matchers"] == ['severity="critical"'] and r["target_matchers"] == ['severity="warning"']
               and "family" in r["equal"] for r in rules)
    families = {rule["alert"]: rule["labels"]["family"] for rule in alert_rules()}
    severities = {rule["alert"]: rule["labels"]["severity"] for rule in alert_rules()}
    # The pairs the inhibition is for: each has a warning and a critical alert in one family.
    assert families["MeshApiLatencyP95High"] == families["MeshApiLatencyP99Critical"]
    assert (severities["MeshApiLatencyP95High"], severities["MeshApiLatencyP99Critical"]) == ("warning", "critical")


# ---- Grafana ----------------------------------------------------------------------------------------

def test_dashboards_match_their_generator():
    from infra.observability import dashboards

    assert dashboards.differences() == [], "run: python -m infra.observability.dashboards"
    assert [path.name for path in dashboard_files()] == sorted(dashboards.BOARDS)


def test_dashboard_check_command_fails_on_a_stale_file(tmp_path: Path):
    from infra.observability import dashboards

    dashboards.write(tmp_path)
    assert dashboards.main(["--check", "--out", str(tmp_path)]) == 0
    (tmp_path / "mesh.json").write_text("{}\n", encoding="utf-8")
    assert dashboards.main(["--check", "--out", str(tmp_path)]) == 1


@pytest.mark.parametrize("name", [path.name for path in dashboard_files()])
def test_every_dashboard_query_parses(name: str, tmp_path: Path):
    from infra.observability.dashboards import panel_queries

    board = json.loads((DASHBOARDS / name).read_text(encoding="utf-8"))
    queries = panel_queries(board)
    assert queries, f"{name} has no queries"
    groups = []
    for number, (title, ref, expr) in enumerate(queries, start=1):
        for variable, value in GRAFANA_VARIABLES.items():
            expr = expr.replace(variable, value)
        assert "$" not in expr, f"{name} / {title}: unknown Grafana variable in {expr}"
        groups.append({"name": f"{name} query {number}: {title} ({ref})",
                       "rules": [{"record": f"dashboard:query_{number}_{ref}", "expr": expr}]})
    rules = tmp_path / "dashboard_queries.yml"
    rules.write_text(yaml.safe_dump({"groups": groups}, allow_unicode=True, sort_keys=False), encoding="utf-8")
    passes(tool("promtool"), "check", "rules", str(rules))


@pytest.mark.parametrize("name", [path.name for path in dashboard_files()])
def test_dashboard_queries_use_the_datasource_variable(name: str):
    board = json.loads((DASHBOARDS / name).read_text(encoding="utf-8"))
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    for panel in board["panels"]:
        for target in panel.get("targets") or []:
            assert target["datasource"]["uid"] == "${datasource}", panel["title"]
    ids = [panel["id"] for panel in board["panels"]]
    assert len(ids) == len(set(ids)), "panel ids must be unique"


def test_grafana_provisioning_points_at_prometheus_and_the_dashboards():
    provisioning = OBS / "grafana" / "provisioning"
    datasources = load(provisioning / "datasources" / "mesh.yml")["datasources"]
    assert [d["type"] for d in datasources if d.get("isDefault")] == ["prometheus"]
    providers = load(provisioning / "dashboards" / "mesh.yml")["providers"]
    assert len(providers) == 1 and providers[0]["type"] == "file" and providers[0]["options"]["path"]


# ---- metric names -----------------------------------------------------------------------------------

def exposed(name: str, kind: str) -> set[str]:
    """Sample names prometheus_client exposes for a metric declared as ``name`` of ``kind``."""
    if kind == "counter":
        base = name.removesuffix("_total")
        return {f"{base}_total"}
    if kind == "histogram":
        return {f"{name}_bucket", f"{name}_sum", f"{name}_count"}
    if kind == "summary":
        return {name, f"{name}_sum", f"{name}_count"}
    return {name}


def declared_series() -> set[str]:
    pattern = re.compile(r'\b(Counter|Gauge|Histogram|Summary)\(\s*"([a-zA-Z_:][a-zA-Z0-9_:]*)"')
    names: set[str] = set()
    for folder in ("services", "gateway"):
        for path in (ROOT / folder).rglob("*.py"):
            for kind, name in pattern.findall(path.read_text(encoding="utf-8")):
                names |= exposed(name, kind.lower())
    return names


def used_series() -> dict[str, set[str]]:
    from infra.observability.dashboards import panel_queries

    expressions = [(f"alert {rule['alert']}", rule["expr"]) for rule in alert_rules()]
    for path in dashboard_files():
        board = json.loads(path.read_text(encoding="utf-8"))
        expressions += [(f"{path.name} / {title}", expr) for title, _, expr in panel_queries(board)]
    token = re.compile(r"\b(mesh_[a-z0-9_]+|process_[a-z0-9_]+|up)\b(?!\s*[=!]~?)")
    used: dict[str, set[str]] = {}
    for where, expr in expressions:
        for name in token.findall(re.sub(r'"[^"]*"', '""', expr)):
            used.setdefault(name, set()).add(where)
    return used


def test_queries_and_alerts_use_only_known_metrics():
    known = declared_series() | STANDARD_SERIES
    for name, kind in PENDING_METRICS.items():
        known |= exposed(name, kind)
    unknown = {name: sorted(where) for name, where in used_series().items() if name not in known}
    assert unknown == {}, "metric names neither declared in services/ or gateway/ nor listed as pending"
