"""`--with-ray` and the `ray:` section: the flag sets ray.enabled for training and eval, the YAML's
section is read as written, and the gateway stays on loopback unless asked."""

from __future__ import annotations

import io
from contextlib import redirect_stdout
from pathlib import Path

import yaml

from ajet.cli import main

ROOT = Path(__file__).resolve().parents[2]
TOOL_YAML = ROOT / "tutorial" / "example_tool_agent" / "tool_agent.yaml"


def _resolved(*args: str) -> dict:
    out = io.StringIO()
    with redirect_stdout(out):
        assert main([*args, "--cfg"]) == 0
    return yaml.safe_load(out.getvalue())["ajet"]


def test_with_ray_sets_ray_enabled_for_train_and_eval():
    assert _resolved("--conf", str(TOOL_YAML))["ray"]["enabled"] is False
    for command in ([], ["eval"]):
        cfg = _resolved(*command, "--conf", str(TOOL_YAML), "--with-ray", "ray.address=auto", "ray.num_workers=8")
        assert cfg["ray"]["enabled"] is True and cfg["ray"]["address"] == "auto" and cfg["ray"]["num_workers"] == 8
        assert cfg["gateway"]["host"] == "127.0.0.1"  # listening beyond loopback is asked for, never implied


def test_the_ray_section_from_a_yaml(tmp_path: Path):
    conf = tmp_path / "c.yaml"
    conf.write_text(f"defaults: [{{workflow: mcp_agent}}]\najet:\n  workflow_args: {{server: {TOOL_YAML.parent}/energy_server.py}}\n"
                    "  ray: {enabled: true, address: 'ray://head:10001', num_workers: 4, lost_retries: 0,\n"
                    "        runtime_env: {env_vars: {A: '1'}}}\n"
                    "  gateway: {host: 0.0.0.0, port: 8765}\n")
    cfg = _resolved("--conf", str(conf))
    assert cfg["ray"]["address"] == "ray://head:10001" and cfg["ray"]["lost_retries"] == 0
    assert cfg["ray"]["runtime_env"] == {"env_vars": {"A": "1"}} and cfg["gateway"]["port"] == 8765
