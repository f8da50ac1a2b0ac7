"""deploy/: the Kubernetes manifests and the rendered Helm chart validate against the Kubernetes
schemas (kubernetes-validate ships them), the Grafana dashboard asks only for metrics `ajet serve`
exposes, and the image builds when a Docker daemon is reachable."""

from __future__ import annotations

import copy
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from ajet.serving.metrics import ServingMetrics

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
KUBE_VERSION = "1.30.0"
kv = pytest.importorskip("kubernetes_validate", reason="kubernetes-validate is not installed (ajet[deploy])")


def validate(doc: dict) -> None:
    kv.validate(doc, KUBE_VERSION, strict=True)


def render(values: dict) -> list[dict]:
    helm = pytest.importorskip("helm_python", reason="helm-python-sdk is not installed (ajet[deploy])")
    with helm.Chart.load(DEPLOY / "helm" / "ajet") as chart:
        files = chart.render(values, name="demo", namespace="serving")
    return [doc for text in files.values() for doc in yaml.safe_load_all(text) if doc]


@pytest.mark.parametrize("name", ["ajet-cpu.yaml", "vllm-gpu.yaml"])
def test_manifests_are_valid_kubernetes(name):
    docs = [d for d in yaml.safe_load_all((DEPLOY / "k8s" / name).read_text()) if d]
    for doc in docs:
        validate(doc)
    deployment = next(d for d in docs if d["kind"] == "Deployment")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert deployment["spec"]["template"]["metadata"]["annotations"]["prometheus.io/path"] == "/metrics"
    if name == "vllm-gpu.yaml":
        assert container["resources"]["limits"]["nvidia.com/gpu"] == "1"
        assert "--tool-call-parser" in container["args"]
    else:
        assert container["args"][:2] == ["--model", "smollm2-135m-instruct"]


def test_the_validator_rejects_a_broken_manifest():
    doc = next(d for d in yaml.safe_load_all((DEPLOY / "k8s" / "ajet-cpu.yaml").read_text())
               if d["kind"] == "Deployment")
    broken = copy.deepcopy(doc)
    broken["spec"]["replicas"] = "one"
    with pytest.raises(kv.ValidationError):
        validate(broken)
    typo = copy.deepcopy(doc)
    typo["spec"]["template"]["spec"]["containers"][0]["imagePullPolicyy"] = "Always"
    with pytest.raises(kv.ValidationError):
        validate(typo)


@pytest.mark.parametrize("values, container, kinds", [
    ({}, "ajet", ["Deployment", "Service"]),
    ({"backend": "vllm"}, "vllm", ["Deployment", "PersistentVolumeClaim", "Service"]),
    ({"models": {"enabled": True}, "ajet": {"model": "/models/merged"}}, "ajet",
     ["Deployment", "PersistentVolumeClaim", "Service"]),
])
def test_helm_chart_renders_valid_manifests(values, container, kinds):
    docs = render(values)
    assert sorted(d["kind"] for d in docs) == kinds
    for doc in docs:
        validate(doc)
    deployment = next(d for d in docs if d["kind"] == "Deployment")
    spec = deployment["spec"]["template"]["spec"]["containers"][0]
    assert spec["name"] == container
    if container == "vllm":
        assert spec["resources"]["limits"]["nvidia.com/gpu"] == "1"
        assert spec["args"][spec["args"].index("--model") + 1] == "/models/merged"
    if values.get("ajet", {}).get("model"):
        assert spec["args"][1] == "/models/merged" and spec["volumeMounts"][0]["mountPath"] == "/models"


def test_helm_chart_refuses_an_unknown_backend():
    helm = pytest.importorskip("helm_python")
    with pytest.raises(helm.HelmError, match="backend must be ajet or vllm"):
        render({"backend": "tgi"})


def test_dashboard_and_prometheus_ask_for_what_ajet_serve_exposes():
    suffixes = {"counter": ["_total"], "histogram": ["_bucket", "_sum", "_count"], "gauge": [""]}
    names = {f.name + end for f in ServingMetrics("m").registry.collect() for end in suffixes[f.type]}
    dashboard = json.loads((DEPLOY / "monitoring" / "grafana" / "dashboards" / "ajet-serving.json").read_text())
    asked = {name for panel in dashboard["panels"] for target in panel["targets"]
             for name in re.findall(r"((?:vllm|ajet):[a-z0-9_:]+)", target["expr"])}
    assert len(asked) >= 8 and asked <= names, asked - names
    prometheus = yaml.safe_load((DEPLOY / "monitoring" / "prometheus.yml").read_text())
    assert prometheus["scrape_configs"][0]["static_configs"][0]["targets"] == ["ajet:8000"]
    compose = yaml.safe_load((DEPLOY / "docker" / "docker-compose.yml").read_text())
    assert set(compose["services"]) == {"ajet", "prometheus", "grafana"}
    for service in compose["services"].values():  # every mounted file exists
        for volume in service.get("volumes", []):
            assert (DEPLOY / "docker" / volume.split(":")[0]).resolve().exists(), volume
    build = compose["services"]["ajet"]["build"]
    assert (DEPLOY / "docker" / build["context"] / build["dockerfile"]).resolve().is_file()


def _docker_daemon() -> str | None:
    if shutil.which("docker") is None:
        return "the docker CLI is not installed"
    probe = subprocess.run(["docker", "info"], capture_output=True, text=True, timeout=30)
    return None if probe.returncode == 0 else "no Docker daemon is reachable (docker info failed)"


@pytest.mark.slow
def test_docker_image_builds():
    reason = _docker_daemon()
    if reason:
        pytest.skip(f"{reason}: the image build needs docker")
    root = DEPLOY.parent
    subprocess.run(["docker", "build", "-f", str(DEPLOY / "docker" / "Dockerfile"), "-t", "ajet-serve:test", str(root)],
                   check=True, timeout=3600)
