"""`backbone.llamafactory.render: ajet`: LLaMA-Factory trains on the token ids ajet renders.

LLaMA-Factory's own templates word the tool instructions differently from the model's chat
template and show tool results as a user turn, so a model trained on them sees other prompts at
rollout, eval and serve time, where ajet's gateway renders. Here each row is rendered and tokenized
by `ajet.render.ChatRenderer` (the gateway's code path: the model's chat template, or
`model.chat_template`), the loss covers exactly the assistant turns, and LLaMA-Factory receives the
ids as a pre-tokenized dataset (its `tokenized_path`: a `datasets` folder it loads instead of
rendering anything):

    sft.jsonl ──ChatRenderer──▶ <stage>.tokens.jsonl ──(managed env: datasets.save_to_disk)──▶ <stage>.tokenized/

Columns are those LLaMA-Factory's own preprocessors write: `input_ids`, `attention_mask`, `labels`
(-100 off the loss) for SFT; `chosen_*` and `rejected_*` for DPO; empty `images`/`videos`/`audios`.
Rows longer than `cutoff_len` are skipped and counted (LLaMA-Factory does not cut pre-tokenized rows).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

from ajet.config.schema import AjetConfig
from ajet.errors import BackboneError
from ajet.trainer.sft_data import LoadReport

IGNORE = -100  # LLaMA-Factory's (and transformers') label for positions off the loss
_SAVE = (
    "import json, sys\n"
    "from datasets import Dataset, DatasetDict\n"
    "rows = [json.loads(line) for line in open(sys.argv[1], encoding='utf-8')]\n"
    "DatasetDict({'train': Dataset.from_list(rows)}).save_to_disk(sys.argv[2])\n"
)


def _labels(input_ids: list[int], loss_mask: list[int]) -> list[int]:
    return [t if m else IGNORE for t, m in zip(input_ids, loss_mask)]


def _media() -> dict[str, None]:
    return {"images": None, "videos": None, "audios": None}


def token_rows(cfg: AjetConfig, stage: str, model_path: str) -> tuple[list[dict[str, Any]], LoadReport]:
    """The stage's data file as LLaMA-Factory's tokenized rows, rendered as the gateway renders."""
    from transformers import AutoTokenizer

    from ajet.models import read_chat_template
    from ajet.render import ChatRenderer
    from ajet.trainer.sft_data import load_sft_samples, parse_preference, preference_samples, read_jsonl

    tokenizer = AutoTokenizer.from_pretrained(model_path)
    renderer = ChatRenderer(tokenizer, read_chat_template(cfg.model.chat_template))
    cutoff = cfg.backbone.llamafactory.cutoff_len
    rows: list[dict[str, Any]] = []
    if stage == "sft":
        samples, report = load_sft_samples(cfg.sft.data, renderer)
        for n, s in enumerate(samples):
            if len(s.input_ids) > cutoff:
                report.skipped.append(f"{cfg.sft.data}: conversation {n}: {len(s.input_ids)} tokens > cutoff_len={cutoff}")
                continue
            rows.append({"input_ids": s.input_ids, "attention_mask": [1] * len(s.input_ids),
                         "labels": _labels(s.input_ids, s.loss_mask), **_media()})
        return rows, report
    pairs, report = read_jsonl(cfg.dpo.data, parse_preference)
    for n, pair in enumerate(pairs):
        chosen, rejected = preference_samples(renderer, pair, n)
        if max(len(chosen.input_ids), len(rejected.input_ids)) > cutoff:
            report.skipped.append(f"{cfg.dpo.data}: pair {n}: longer than cutoff_len={cutoff} tokens")
            continue
        row: dict[str, Any] = {}
        for name, sample in (("chosen", chosen), ("rejected", rejected)):
            row.update({f"{name}_input_ids": sample.input_ids, f"{name}_attention_mask": [1] * len(sample.input_ids),
                        f"{name}_labels": _labels(sample.input_ids, sample.loss_mask)})
        rows.append({**row, **_media()})
    return rows, report


def write_tokenized(python: Path, rows: list[dict[str, Any]], jsonl: Path, folder: Path, env: dict[str, str]) -> Path:
    """Write `rows` as a `datasets` folder with the managed environment's own `datasets` (the on-disk
    format is that library's), replacing an older one: LLaMA-Factory loads any non-empty folder."""
    if not rows:
        raise BackboneError(f"no training rows left for LLaMA-Factory in {jsonl}: every row was skipped "
                            "(see the data report above)")
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    if folder.exists():
        shutil.rmtree(folder)
    proc = subprocess.run([str(python), "-c", _SAVE, str(jsonl), str(folder)], capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        tail = "\n".join(f"    {t}" for t in proc.stderr.strip().splitlines()[-8:])
        raise BackboneError(f"could not write the tokenized dataset {folder} with {python} (exit {proc.returncode}):\n{tail}")
    return folder
