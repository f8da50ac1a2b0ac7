"""A model trained on data that knows one id still sends the id the user names (issue 39: "one known
value taught a constant"). The server documents one account (A-4471) and has five more nobody can
find (and a currency tool whose values its description lists, so that the bank is not one call); the pipeline (explore -> tasks -> built demos -> SFT on SmolLM2) varies the id when it knows
few (`ajet generate explore`'s vary: refused same-shape ids become tasks answered with the server's
refusal), and the trained model is asked about the five undocumented accounts."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ajet.jsonl import read_rows

ROOT = Path(__file__).resolve().parents[2]
PIPELINE = ROOT / "tutorial" / "example_mcp_pipeline" / "pipeline.yaml"
HIDDEN = {"A-2208": 1520.75, "A-3390": 88.4, "A-5016": 4302.1, "A-6634": 17.95, "A-7782": 640.0}


def ajet(*args: str) -> subprocess.CompletedProcess:
    run = subprocess.run([sys.executable, "-m", "ajet.cli", *args], capture_output=True, text=True, timeout=3600,
                         cwd=ROOT)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return run


@pytest.mark.slow
@pytest.mark.timeout(3600)  # five CLI runs, SFT on SmolLM2 among them: ~6 min on a quiet 2-core CPU
def test_a_model_trained_on_one_known_id_sends_the_id_the_user_names(tmp_path):
    server = tmp_path / "bank.py"
    server.write_text(textwrap.dedent(f'''
        from fastmcp import FastMCP
        mcp = FastMCP("bank")
        ACCOUNTS = {{"A-4471": 310.25, **{HIDDEN!r}}}

        RATES = {{"USD": 1.08, "GBP": 0.85, "JPY": 162.3, "CHF": 0.94, "SEK": 11.2}}

        @mcp.tool
        def exchange_rate(currency: str) -> dict:
            """Euros to a currency: one of USD, GBP, JPY, CHF, SEK."""
            if currency not in RATES:
                return {{"error": f"unknown currency {{currency}}"}}
            return {{"currency": currency, "per_eur": RATES[currency]}}

        @mcp.tool
        def account_balance(account_id: str) -> dict:
            """The balance of an account, e.g. A-4471."""
            if account_id not in ACCOUNTS:
                return {{"error": f"no account {{account_id}}"}}
            return {{"account_id": account_id, "balance_eur": ACCOUNTS[account_id]}}
        '''))
    val = tmp_path / "val.jsonl"
    val.write_text("".join(json.dumps({"task_id": f"v{i}", "query": f"What is the balance of account {acc}?",
                                       "answer": {"calls": [{"name": "account_balance", "arguments": {"account_id": acc}}],
                                                  "final": bal}}) + "\n" for i, (acc, bal) in enumerate(HIDDEN.items())))
    calls, tasks, sft = tmp_path / "calls.jsonl", tmp_path / "tasks.jsonl", tmp_path / "sft.jsonl"
    common = [f"workflow_args.server={server}", f"task_reader.train={tasks}", f"task_reader.val={val}",
              "task_reader.split_ratio=null", f"sft.data={sft}", "workflow_args.system_prompt='You are a bank assistant. Answer the user by calling the "
              "tools; when you have the result, reply with one short sentence that states the number.'"]
    ajet("generate", "explore", "--conf", str(PIPELINE), "--out", str(calls), *common)
    known = {r["arguments"]["account_id"] for r in read_rows(calls) if r["tool"] == "account_balance"}
    assert known == {"A-4471"}  # the bank knows one id: the hidden accounts were never found
    ajet("generate", "tasks", "--conf", str(PIPELINE), "--from-calls", str(calls), "-n", "40", "--out", str(tasks),
         *common)
    rows = read_rows(tasks)
    assert any(r["metadata"].get("refused") for r in rows)
    ajet("generate", "demos", "--conf", str(PIPELINE), "--tasks", str(tasks), "--out", str(sft), *common)
    # a small bank makes a small data set: more epochs than the tutorial's 3, so that the format is learnt
    ajet("--conf", str(PIPELINE), "--backbone=debug", f"output_dir={tmp_path}/run", "sft.epochs=8", *common)
    ajet("eval", "--conf", str(PIPELINE), "--model", str(tmp_path / "run"), f"output_dir={tmp_path}/eval",
         "eval.group_size=1", *common)
    predictions = read_rows(tmp_path / "eval" / "predictions.jsonl")
    sent = {p["task_id"]: [(c.get("arguments") or {}).get("account_id") for c in p.get("tool_calls") or []
                           if isinstance(c, dict)] for p in predictions}
    copied = sum(1 for i, acc in enumerate(HIDDEN) if acc in sent.get(f"v{i}", []))
    # the id the user named, never the one id the training data held most
    assert copied >= 4, sent
