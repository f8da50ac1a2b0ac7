"""`ajet export --gguf {f16,q8_0,q4_0}` and `ajet export --verify`: GGUF files that load back and answer
like the model they came from.

    export_gguf(source, out, kind)   source: a checkpoint, a run folder (its newest checkpoint, LoRA
                                     merged first), a model folder or a model name such as
                                     'smollm2-135m-instruct'. Writes out/<name>-<kind>.gguf, loads it
                                     back with transformers (`gguf_file=`), generates greedily on
                                     AGREEMENT_PROMPTS with both models and records the agreement in
                                     out/export.json; writes the model card out/README.md.
    verify_export(folder)            loads the GGUF (or HF folder) in `folder` and answers a smoke prompt.

f16 keeps every weight as float16: the file's tensors equal the source's rounded to float16
bit for bit, and greedy answers match. q8_0 and q4_0 quantize 2-D weights in 32-value blocks, so
answers may drift; the measured agreement is printed and kept.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

from rich.console import Console

from ajet.errors import CheckpointError
from ajet.export.gguf_writer import GGUF_TYPES, GgufType, write_gguf

console = Console()
AGREEMENT_PROMPTS = (
    "What is the capital of France?",
    "Write one sentence about the ocean.",
    "List three colors.",
    "What is 12 plus 7?",
)
SMOKE_PROMPT = "What is the capital of France?"


def export_gguf(source: str | Path, out: str | Path, kind: GgufType, *, max_new_tokens: int = 32,
                card_evals: list[str | Path] = ()) -> dict[str, Any]:
    """Write the GGUF, measure greedy agreement with the source, write the model card; returns the report."""
    if kind not in GGUF_TYPES:
        raise CheckpointError(f"--gguf must be one of {', '.join(GGUF_TYPES)}, got {kind!r}")
    from ajet.export.card import write_model_card
    from ajet.trainer.export import staged_folder

    out = Path(out)
    with staged_folder(out) as tmp:
        model_dir, origin = _hf_folder(source, tmp / "merged")
        name = origin.get("name") or Path(model_dir).name
        gguf_file = write_gguf(model_dir, tmp / f"{name}-{kind}.gguf", kind, name=name)
        agreement = measure_agreement(model_dir, gguf_file, max_new_tokens=max_new_tokens)
        report = {"gguf": gguf_file.name, "type": kind, "bytes": gguf_file.stat().st_size,
                  "source": str(source), **origin, "agreement": agreement,
                  "created": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        (tmp / "export.json").write_text(json.dumps(report, indent=2), encoding="utf-8")
        write_model_card(tmp / "README.md", report, origin.get("run_dir"), [Path(p) for p in card_evals])
        shutil.rmtree(tmp / "merged", ignore_errors=True)
    print_agreement(report)
    console.print(f"wrote {out / report['gguf']} ({report['bytes'] / 1e6:.1f} MB), {out / 'README.md'}")
    return report


def _hf_folder(source: str | Path, merged: Path) -> tuple[str, dict[str, Any]]:
    """A HF model folder for `source` and what is known about where it came from."""
    from ajet.models import resolve_model_path
    from ajet.trainer.checkpoint import latest_checkpoint, read_state, resolve_checkpoint
    from ajet.trainer.export import export_checkpoint

    path = Path(source)
    if (path / "checkpoints").is_dir():
        newest = latest_checkpoint(path)
        if newest is None:
            raise CheckpointError(f"run folder {str(path)!r} has no complete checkpoint to export")
        path = newest
    if (path / "state.json").is_file():
        checkpoint = resolve_checkpoint(path)
        state = read_state(checkpoint)
        export_checkpoint(checkpoint, merged, merge=True)
        run_dir = checkpoint.parent.parent if checkpoint.parent.name == "checkpoints" else None
        return str(merged), {"base_model": state["model"]["path"], "step": state.get("step"),
                             "lora": bool(state.get("lora")), "run_dir": str(run_dir) if run_dir else None,
                             "name": _slug(run_dir.name if run_dir else checkpoint.name)}
    folder = resolve_model_path(str(source))
    if not Path(folder).is_dir():
        raise CheckpointError(f"{source!r} is not a checkpoint, a run folder or a local model folder "
                              "(hub ids need the network: download the model first)")
    return folder, {"base_model": str(source), "name": _slug(Path(str(source)).name)}


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in text) or "model"


def _greedy(model: Any, tokenizer: Any, prompt: str, max_new_tokens: int) -> list[int]:
    import torch

    ids = tokenizer.apply_chat_template([{"role": "user", "content": prompt}], add_generation_prompt=True,
                                        return_tensors="pt", return_dict=True)
    with torch.no_grad():
        out = model.generate(**ids, max_new_tokens=max_new_tokens, do_sample=False,
                             pad_token_id=tokenizer.eos_token_id)
    return out[0, ids["input_ids"].shape[1]:].tolist()  # (T_new,)


def load_gguf_model(gguf_file: Path) -> Any:
    """The model of a GGUF file alone, through transformers' GGUF loader (dequantized, float32): the
    tokenizer's conversion is most of a full load's time."""
    import torch
    from transformers import AutoModelForCausalLM

    try:
        model = AutoModelForCausalLM.from_pretrained(str(gguf_file.parent), gguf_file=gguf_file.name,
                                                     dtype=torch.float32)
    except (OSError, ValueError, KeyError) as exc:
        raise CheckpointError(f"cannot load {gguf_file} back with transformers: {exc}") from exc
    return model.eval()


def load_gguf(gguf_file: Path) -> tuple[Any, Any]:
    """The model and tokenizer of a GGUF file, through transformers' GGUF loader (dequantized, float32)."""
    from ajet.models import load_gguf_tokenizer

    try:
        tokenizer = load_gguf_tokenizer(gguf_file)
    except (OSError, ValueError, KeyError) as exc:
        raise CheckpointError(f"cannot load {gguf_file} back with transformers: {exc}") from exc
    return load_gguf_model(gguf_file), tokenizer


def measure_agreement(model_dir: str, gguf_file: Path, *, max_new_tokens: int = 32) -> dict[str, Any]:
    """Greedy answers of the source model and of the GGUF file on AGREEMENT_PROMPTS, compared."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    source = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    source_tok = AutoTokenizer.from_pretrained(model_dir)
    exported, exported_tok = load_gguf(gguf_file)
    rows, same_tokens, all_tokens = [], 0, 0
    for prompt in AGREEMENT_PROMPTS:
        want = _greedy(source, source_tok, prompt, max_new_tokens)
        got = _greedy(exported, exported_tok, prompt, max_new_tokens)
        prefix = 0
        while prefix < min(len(want), len(got)) and want[prefix] == got[prefix]:
            prefix += 1
        same_tokens += prefix
        all_tokens += max(len(want), len(got))
        rows.append({"prompt": prompt, "source": source_tok.decode(want, skip_special_tokens=True),
                     "gguf": exported_tok.decode(got, skip_special_tokens=True), "identical": want == got,
                     "common_prefix_tokens": prefix, "tokens": max(len(want), len(got))})
    identical = sum(r["identical"] for r in rows)
    return {"prompts": len(rows), "identical": identical, "token_agreement": same_tokens / max(all_tokens, 1),
            "max_new_tokens": max_new_tokens, "rows": rows}


def print_agreement(report: dict[str, Any]) -> None:
    a = report["agreement"]
    console.print(f"greedy agreement {report['type']}: {a['identical']}/{a['prompts']} prompts identical, "
                  f"{a['token_agreement']:.1%} of tokens before the first difference")


def find_gguf(folder: Path) -> Path | None:
    files = sorted(folder.glob("*.gguf")) if folder.is_dir() else ([folder] if folder.suffix == ".gguf" else [])
    return files[0] if files else None


def verify_export(target: str | Path, prompt: str = SMOKE_PROMPT, max_new_tokens: int = 32) -> dict[str, Any]:
    """Load an export (a GGUF file, a folder holding one, or a HF model folder) and answer `prompt`."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = Path(target)
    if not path.exists():
        raise CheckpointError(f"--verify {str(path)!r} does not exist")
    gguf_file = find_gguf(path)
    started = time.perf_counter()
    if gguf_file is not None:
        model, tokenizer = load_gguf(gguf_file)
        kind = f"GGUF {gguf_file.name}"
    elif (path / "config.json").is_file():
        model = AutoModelForCausalLM.from_pretrained(str(path), dtype=torch.float32).eval()
        tokenizer = AutoTokenizer.from_pretrained(str(path))
        kind = "Hugging Face folder"
    elif (path / "adapter_config.json").is_file():
        raise CheckpointError(f"{path} is a LoRA adapter export; verify a merged export (--merge) or a GGUF")
    else:
        raise CheckpointError(f"{path} holds neither a .gguf file nor a model folder (config.json)")
    load_s = time.perf_counter() - started
    ids = _greedy(model, tokenizer, prompt, max_new_tokens)
    answer = tokenizer.decode(ids, skip_special_tokens=True).strip()
    if not ids:
        raise CheckpointError(f"{kind} loaded but generated no token for {prompt!r}")
    parameters = sum(p.numel() for p in model.parameters())
    console.print(f"verified {kind}: {parameters / 1e6:.1f}M parameters, loaded in {load_s:.1f} s")
    console.print(f"  {prompt!r} -> {answer!r} ({len(ids)} tokens)")
    return {"kind": kind, "parameters": parameters, "prompt": prompt, "answer": answer, "tokens": len(ids)}
