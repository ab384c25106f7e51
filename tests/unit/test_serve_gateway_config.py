"""collector-config/gateway/ is consistent: the Collector routes traces by trace id to the
replicas that exist, on the port they receive on, and everything ends at the backend Collector.

No Collector or cluster runs here, so the files are checked by reading them; the replicas'
command lines are parsed by ragpulse's own command line.
"""

from __future__ import annotations

import urllib.parse
from pathlib import Path
from typing import Any

import pytest
import yaml

from ragpulse.cli._setting_flags import checked_setting_flags
from ragpulse.cli.main import _parser
from ragpulse.settings import Settings

GATEWAY = Path(__file__).resolve().parents[2] / "collector-config" / "gateway"
K8S = GATEWAY / "k8s"


def _load(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def _documents(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")) if doc]


def _kind(path: Path, kind: str, name: str) -> dict[str, Any]:
    (found,) = [d for d in _documents(path) if d["kind"] == kind and d["metadata"]["name"] == name]
    return found


def _host_port(endpoint: str) -> tuple[str, int]:
    parsed = urllib.parse.urlsplit(endpoint if "//" in endpoint else f"//{endpoint}")
    assert parsed.hostname is not None and parsed.port is not None, endpoint
    return parsed.hostname, parsed.port


def _serve_args(arguments: list[str]) -> Any:
    """serve's options as it reads them: each setting checked, by its setting's name."""
    args = _parser().parse_args(["serve", *arguments])
    assert args.command == "serve"
    for name, value in checked_setting_flags(args).items():
        setattr(args, name, value)
    return args


def _check_collector(config: dict[str, Any]) -> None:
    """Every component a pipeline names is defined, and every pipeline has a receiver."""
    for name, pipeline in config["service"]["pipelines"].items():
        for section in ("receivers", "processors", "exporters"):
            for component in pipeline.get(section, []):
                assert component in config[section], f"{name}: {component} is not defined"
        assert pipeline["receivers"] and pipeline["exporters"], name
    for extension in config["service"].get("extensions", []):
        assert extension in config["extensions"]


def _grpc_port(config: dict[str, Any]) -> int:
    return _host_port(config["receivers"]["otlp"]["protocols"]["grpc"]["endpoint"])[1]


def _http_port(config: dict[str, Any]) -> int:
    return _host_port(config["receivers"]["otlp"]["protocols"]["http"]["endpoint"])[1]


@pytest.mark.parametrize(
    "config",
    [
        _load(GATEWAY / "otelcol-gateway.yaml"),
        _load(GATEWAY / "otelcol-backend.yaml"),
        yaml.safe_load(
            _kind(K8S / "otelcol-gateway.yaml", "ConfigMap", "otel-gateway")["data"]["config.yaml"]
        ),
        yaml.safe_load(
            _kind(K8S / "otelcol-backend.yaml", "ConfigMap", "otel-backend")["data"]["config.yaml"]
        ),
    ],
    ids=["compose-gateway", "compose-backend", "k8s-gateway", "k8s-backend"],
)
def test_collector_pipelines_name_only_defined_components(config: dict[str, Any]) -> None:
    _check_collector(config)


def test_gateway_routes_traces_by_trace_id_through_the_loadbalancing_exporter_alone() -> None:
    for config in (
        _load(GATEWAY / "otelcol-gateway.yaml"),
        yaml.safe_load(
            _kind(K8S / "otelcol-gateway.yaml", "ConfigMap", "otel-gateway")["data"]["config.yaml"]
        ),
    ):
        assert config["service"]["pipelines"]["traces"]["exporters"] == ["loadbalancing"]
        # A batch processor before the exporter would be harmless; none is needed, and the
        # exporter must see spans whole per trace id, which it does either way.
        loadbalancing = config["exporters"]["loadbalancing"]
        assert loadbalancing["routing_key"] == "traceID"
        otlp = loadbalancing["protocol"]["otlp"]
        assert "endpoint" not in otlp  # the resolver fills it in
        assert otlp["retry_on_failure"]["enabled"] and otlp["sending_queue"]["enabled"]


def test_compose_gateway_resolves_the_three_replicas_on_their_grpc_port() -> None:
    compose = _load(GATEWAY / "docker-compose.yaml")
    gateway = _load(GATEWAY / "otelcol-gateway.yaml")
    replicas = {n: s for n, s in compose["services"].items() if n.startswith("ragpulse-serve-")}

    hostnames = gateway["exporters"]["loadbalancing"]["resolver"]["static"]["hostnames"]

    assert len(replicas) == 3
    assert {_host_port(h)[0] for h in hostnames} == set(replicas)
    for name, service in replicas.items():
        args = _serve_args(service["command"])
        (port,) = {_host_port(h)[1] for h in hostnames if _host_port(h)[0] == name}
        assert args.grpc == f"0.0.0.0:{port}"
        assert args.http.startswith("0.0.0.0:")


def test_compose_replicas_and_gateway_send_to_the_backend_collector_it_listens_for() -> None:
    compose = _load(GATEWAY / "docker-compose.yaml")
    gateway = _load(GATEWAY / "otelcol-gateway.yaml")
    backend = _load(GATEWAY / "otelcol-backend.yaml")
    assert "otel-backend" in compose["services"]

    for name, service in compose["services"].items():
        if name.startswith("ragpulse-serve-"):
            host, port = _host_port(service["environment"]["OTEL_EXPORTER_OTLP_ENDPOINT"])
            assert (host, port) == ("otel-backend", _http_port(backend))
            assert service["environment"]["OTEL_EXPORTER_OTLP_PROTOCOL"] == "http/protobuf"
    host, port = _host_port(gateway["exporters"]["otlp/backend"]["endpoint"])
    assert (host, port) == ("otel-backend", _grpc_port(backend))
    assert _host_port(backend["exporters"]["otlp/jaeger"]["endpoint"])[0] in compose["services"]


def test_compose_mounts_and_builds_files_that_exist() -> None:
    compose = _load(GATEWAY / "docker-compose.yaml")
    for service in compose["services"].values():
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            if not source.startswith((".", "/")):
                assert source in compose["volumes"], source  # a named volume
                continue
            assert (GATEWAY / source).exists(), source
        build = service.get("build")
        if build:
            context = (GATEWAY / build["context"]).resolve()
            assert (context / build["dockerfile"]).exists()
            assert (context / "pyproject.toml").exists()


def test_compose_replicas_get_longer_to_stop_than_they_take_to_drain() -> None:
    compose = _load(GATEWAY / "docker-compose.yaml")
    for name, service in compose["services"].items():
        if name.startswith("ragpulse-serve-"):
            drain = _serve_args(service["command"]).serve_drain_timeout
            assert int(service["stop_grace_period"].rstrip("s")) > drain


def test_k8s_resolver_follows_the_headless_service_of_the_replicas() -> None:
    service = _kind(K8S / "ragpulse-serve.yaml", "Service", "ragpulse-serve")
    deployment = _kind(K8S / "ragpulse-serve.yaml", "Deployment", "ragpulse-serve")
    gateway = yaml.safe_load(
        _kind(K8S / "otelcol-gateway.yaml", "ConfigMap", "otel-gateway")["data"]["config.yaml"]
    )
    resolver = gateway["exporters"]["loadbalancing"]["resolver"]["k8s"]

    assert service["spec"]["clusterIP"] == "None"
    assert resolver["service"] == (
        f"{service['metadata']['name']}.{service['metadata']['namespace']}"
    )
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= labels.items()
    assert deployment["spec"]["replicas"] == 3
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    args = _serve_args(container["args"])
    container_ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert resolver["ports"] == [container_ports["otlp-grpc"]]
    assert args.grpc == f"0.0.0.0:{container_ports['otlp-grpc']}"
    assert args.http == f"0.0.0.0:{container_ports['otlp-http']}"


def test_k8s_replicas_probe_readiness_and_get_longer_to_stop_than_they_take_to_drain() -> None:
    deployment = _kind(K8S / "ragpulse-serve.yaml", "Deployment", "ragpulse-serve")
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    args = _serve_args(container["args"])

    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["port"] == "otlp-http"
    assert pod["terminationGracePeriodSeconds"] > args.serve_drain_timeout


def test_k8s_gateway_may_watch_the_endpoints_the_resolver_reads() -> None:
    path = K8S / "otelcol-gateway.yaml"
    deployment = _kind(path, "Deployment", "otel-gateway")
    role = _kind(path, "Role", "otel-gateway-endpoints")
    binding = _kind(path, "RoleBinding", "otel-gateway-endpoints")
    account = deployment["spec"]["template"]["spec"]["serviceAccountName"]

    assert _kind(path, "ServiceAccount", account)
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert {"kind": "ServiceAccount", "name": account}.items() <= binding["subjects"][0].items()
    granted = {
        (group, resource, verb)
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }
    for needed in (("", "endpoints"), ("discovery.k8s.io", "endpointslices")):
        for verb in ("list", "watch"):
            assert (*needed, verb) in granted


def test_k8s_replicas_and_gateway_send_to_the_backend_service() -> None:
    backend_service = _kind(K8S / "otelcol-backend.yaml", "Service", "otel-backend")
    ports = {p["name"]: p["port"] for p in backend_service["spec"]["ports"]}
    deployment = _kind(K8S / "ragpulse-serve.yaml", "Deployment", "ragpulse-serve")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e["value"] for e in container["env"]}
    gateway = yaml.safe_load(
        _kind(K8S / "otelcol-gateway.yaml", "ConfigMap", "otel-gateway")["data"]["config.yaml"]
    )
    expected_host = "otel-backend.observability.svc.cluster.local"

    assert _host_port(env["OTEL_EXPORTER_OTLP_ENDPOINT"]) == (expected_host, ports["otlp-http"])
    assert _host_port(gateway["exporters"]["otlp/backend"]["endpoint"]) == (
        expected_host,
        ports["otlp-grpc"],
    )
    namespaces = {
        doc["metadata"].get("namespace")
        for path in K8S.glob("*.yaml")
        for doc in _documents(path)
        if doc["kind"] != "Namespace"
    }
    assert namespaces == {
        _kind(K8S / "namespace.yaml", "Namespace", "observability")["metadata"]["name"]
    }


def _secret_file(pod: dict[str, Any], container: dict[str, Any], path: str) -> tuple[str, str]:
    """The (Secret name, key) a file path of ``container`` is mounted from."""
    volumes = {volume["name"]: volume for volume in pod["volumes"]}
    for mount in container.get("volumeMounts", []):
        directory = mount["mountPath"].rstrip("/") + "/"
        if path.startswith(directory):
            secret = volumes[mount["name"]]["secret"]
            key = path[len(directory) :]
            items = {item["path"]: item["key"] for item in secret.get("items", [])}
            return secret["secretName"], items.get(key, key)
    raise AssertionError(f"{path} is not mounted in {container['name']}")


def _secret_keys(name: str) -> set[str]:
    secret = _kind(K8S / "ragpulse-serve.yaml", "Secret", name)
    return set(secret.get("stringData", {})) | set(secret.get("data", {}))


def _serve_pod() -> tuple[dict[str, Any], dict[str, Any]]:
    deployment = _kind(K8S / "ragpulse-serve.yaml", "Deployment", "ragpulse-serve")
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    return pod, container


def test_k8s_replicas_require_a_token_and_serve_tls_from_secrets_in_the_manifest() -> None:
    pod, container = _serve_pod()
    args = _serve_args(container["args"])

    token_secret, token_key = _secret_file(pod, container, str(args.serve_auth_token_file))
    cert_secret, cert_key = _secret_file(pod, container, str(args.serve_tls_cert))
    key_secret, key_key = _secret_file(pod, container, str(args.serve_tls_key))

    assert token_key in _secret_keys(token_secret)
    assert cert_secret == key_secret
    assert _kind(K8S / "ragpulse-serve.yaml", "Secret", cert_secret)["type"] == "kubernetes.io/tls"
    assert {cert_key, key_key} <= _secret_keys(cert_secret)


def test_k8s_probes_speak_tls_to_replicas_that_serve_it() -> None:
    _, container = _serve_pod()

    assert container["readinessProbe"]["httpGet"]["scheme"] == "HTTPS"
    assert container["livenessProbe"]["httpGet"]["scheme"] == "HTTPS"


def test_k8s_gateway_sends_the_replicas_token_and_trusts_their_certificate() -> None:
    pod, container = _serve_pod()
    args = _serve_args(container["args"])
    path = K8S / "otelcol-gateway.yaml"
    gateway_pod = _kind(path, "Deployment", "otel-gateway")["spec"]["template"]["spec"]
    (collector,) = gateway_pod["containers"]
    config = yaml.safe_load(_kind(path, "ConfigMap", "otel-gateway")["data"]["config.yaml"])
    otlp = config["exporters"]["loadbalancing"]["protocol"]["otlp"]

    variable = otlp["headers"]["authorization"].removeprefix("Bearer ${env:").removesuffix("}")
    (env,) = [e for e in collector["env"] if e["name"] == variable]
    reference = env["valueFrom"]["secretKeyRef"]
    assert (reference["name"], reference["key"]) == _secret_file(
        pod, container, str(args.serve_auth_token_file)
    )
    assert not otlp["tls"].get("insecure", False)
    assert _secret_file(gateway_pod, collector, otlp["tls"]["ca_file"]) == _secret_file(
        pod, container, str(args.serve_tls_cert)
    )


def _mebibytes(quantity: str) -> int:
    units = {"Mi": 1, "Gi": 1024}
    return int(quantity[:-2]) * units[quantity[-2:]]


def test_k8s_replicas_buffer_fits_their_memory_limit() -> None:
    # bench/serve_memory.py: resident memory <= base + 2 x --buffer-bytes (base ~70 MiB),
    # and each judge process (--concurrency of them) takes ~40 MiB more.
    _, container = _serve_pod()
    args = _serve_args(container["args"])
    buffer_mib = (args.serve_buffer_bytes or Settings().serve_buffer_bytes) / 2**20
    judges_mib = (args.concurrency or Settings().concurrency) * 64

    needed = 128 + 2 * buffer_mib + judges_mib

    assert needed <= _mebibytes(container["resources"]["limits"]["memory"])
