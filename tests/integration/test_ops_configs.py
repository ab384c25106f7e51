"""The compose stack of collector-config/ is consistent: files, names, ports and datasource uids.

No container engine runs here, so the stack is checked by reading it: every file compose
mounts exists, every host:port one component sends to or scrapes is a compose service that
listens there, every datasource uid the dashboard uses is provisioned. Prometheus's and
Alertmanager's own checkers validate their files.
"""

from __future__ import annotations

import json
import re
import subprocess
import urllib.parse
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.servers.prometheus import AMTOOL_NAMES, KIT, PROMTOOL_NAMES, require_binary

COMPOSE_FILE = KIT / "docker-compose.yaml"
OTELCOL_FILE = KIT / "otelcol.yaml"
PROMETHEUS_FILE = KIT / "prometheus" / "prometheus.yml"
ALERTMANAGER_FILE = KIT / "alertmanager" / "alertmanager.yml"
TEMPO_FILE = KIT / "tempo" / "tempo.yaml"
LOKI_FILE = KIT / "loki" / "loki.yaml"
DATASOURCES_FILE = KIT / "grafana" / "provisioning" / "datasources" / "datasources.yaml"
DASHBOARD_PROVIDERS_FILE = KIT / "grafana" / "provisioning" / "dashboards" / "dashboards.yaml"
DASHBOARD_DIR = KIT / "grafana" / "dashboards"

# Ports the images listen on by default, which no file of the kit spells out.
IMAGE_DEFAULT_PORTS = {
    "jaegertracing/all-in-one": {4317, 4318, 16686},
    "prom/prometheus": {9090},
    "prom/alertmanager": {9093},
    "grafana/grafana": {3000},
}


def _load(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def _compose() -> dict[str, Any]:
    compose: dict[str, Any] = _load(COMPOSE_FILE)
    return compose


def _bind_mounts(service: dict[str, Any]) -> list[tuple[Path, str]]:
    """(host path, container path) of the service's bind mounts (named volumes left out)."""
    mounts = []
    for volume in service.get("volumes", []):
        source, target = volume.split(":")[:2]
        if source.startswith((".", "/")):
            mounts.append(((KIT / source).resolve(), target))
    return mounts


def _host_port(endpoint: str) -> tuple[str, int]:
    """``host:port`` of an endpoint written with or without a scheme."""
    parsed = urllib.parse.urlsplit(endpoint if "//" in endpoint else f"//{endpoint}")
    assert parsed.hostname is not None and parsed.port is not None, endpoint
    return parsed.hostname, parsed.port


def _port_of(address: str) -> int:
    return int(address.rsplit(":", 1)[1])


def _listening_ports(name: str) -> set[int]:
    """Ports compose service ``name`` listens on: published container ports, the image's
    defaults, and the listeners its mounted configuration declares."""
    service = _compose()["services"][name]
    ports = {int(str(p).split(":")[-1].split("/")[0]) for p in service.get("ports", [])}
    image = service["image"].split(":")[0]
    ports |= IMAGE_DEFAULT_PORTS.get(image, set())
    if name == "otel-collector":
        otelcol = _load(OTELCOL_FILE)
        for protocol in otelcol["receivers"]["otlp"]["protocols"].values():
            ports.add(_port_of(protocol["endpoint"]))
        ports.add(_port_of(otelcol["exporters"]["prometheus"]["endpoint"]))
        ports.add(_port_of(otelcol["service"]["telemetry"]["metrics"]["address"]))
    if name == "tempo":
        tempo = _load(TEMPO_FILE)
        ports.add(tempo["server"]["http_listen_port"])
        for protocol in tempo["distributor"]["receivers"]["otlp"]["protocols"].values():
            ports.add(_port_of(protocol["endpoint"]))
    if name == "loki":
        ports.add(_load(LOKI_FILE)["server"]["http_listen_port"])
    return ports


def _assert_reaches_a_service(endpoint: str, who: str) -> None:
    host, port = _host_port(endpoint)
    services = _compose()["services"]
    assert host in services, f"{who} sends to {host}, which is not a compose service"
    assert port in _listening_ports(host), f"{who} sends to {host}:{port}; {host} has no such port"


def _dashboards() -> list[dict[str, Any]]:
    return [json.loads(p.read_text(encoding="utf-8")) for p in sorted(DASHBOARD_DIR.glob("*.json"))]


def _datasource_refs(node: Any) -> list[dict[str, Any]]:
    """Every ``datasource: {type, uid}`` object anywhere in a dashboard."""
    found = []
    if isinstance(node, dict):
        source = node.get("datasource")
        if isinstance(source, dict) and "uid" in source:
            found.append(source)
        for value in node.values():
            found += _datasource_refs(value)
    elif isinstance(node, list):
        for item in node:
            found += _datasource_refs(item)
    return found


def _provisioned_uids() -> set[str]:
    return {source["uid"] for source in _load(DATASOURCES_FILE)["datasources"]}


# --- compose ------------------------------------------------------------------------------------


def test_compose_runs_every_component_of_the_stack() -> None:
    expected = {"otel-collector", "jaeger", "tempo", "prometheus", "alertmanager", "loki"}
    assert expected | {"grafana", "demo"} <= set(_compose()["services"])


def test_every_file_compose_mounts_exists() -> None:
    for name, service in _compose()["services"].items():
        for source, _ in _bind_mounts(service):
            assert source.exists(), f"{name} mounts {source}, which does not exist"


def test_every_service_compose_depends_on_exists() -> None:
    services = _compose()["services"]
    for name, service in services.items():
        for dependency in service.get("depends_on", []):
            assert dependency in services, f"{name} depends on unknown {dependency}"


def test_compose_publishes_each_host_port_once() -> None:
    published = [
        str(p).split(":")[0] for s in _compose()["services"].values() for p in s.get("ports", [])
    ]
    assert len(published) == len(set(published))


def test_demo_app_sends_otlp_to_the_collector() -> None:
    environment = _compose()["services"]["demo"]["environment"]
    _assert_reaches_a_service(environment["OTEL_EXPORTER_OTLP_ENDPOINT"], "the demo app")


# --- collector ----------------------------------------------------------------------------------


def test_collector_config_is_the_file_compose_mounts() -> None:
    collector = _compose()["services"]["otel-collector"]
    targets = {target: source for source, target in _bind_mounts(collector)}
    config_arg = next(a for a in collector["command"] if a.startswith("--config="))
    assert targets[config_arg.removeprefix("--config=")] == OTELCOL_FILE.resolve()


def test_collector_pipelines_use_only_defined_components() -> None:
    otelcol = _load(OTELCOL_FILE)
    for name, pipeline in otelcol["service"]["pipelines"].items():
        for kind in ("receivers", "processors", "exporters"):
            for component in pipeline.get(kind, []):
                assert component in otelcol[kind], f"pipeline {name} uses undefined {component}"


def test_collector_pipelines_start_with_memory_limiter_and_batch() -> None:
    for name, pipeline in _load(OTELCOL_FILE)["service"]["pipelines"].items():
        assert pipeline["processors"][:2] == ["memory_limiter", "batch"], name


def test_collector_sends_traces_to_jaeger_and_tempo_metrics_to_prometheus_logs_to_loki() -> None:
    otelcol = _load(OTELCOL_FILE)
    pipelines = otelcol["service"]["pipelines"]
    exporters = otelcol["exporters"]

    def hosts(signal: str) -> set[str]:
        return {
            _host_port(exporters[e]["endpoint"])[0]
            for e in pipelines[signal]["exporters"]
            if e != "prometheus"
        }

    assert hosts("traces") == {"jaeger", "tempo"}
    assert "prometheus" in pipelines["metrics"]["exporters"]
    assert hosts("logs") == {"loki"}


def test_every_collector_exporter_endpoint_is_a_compose_service_port() -> None:
    otelcol = _load(OTELCOL_FILE)
    used = {e for p in otelcol["service"]["pipelines"].values() for e in p["exporters"]}
    for name in used - {"prometheus"}:
        _assert_reaches_a_service(otelcol["exporters"][name]["endpoint"], f"exporter {name}")


def test_collector_prometheus_exporter_keeps_the_names_the_rules_use() -> None:
    exporter = _load(OTELCOL_FILE)["exporters"]["prometheus"]
    assert exporter["add_metric_suffixes"] is True


# --- Prometheus and Alertmanager ----------------------------------------------------------------


def test_every_prometheus_scrape_target_is_a_compose_service_port() -> None:
    for job in _load(PROMETHEUS_FILE)["scrape_configs"]:
        for static in job["static_configs"]:
            for target in static["targets"]:
                host, port = _host_port(target)
                if host == "localhost":
                    host = "prometheus"
                _assert_reaches_a_service(f"{host}:{port}", f"scrape job {job['job_name']}")


def test_prometheus_scrapes_the_collector_exporter_honouring_its_labels() -> None:
    exporter_port = _port_of(_load(OTELCOL_FILE)["exporters"]["prometheus"]["endpoint"])
    jobs = _load(PROMETHEUS_FILE)["scrape_configs"]
    collector_jobs = [
        job
        for job in jobs
        if f"otel-collector:{exporter_port}" in job["static_configs"][0]["targets"]
    ]
    assert len(collector_jobs) == 1
    assert collector_jobs[0]["honor_labels"] is True


def test_prometheus_sends_alerts_to_the_compose_alertmanager() -> None:
    managers = _load(PROMETHEUS_FILE)["alerting"]["alertmanagers"]
    for manager in managers:
        for target in manager["static_configs"][0]["targets"]:
            assert _host_port(target)[0] == "alertmanager"
            _assert_reaches_a_service(target, "Prometheus alerting")


def test_prometheus_rule_files_are_mounted_from_the_kit() -> None:
    prometheus = _compose()["services"]["prometheus"]
    mounted = {target: source for source, target in _bind_mounts(prometheus)}
    for rule_file in _load(PROMETHEUS_FILE)["rule_files"]:
        assert rule_file in mounted, f"{rule_file} is not mounted into prometheus"
        assert mounted[rule_file] == (KIT / "prometheus" / "rules.yaml").resolve()


def test_prometheus_config_passes_promtool_check(tmp_path: Path) -> None:
    promtool = require_binary(*PROMTOOL_NAMES)
    config = _load(PROMETHEUS_FILE)
    # Rule files are container paths; point them at the kit's files for the check.
    config["rule_files"] = [str(KIT / "prometheus" / Path(p).name) for p in config["rule_files"]]
    path = tmp_path / "prometheus.yml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    result = subprocess.run(
        [promtool, "check", "config", str(path)], capture_output=True, text=True, timeout=30
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_alertmanager_config_passes_amtool_check() -> None:
    amtool = require_binary(*AMTOOL_NAMES)
    result = subprocess.run(
        [amtool, "check-config", str(ALERTMANAGER_FILE)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_alertmanager_routes_pages_by_the_severity_the_rules_set() -> None:
    rules = _load(KIT / "prometheus" / "rules.yaml")
    severities = {
        r["labels"]["severity"] for g in rules["groups"] for r in g["rules"] if "alert" in r
    }
    routes = _load(ALERTMANAGER_FILE)["route"].get("routes", [])
    matched = {
        m.group(1)
        for route in routes
        for matcher in route.get("matchers", [])
        if (m := re.fullmatch(r'severity\s*=\s*"?(\w+)"?', matcher))
    }
    assert matched and matched <= severities


# --- Grafana ------------------------------------------------------------------------------------


def test_grafana_provisions_prometheus_tempo_jaeger_and_loki() -> None:
    types = {source["type"] for source in _load(DATASOURCES_FILE)["datasources"]}
    assert {"prometheus", "tempo", "jaeger", "loki"} <= types


def test_every_grafana_datasource_url_is_a_compose_service_port() -> None:
    for source in _load(DATASOURCES_FILE)["datasources"]:
        _assert_reaches_a_service(source["url"], f"datasource {source['name']}")


def test_grafana_datasource_links_point_at_provisioned_uids() -> None:
    uids = _provisioned_uids()
    sources = {s["uid"]: s for s in _load(DATASOURCES_FILE)["datasources"]}
    linked = [
        *(
            d["datasourceUid"]
            for d in sources["prometheus"]["jsonData"]["exemplarTraceIdDestinations"]
        ),
        sources["tempo"]["jsonData"]["tracesToLogsV2"]["datasourceUid"],
        sources["tempo"]["jsonData"]["tracesToMetrics"]["datasourceUid"],
        *(d["datasourceUid"] for d in sources["loki"]["jsonData"]["derivedFields"]),
    ]
    assert set(linked) <= uids


def test_grafana_mounts_the_provisioning_and_the_dashboards_where_the_provider_reads() -> None:
    grafana = _compose()["services"]["grafana"]
    mounted = {target: source for source, target in _bind_mounts(grafana)}
    provider_path = _load(DASHBOARD_PROVIDERS_FILE)["providers"][0]["options"]["path"]
    assert mounted[provider_path] == DASHBOARD_DIR.resolve()
    assert mounted["/etc/grafana/provisioning/datasources"] == DATASOURCES_FILE.parent.resolve()
    assert (
        mounted["/etc/grafana/provisioning/dashboards"] == DASHBOARD_PROVIDERS_FILE.parent.resolve()
    )


@pytest.mark.parametrize("dashboard", _dashboards(), ids=lambda d: str(d["uid"]))
def test_every_dashboard_datasource_uid_is_provisioned(dashboard: dict[str, Any]) -> None:
    uids = _provisioned_uids() | {"-- Grafana --"}
    refs = _datasource_refs(dashboard)
    assert refs
    unknown = {ref["uid"] for ref in refs} - uids
    assert not unknown, f"dashboard {dashboard['uid']} uses unprovisioned datasources {unknown}"


@pytest.mark.parametrize("dashboard", _dashboards(), ids=lambda d: str(d["uid"]))
def test_every_dashboard_panel_has_a_datasource_and_a_query(dashboard: dict[str, Any]) -> None:
    for panel in dashboard["panels"]:
        if panel["type"] == "row":
            continue
        assert panel["datasource"]["uid"], panel["title"]
        assert panel["targets"], panel["title"]


def test_dashboard_shows_what_the_kit_promises() -> None:
    dashboard = next(d for d in _dashboards() if d["uid"] == "ragpulse-answer-quality")
    panels = [p for p in dashboard["panels"] if p["type"] != "row"]
    types = {p["type"] for p in panels}
    assert {"timeseries", "heatmap", "table", "logs"} <= types
    queries = " ".join(t.get("expr", "") + t.get("query", "") for p in panels for t in p["targets"])
    for needle in (
        "ragpulse_evaluation_score_bucket",
        "ragpulse_evaluation_labels:fail_share15m",  # each metric against its own threshold
        "{ span.ragpulse.eval.groundedness.score",
        "ragpulse_evaluator_decisions_total",
        "ragpulse_evaluator_queue_size",
        "ragpulse_evaluator_held_spans",
        "ragpulse_evaluator_judge_latency_seconds_bucket",
        "ragpulse_evaluator_judge_tokens_total",
        "ragpulse_evaluator_errors_total",
        "ragpulse_eval_slice_sources",
        "ragpulse_eval_slice_question",
        "unwarranted_abstention_share15m",
        "slo_error_budget_remaining",  # the SLO's error budget
        "slo_burn_rate_1h",  # the implied hallucinated share against the budget
        "gen_ai_request_model, ragpulse_rag_name, otel_metric_overflow",  # where it dropped
    ):
        assert needle in queries, needle
    assert any(t.get("exemplar") for p in panels for t in p["targets"])


# --- gateway/: ragpulse serve replicas behind the loadbalancing Collector -----------------------

GATEWAY = KIT / "gateway"


def _gateway_compose() -> dict[str, Any]:
    compose: dict[str, Any] = _load(GATEWAY / "docker-compose.yaml")
    return compose


def _option(command: list[str], name: str) -> str:
    """The value after ``name`` in a ``ragpulse serve`` command."""
    assert name in command, f"{name} missing from {command}"
    return command[command.index(name) + 1]


def _volume_of(service: dict[str, Any], path: str) -> str:
    """The named volume ``path`` of a service's container lives in."""
    for volume in service.get("volumes", []):
        source, target = volume.split(":")[:2]
        if not source.startswith((".", "/")) and path.startswith(target.rstrip("/") + "/"):
            return source
    raise AssertionError(f"{path} is not in a named volume of the service")


def test_gateway_compose_replicas_require_a_token_and_serve_tls_from_the_secrets_volume() -> None:
    compose = _gateway_compose()
    replicas = {n: s for n, s in compose["services"].items() if n.startswith("ragpulse-serve-")}
    secrets = compose["services"]["serve-secrets"]
    (secrets_volume,) = {v.split(":")[0] for v in secrets["volumes"]}
    script = "\n".join(secrets["command"])

    assert len(replicas) == 3
    for service in replicas.values():
        command = service["command"]
        for option in ("--auth-token-file", "--tls-cert", "--tls-key"):
            path = _option(command, option)
            # The one-shot service writes this file into the volume the replica reads it from.
            assert _volume_of(service, path) == secrets_volume
            assert Path(path).name in script
        assert service["depends_on"]["serve-secrets"]["condition"] == (
            "service_completed_successfully"
        )
        assert "https://" in " ".join(service["healthcheck"]["test"])


def test_gateway_compose_certificate_names_every_replica_the_gateway_dials() -> None:
    compose = _gateway_compose()
    gateway = _load(GATEWAY / "otelcol-gateway.yaml")
    script = "\n".join(compose["services"]["serve-secrets"]["command"])
    names = set(re.findall(r"DNS:([\w.-]+)", script))

    hostnames = gateway["exporters"]["loadbalancing"]["resolver"]["static"]["hostnames"]

    assert {h.rsplit(":", 1)[0] for h in hostnames} <= names


def test_gateway_collector_sends_the_replicas_token_and_trusts_their_certificate() -> None:
    compose = _gateway_compose()
    gateway_service = compose["services"]["gateway"]
    replica = compose["services"]["ragpulse-serve-1"]
    otlp = _load(GATEWAY / "otelcol-gateway.yaml")["exporters"]["loadbalancing"]["protocol"]["otlp"]

    ca_file = otlp["tls"]["ca_file"]
    token_file = otlp["headers"]["authorization"].removeprefix("Bearer ${file:").removesuffix("}")

    assert not otlp["tls"].get("insecure", False)
    assert _volume_of(gateway_service, ca_file) == _volume_of(
        replica, _option(replica["command"], "--tls-cert")
    )
    assert Path(ca_file).name == Path(_option(replica["command"], "--tls-cert")).name
    assert _volume_of(gateway_service, token_file) == _volume_of(
        replica, _option(replica["command"], "--auth-token-file")
    )
    assert Path(token_file).name == Path(_option(replica["command"], "--auth-token-file")).name
