"""The model card (`README.md`) written into an export: base model, data, config, eval figures.

Everything comes from files the run left behind: the export report, the run's `config.yaml` (base
model, task data, SFT data, algorithm, LoRA and trainer settings), the last line of `metrics.jsonl`,
the run's `eval.json`, and any further `eval.json` files given with `--card-eval` (a BFCL run, for
example). Missing pieces are left out, never invented.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def _yaml(path: Path) -> dict[str, Any]:
    import yaml

    from ajet.safeyaml import YAMLProblem, safe_load

    try:
        data = safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError, YAMLProblem):
        return {}
    return data.get("ajet", data) if isinstance(data, dict) else {}


def _last_metrics(path: Path) -> dict[str, Any] | None:
    if not path.is_file():
        return None
    last = None
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            last = json.loads(line)
        except ValueError:
            continue
    return last


def _eval_lines(path: Path) -> list[str]:
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return [f"- `{path}`: unreadable"]
    if report.get("benchmark") == "bfcl":
        lines = [f"- BFCL ({report.get('mode')} mode, bfcl-eval {report.get('bfcl_eval_version')}) on "
                 f"`{report.get('model')}`: mean accuracy {report['accuracy_mean']:.1%} "
                 f"({report['correct']}/{report['total']})"]
        for name, row in report.get("categories", {}).items():
            lines.append(f"  - {name}: {row['accuracy']:.1%} ({row['correct']}/{row['total']})")
        return lines
    parts = ", ".join(f"{k} {v:.3f}" for k, v in (report.get("reward_parts") or {}).items())
    line = f"- `{path.name}` on {report.get('tasks', '?')} tasks: reward {report.get('reward_mean', 0):.3f}"
    if "success_rate" in report:
        line += f", success {report['success_rate']:.1%}"
    return [line + (f" ({parts})" if parts else "")]


def render_model_card(report: dict[str, Any], run_dir: str | None, evals: list[Path]) -> str:
    """The card's Markdown."""
    cfg = _yaml(Path(run_dir) / "config.yaml") if run_dir else {}
    agreement = report["agreement"]
    lines = [f"# {report['gguf'].removesuffix('.gguf')}", "",
             f"A {report['type']} GGUF export made by `ajet export` on {report['created']}.", "",
             "## Model", "", f"- Base model: `{report.get('base_model')}`"]
    if report.get("step") is not None:
        lines.append(f"- Trained by ajet: checkpoint step {report['step']}"
                     f"{' (LoRA merged into the base weights)' if report.get('lora') else ''}")
    lines.append(f"- File: `{report['gguf']}`, {report['bytes'] / 1e6:.1f} MB, llama architecture")
    if cfg:
        reader, sft = cfg.get("task_reader") or {}, cfg.get("sft") or {}
        lines += ["", "## Data", ""]
        lines.append(f"- Tasks: {reader.get('type', '?')} reader, train `{reader.get('train')}`"
                     + (f", val `{reader['val']}`" if reader.get("val") else ""))
        if sft.get("data"):
            lines.append(f"- SFT demonstrations: `{sft['data']}` ({sft.get('epochs')} epochs)")
        trainer, lora = cfg.get("trainer") or {}, (cfg.get("model") or {}).get("lora") or {}
        lines += ["", "## Training config", "",
                  f"- Algorithm: {cfg.get('algorithm')}; judge: {(cfg.get('judge') or {}).get('type')}",
                  f"- LoRA: {'rank ' + str(lora.get('rank')) + ', alpha ' + str(lora.get('alpha')) if lora.get('enabled', True) else 'off (full fine-tuning)'}",
                  f"- Trainer: {trainer.get('steps')} steps, lr {trainer.get('lr')}, seed {trainer.get('seed')}",
                  f"- Full config: `{Path(run_dir) / 'config.yaml'}`"]
    metrics = _last_metrics(Path(run_dir) / "metrics.jsonl") if run_dir else None
    eval_lines = [line for path in ([Path(run_dir) / "eval.json"] if run_dir else []) + list(evals)
                  if path.is_file() for line in _eval_lines(path)]
    if metrics or eval_lines:
        lines += ["", "## Evaluation", ""]
        if metrics:
            shown = {k: v for k, v in metrics.items() if isinstance(v, (int, float)) and
                     k in ("step", "reward_mean", "success_rate", "loss", "val_reward_mean")}
            lines.append("- Last training step: " + ", ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}"
                                                             for k, v in shown.items()))
        lines += eval_lines
    lines += ["", "## Export check", "",
              f"Greedy answers of the source model and of this file (loaded back with transformers' GGUF "
              f"loader) on {agreement['prompts']} prompts, {agreement['max_new_tokens']} new tokens each: "
              f"{agreement['identical']}/{agreement['prompts']} identical, {agreement['token_agreement']:.1%} "
              "of tokens before the first difference.", "",
              "| prompt | source | GGUF |", "|---|---|---|"]
    for row in agreement["rows"]:
        cells = [row["prompt"], row["source"], row["gguf"]]
        lines.append("| " + " | ".join(c.replace("|", "\\|").replace("\n", " ") for c in cells) + " |")
    lines += ["", "## Use", "", "```bash",
              f"ajet export --verify {report['gguf']}          # load it and answer a smoke prompt",
              f"llama-cli -m {report['gguf']} -cnv            # llama.cpp", "```", ""]
    return "\n".join(lines)


def write_model_card(path: Path, report: dict[str, Any], run_dir: str | None, evals: list[Path]) -> Path:
    path.write_text(render_model_card(report, run_dir, evals), encoding="utf-8")
    return path
