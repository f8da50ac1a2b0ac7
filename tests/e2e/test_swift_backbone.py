"""The swift backbone for real: ms-swift in its managed environment, real subprocesses, CPU, tiny model.

The environment is built from nothing on first use (about 4-5 minutes; reused afterwards, also by
later test runs on the same machine). Marked `backend`: part of the default run, pick them with
`-m backend`.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ajet.backbone.registry import run_backbone
from ajet.backbone.swift.env import swift_python
from ajet.config.loader import load_config
from ajet.errors import BackboneError, ConfigError

pytestmark = [pytest.mark.backend, pytest.mark.timeout(1800)]

REPO = Path(__file__).resolve().parents[2]
TUTORIAL = REPO / "tutorial" / "example_tool_agent"
HELPERS = Path(__file__).resolve().parent / "swift_workflow.py"
PREFERENCES = REPO / "tests" / "golden" / "swift" / "preferences.jsonl"


@pytest.fixture(scope="module")
def swift_env() -> Path:
    """The managed swift environment (built here when this machine has none yet)."""
    return swift_python()


def _cfg(run_dir: Path, *overrides: str):
    return load_config(TUTORIAL / "tool_agent.yaml", [f"output_dir={run_dir}", "model.path=tiny-random",
                                                      "model.device=cpu", *overrides], backbone="swift")


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _sft_subset(tmp_path: Path, n: int = 4) -> Path:
    path = tmp_path / "sft_subset.jsonl"
    path.write_text("".join((TUTORIAL / "sft.jsonl").read_text(encoding="utf-8").splitlines(True)[:n]))
    return path


@pytest.fixture(scope="module")
def sft_grpo_run(swift_env: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """The tutorial's two stages on swift: SFT 2 steps, then GRPO 2 steps with a multi-turn workflow."""
    tmp = tmp_path_factory.mktemp("swift")
    cfg = _cfg(tmp / "run", "algorithm=[sft,grpo]", f"sft.data={_sft_subset(tmp)}", "sft.batch_size=2", "sft.epochs=1",
               "sft.neftune_alpha=5",  # swift's own parser must take the flag
               f"workflow={HELPERS}:ScriptedToolAgent", "+workflow_args.fail_every=4",
               f"judge.type={HELPERS}:VariedJudge", "~judge.args", "task_reader.limit=2", "rollout.batch_tasks=2",
               "rollout.group_size=2", "rollout.retries=0", "rollout.max_tokens_per_turn=12", "trainer.steps=2", "trainer.save_every=0",
               "backbone.swift.record_samples=true")
    result = run_backbone(cfg)
    return Path(result["run_dir"]), result


def test_sft_then_grpo_record_metrics_and_checkpoints(sft_grpo_run) -> None:
    run_dir, result = sft_grpo_run
    rows = _rows(run_dir / "metrics.jsonl")
    assert [(r["step"], r["stage"]) for r in rows] == [(1, "sft"), (2, "sft"), (3, "grpo"), (4, "grpo")]
    assert all(r["loss"] == r["loss"] and r["grad_norm"] >= 0 for r in rows)  # numbers, not NaN
    record = json.loads((run_dir / "ajet_checkpoint.json").read_text())
    assert record["stages_done"] == ["sft", "grpo"] and (run_dir / record["latest"]).resolve() == Path(result["checkpoint"])
    grpo_ckpt = Path(result["checkpoint"])
    assert grpo_ckpt == run_dir.resolve() / "swift" / "grpo" / "output" / "checkpoint-2"
    info = json.loads((grpo_ckpt / "ajet_checkpoint.json").read_text())
    assert (info["backbone"], info["stage"], info["lora"], info["template"]) == ("swift", "grpo", True, "ajet")
    # the GRPO stage continued the SFT adapter
    grpo_args = json.loads((run_dir / "swift" / "grpo" / "args.json").read_text())["args"]
    sft_args = json.loads((run_dir / "swift" / "sft" / "args.json").read_text())["args"]
    assert sft_args["neftune_noise_alpha"] == 5.0 and "neftune_noise_alpha" not in grpo_args
    assert grpo_args["adapters"] == [str(run_dir.resolve() / "swift" / "sft" / "output" / "checkpoint-2")]
    # --resume of a finished run: nothing left to train, nothing launched, the same checkpoint
    again = run_backbone(load_config(run_dir / "config.yaml", []), resume=str(run_dir))
    assert again["checkpoint"] == result["checkpoint"] and len(_rows(run_dir / "metrics.jsonl")) == 4


def test_grpo_trains_every_llm_turn_and_masks_tool_results(sft_grpo_run, tiny_tokenizer) -> None:
    run_dir, _ = sft_grpo_run
    trained = {r["episode_id"]: r for r in _rows(run_dir / "swift" / "grpo" / "trained_samples.jsonl")}
    episodes = {r["episode_id"]: r for r in _rows(run_dir / "episodes.jsonl")}
    assert len(episodes) == 8 and set(trained) == set(episodes)  # 2 steps x 2 tasks x 2 episodes, all trained on
    multi_turn = 0
    for episode_id, sample in trained.items():
        ids, labels = sample["input_ids"], sample["labels"]
        if episodes[episode_id]["error"]:  # trains nothing: one labelled EOS whose advantage is 0 (see below)
            assert labels == [-100] * (len(ids) - 1) + [tiny_tokenizer.eos_token_id]
            continue
        calls = sample["calls"]
        assert len(calls) == len(episodes[episode_id]["task"]["answer"]["calls"]) + 1
        multi_turn += len(calls) > 1
        # token by token: each LLM turn's completion is in the sequence, in order, with labels == ids,
        # and every other token (prompt, tool results, template text between turns) is masked
        expected = [-100] * len(ids)
        pos = 0
        for call in calls:
            span = call["completion_ids"]
            at = next(i for i in range(pos, len(ids) - len(span) + 1) if ids[i:i + len(span)] == span)
            expected[at:at + len(span)] = span
            pos = at + len(span)
        assert labels == expected
        text = tiny_tokenizer.decode(ids)
        for result_name in (c["name"] for c in episodes[episode_id]["task"]["answer"]["calls"]):
            assert f"TOOL-RESULT {result_name} ok" in text  # the tool result is in the sequence, masked
    assert multi_turn >= 4


def test_grpo_failures_are_counted_and_judge_rewards_reach_swift(sft_grpo_run) -> None:
    run_dir, _ = sft_grpo_run
    episodes = _rows(run_dir / "episodes.jsonl")
    failed = [e for e in episodes if e["error"]]
    assert len(failed) == 2 and all(e["error"].startswith("RuntimeError: scripted failure on") for e in failed)
    assert all(e["reward"] is None for e in failed)
    grpo = [r for r in _rows(run_dir / "metrics.jsonl") if r["stage"] == "grpo"]
    assert sum(r["failed"] for r in grpo) == 2 and sum(r["episodes"] for r in grpo) == 8
    for offset, row in enumerate(grpo, 1):
        step = [e for e in episodes if e["step"] == offset]
        judged = [e["reward"] for e in step if e["reward"] is not None]
        assert row["reward_mean"] == pytest.approx(sum(judged) / len(judged))
        # what swift got: the judge's rewards, and for a failed episode its group's mean (advantage 0)
        sent = []
        for task_id in {e["task"]["task_id"] for e in step}:
            group = [e["reward"] for e in step if e["task"]["task_id"] == task_id]
            scored = [r for r in group if r is not None]
            sent += [r if r is not None else (sum(scored) / len(scored) if scored else 0.0) for r in group]
        assert row["swift/rewards/AjetJudge/mean"] == pytest.approx(sum(sent) / len(sent), abs=1e-6)
    # on-policy GRPO's loss value is ~0 (ratio 1, zero-mean advantages); its gradient is not
    assert all(r["grad_norm"] > 0 for r in grpo)


def test_sft_rows_are_encoded_as_the_debug_backbone_renders_them(swift_env: Path, sft_grpo_run, tiny_tokenizer) -> None:
    """swift's dataset loader + `--template ajet` give the very ids and mask of ajet's own SFT samples."""
    from ajet.backbone.envs import ajet_path_entry
    from ajet.render import ChatRenderer
    from ajet.models import resolve_model_path
    from ajet.trainer.sft_data import load_sft_samples

    run_dir, _ = sft_grpo_run
    script = (
        "import json, sys, ajet.backbone.swift.template\n"
        "from swift.dataset import load_dataset\nfrom swift.model import get_model_processor\n"
        "from swift.template import get_template\n"
        "_, p = get_model_processor(sys.argv[1], model_type='llama', load_model=False)\n"
        "t = get_template(p, template_type='ajet'); t.set_mode('train')\n"
        "ds, _ = load_dataset([sys.argv[2]], split_dataset_ratio=0, num_proc=1)\n"
        "print(json.dumps([{k: t.encode(r)[k] for k in ('input_ids', 'labels')} for r in ds]))\n")
    out = subprocess.run([str(swift_env), "-c", script, resolve_model_path("tiny-random"),
                          str(run_dir / "swift" / "sft" / "data.jsonl")], capture_output=True, text=True,
                         env={"PYTHONPATH": str(ajet_path_entry()), "CUDA_VISIBLE_DEVICES": "", "HOME": str(Path.home())},
                         check=True)
    encoded = json.loads(out.stdout.strip().splitlines()[-1])
    samples, _ = load_sft_samples(run_dir / ".." / "sft_subset.jsonl", ChatRenderer(tiny_tokenizer))
    assert len(encoded) == len(samples) == 4
    for enc, sample in zip(encoded, samples):
        assert enc["input_ids"] == sample.input_ids
        labels = enc["labels"][1:]  # swift masks position 0 (nothing predicts it); ajet never trains it either
        assert labels == [t if m else -100 for t, m in zip(sample.input_ids, sample.loss_mask)][1:]


def test_eval_and_export_of_a_swift_checkpoint(sft_grpo_run, tiny_model_path, tmp_path: Path) -> None:
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    from ajet.export.dispatch import export_checkpoint

    run_dir, result = sft_grpo_run
    eval_dir = tmp_path / "eval"
    proc = subprocess.run([sys.executable, "-m", "ajet.cli", "eval", "--conf", str(TUTORIAL / "tool_agent.yaml"),
                           "model.path=tiny-random", "eval.limit=1", "rollout.max_turns=1",
                           "rollout.max_tokens_per_turn=8", f"output_dir={eval_dir}", "--model", str(run_dir)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads((eval_dir / "eval.json").read_text())
    assert report["episodes"] == 1 and report["model"].endswith("model-swift-grpo-checkpoint-2")

    sft_ckpt = run_dir / "swift" / "sft" / "output" / "checkpoint-2"
    merged = export_checkpoint(sft_ckpt, tmp_path / "merged", merge=True)
    adapter = export_checkpoint(sft_ckpt, tmp_path / "adapter")
    assert (adapter / "adapter_model.safetensors").is_file() and (adapter / "tokenizer.json").is_file()
    ids = torch.tensor([[1, 42, 7, 99, 5]])
    with torch.no_grad():
        got = AutoModelForCausalLM.from_pretrained(merged, dtype=torch.float32)(ids).logits
        base = AutoModelForCausalLM.from_pretrained(tiny_model_path, dtype=torch.float32)
        want = PeftModel.from_pretrained(base, str(adapter))(ids).logits
    assert torch.allclose(got, want, atol=1e-4)


@pytest.mark.parametrize("variant", [[], ["dpo.loss_type=simpo", "dpo.beta=2.0", "dpo.simpo_gamma=1.0"]],
                         ids=["sigmoid", "simpo"])
def test_dpo_from_the_preference_file(swift_env: Path, tmp_path: Path, variant: list[str]) -> None:
    cfg = _cfg(tmp_path / "run", "algorithm=dpo", f"dpo.data={PREFERENCES}", "dpo.batch_size=2", *variant)
    result = run_backbone(cfg)
    rows = _rows(Path(result["run_dir"]) / "metrics.jsonl")
    assert [(r["step"], r["stage"]) for r in rows] == [(1, "dpo"), (2, "dpo")]
    assert all("chosen_reward" in r and "reward_margin" in r for r in rows)
    info = json.loads((Path(result["checkpoint"]) / "ajet_checkpoint.json").read_text())
    assert info["stage"] == "dpo"


def test_bad_inputs_are_refused_before_training_with_swifts_words(swift_env: Path, tmp_path: Path) -> None:
    template = "{% for m in messages %}{% if 'FORBIDDEN' in m['content'] %}{{ raise_exception('no FORBIDDEN here') }}" \
               "{% endif %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}" \
               "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    (tmp_path / "t.jinja").write_text(template)
    data = _sft_subset(tmp_path, 2)
    bad_row = {"messages": [{"role": "user", "content": "say FORBIDDEN"}, {"role": "assistant", "content": "no"}]}
    data.write_text(data.read_text() + json.dumps(bad_row) + "\n")
    cfg = _cfg(tmp_path / "run", "algorithm=[sft,grpo]", f"sft.data={data}", f"model.chat_template={tmp_path / 't.jinja'}",
               "+backbone.swift.args.grpo.gradient_checkpointng=true")
    with pytest.raises(ConfigError) as info:
        run_backbone(cfg)
    text = str(info.value)
    assert "grpo stage: swift rlhf has no argument 'gradient_checkpointng'; did you mean 'gradient_checkpointing'?" in text
    assert f"{data}:3: swift cannot encode this sft row: GatewayError: the chat template cannot render these " \
           "messages: no FORBIDDEN here" in text
    assert (tmp_path / "run" / "config.yaml").is_file() and not (tmp_path / "run" / "swift" / "sft" / "swift.log").exists()

    cfg = _cfg(tmp_path / "run2", "algorithm=sft", f"sft.data={_sft_subset(tmp_path)}",
               "+backbone.swift.args.sft.gradient_accumulation_steps=lots")
    with pytest.raises(ConfigError, match=r"sft stage: swift sft refuses the arguments: argument "
                                          r"--gradient_accumulation_steps/--gradient-accumulation-steps: "
                                          r"invalid int value: 'lots'"):
        run_backbone(cfg)


def test_a_swift_that_dies_or_hangs_is_reported_and_the_run_folder_kept(swift_env: Path, tmp_path: Path) -> None:
    # DeepSpeed asked for, but not in the environment: swift itself fails after starting
    cfg = _cfg(tmp_path / "dies", "algorithm=sft", f"sft.data={_sft_subset(tmp_path)}", "backbone.swift.deepspeed=zero2")
    with pytest.raises(BackboneError) as info:
        run_backbone(cfg)
    text = str(info.value)
    assert text.startswith("swift sft (sft stage) failed (exit 1)")
    assert "The 'deepspeed' distribution was not found and is required by this application" in text
    assert (tmp_path / "dies" / "swift" / "sft" / "swift.log").is_file()
    assert info.value.exit_code == 1

    cfg = _cfg(tmp_path / "hangs", "algorithm=sft", f"sft.data={_sft_subset(tmp_path)}", "backbone.swift.idle_timeout_s=1")
    with pytest.raises(BackboneError, match=r"swift sft \(sft stage\) printed nothing for 1 s and was stopped"):
        run_backbone(cfg)
    assert (tmp_path / "hangs" / "config.yaml").is_file()


def test_setup_command_builds_or_checks_the_environment(swift_env: Path) -> None:
    ok = subprocess.run([sys.executable, "-m", "ajet.cli", "setup", "swift"], capture_output=True, text=True)
    assert ok.returncode == 0 and f"swift environment ready: {swift_env}" in ok.stdout
    bad = subprocess.run([sys.executable, "-m", "ajet.cli", "setup", "swift", "--python", sys.executable],
                         capture_output=True, text=True)
    assert bad.returncode == 1
    assert "cannot run the swift backbone" in bad.stderr and "No module named 'swift'" in bad.stderr
