"""The function-calling tutorial's commands, in order, as a user runs them (real subprocesses, real HTTP):
data → eval → SFT + GRPO → BFCL on the run → GGUF export + verify → merged export → serve → bench →
/metrics. The tiny model keeps it short; the README's figures come from the embedded model."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]
TUTORIAL = ROOT / "tutorial" / "example_function_calling"
YAML = TUTORIAL / "function_calling.yaml"
TINY = ["model.path=tiny-random", "rollout.max_tokens_per_turn=16"]


def ajet(*args: str, timeout: int = 1800) -> str:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", "ajet.cli", *args], capture_output=True, text=True, timeout=timeout,
                          cwd=str(TUTORIAL), env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout


@pytest.mark.slow
def test_tutorial_end_to_end(tmp_path):
    out = ajet("data", "xlam", "xlam_fixture.json", "--out", str(tmp_path / "data"), "--val-ratio", "0.2")
    assert "wrote 192 train tasks, 48 val tasks and 192 SFT demonstrations" in out
    ajet("eval", "--conf", str(YAML), f"output_dir={tmp_path / 'base'}", "eval.limit=2", *TINY)
    assert json.loads((tmp_path / "base" / "eval.json").read_text())["tasks"] == 2

    run = tmp_path / "run"
    ajet("--conf", str(YAML), "--backbone=debug", f"output_dir={run}", "algorithm=[sft,grpo]", "sft.epochs=0.05",
         "trainer.steps=1", "rollout.group_size=2", "rollout.batch_tasks=2", *TINY)
    assert (run / "checkpoints").is_dir() and (run / "metrics.jsonl").read_text().count("\n") >= 2

    bfcl = tmp_path / "bfcl"
    ajet("eval", "--benchmark", "bfcl", "--model", str(run), "--categories", "simple_python", "--limit", "2",
         "--max-tokens", "8", "--out", str(bfcl))
    report = json.loads((bfcl / "eval.json").read_text())
    assert report["mode"] == "fc" and report["total"] == 2

    ajet("export", "--gguf", "q8_0", "--checkpoint", str(run), "--out", str(tmp_path / "gguf"),
         "--card-eval", str(bfcl / "eval.json"))
    card = (tmp_path / "gguf" / "README.md").read_text()
    assert "BFCL (fc mode" in card and "Algorithm: ['sft', 'grpo']" in card
    assert "verified GGUF" in ajet("export", "--verify", str(tmp_path / "gguf"))

    merged = tmp_path / "merged"
    ajet("export", "--checkpoint", str(run), "--out", str(merged), "--merge")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "ajet.cli", "serve", "--model", str(merged), "--port", str(port)],
                              env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        for _ in range(600):
            try:
                if httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.5)
        ajet("bench", "--endpoint", f"http://127.0.0.1:{port}/v1", "--model", str(merged), "--concurrency", "1,2",
             "--prompt-lens", "8", "--output-lens", "4", "--requests", "2", "--out", str(tmp_path / "bench"))
        assert (tmp_path / "bench" / "bench.png").is_file()
        metrics = httpx.get(f"http://127.0.0.1:{port}/metrics").text
        assert "vllm:request_success_total" in metrics
    finally:
        server.terminate()
        server.wait(timeout=30)
