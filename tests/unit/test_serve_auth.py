"""`ajet serve --api-key` (and vLLM's VLLM_API_KEY), and the refusal to expose runtime LoRA loading
on a non-loopback host without a key (issue 16, item 10). Real `ajet serve` subprocesses on 127.0.0.1."""

from __future__ import annotations

import os
import subprocess
import sys

import httpx
import pytest

from ajet.errors import ConfigError
from ajet.loopback import is_loopback
from ajet.serving.auth import check_exposure
from tests.e2e.serve_process import ROOT, ajet_serve


def _assert_401(answer: httpx.Response) -> None:
    assert answer.status_code == 401, answer.text
    error = answer.json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["code"] == "invalid_api_key"
    assert "Authorization: Bearer" in error["message"]


@pytest.mark.parametrize("how", ["flag", "env"])
def test_every_route_but_health_and_metrics_needs_the_key(tiny_model_path, tmp_path, how):
    flags, env = (("--api-key", "s3cret"), None) if how == "flag" else ((), {"VLLM_API_KEY": "s3cret"})
    with ajet_serve(tiny_model_path, tmp_path / "serve.log", "--enable-lora", *flags, env=env) as url:
        root = url.removesuffix("/v1")
        with httpx.Client(timeout=60) as http:
            requests = [("GET", "/v1/models", None), ("POST", "/v1/completions", {"prompt": [1, 2], "max_tokens": 2}),
                        ("POST", "/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}],
                                                          "max_tokens": 2}),
                        ("POST", "/v1/load_lora_adapter", {"lora_name": "a", "lora_path": str(tmp_path)}),
                        ("POST", "/v1/unload_lora_adapter", {"lora_name": "a"}), ("GET", "/v1/nothing", None)]
            for method, path, body in requests:
                for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "s3cret"},
                                {"Authorization": "Basic s3cret"}):
                    _assert_401(http.request(method, root + path, json=body, headers=headers))
            good = {"Authorization": "Bearer s3cret"}
            assert http.get(root + "/v1/models", headers=good).status_code == 200
            assert http.post(root + "/v1/completions", json={"prompt": [1, 2], "max_tokens": 2},
                             headers=good).status_code == 200
            assert http.post(root + "/v1/unload_lora_adapter", json={"lora_name": "a"}, headers=good).status_code == 404
            assert http.get(root + "/health").status_code == 200  # open, as in vLLM
            metrics = http.get(root + "/metrics")
            assert metrics.status_code == 200 and 'status="401"' in metrics.text


def _serve(*flags: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "VLLM_API_KEY"}
    return subprocess.run([sys.executable, "-m", "ajet.cli", "serve", "--model", "tiny-random", *flags], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.7", "myhost.example"])
def test_lora_loading_on_a_public_host_without_a_key_does_not_start(host):
    done = _serve("--host", host, "--enable-lora", "--port", "1")
    assert done.returncode == 2, done.stderr
    assert "--enable-lora with --host" in done.stderr and "--api-key" in done.stderr
    assert "Traceback" not in done.stderr


def test_which_hosts_need_a_key():
    for host in ("127.0.0.1", "127.0.0.2", "localhost", "::1", "[::1]"):
        assert is_loopback(host)
        check_exposure(host, enable_lora=True, api_key=None)
    check_exposure("0.0.0.0", enable_lora=True, api_key="k")  # with a key: allowed
    check_exposure("0.0.0.0", enable_lora=False, api_key=None)  # no LoRA loading: allowed, as vLLM
    with pytest.raises(ConfigError, match="anyone who can reach the port could load any folder"):
        check_exposure("0.0.0.0", enable_lora=True, api_key=None)
