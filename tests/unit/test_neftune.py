"""NEFTune (sft.neftune_alpha): the noise's bound by hand, only inside SFT updates, and the backbones' flag."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from ajet.backbone.llamafactory.args import stage_args
from ajet.backbone.swift.run import SwiftRun
from ajet.config.loader import load_config
from ajet.config.schema import GrpoConfig, TrainerConfig
from ajet.errors import ConfigError
from ajet.trainer.neftune import neftune_scale, noisy_embeddings
from ajet.trainer.optim import build_optimizer, build_scheduler
from ajet.trainer.step import train_step
from tests.unit.test_trainer_step import PROMPT, completion_sample, make_policy

TOOL_YAML = Path(__file__).resolve().parents[2] / "tutorial" / "example_tool_agent" / "tool_agent.yaml"


def test_scale_by_hand():
    assert neftune_scale(5.0, 100, 576) == pytest.approx(5 / 240)  # sqrt(100 * 576) = 240
    assert neftune_scale(0.0, 10, 8) == 0.0
    for bad in [(-1.0, 10, 8), (5.0, 0, 8), (5.0, 10, 0)]:
        with pytest.raises(ValueError, match="neftune needs"):
            neftune_scale(*bad)


def test_noise_is_bounded_and_gone_after_the_block():
    policy = make_policy(lora=True)
    embeddings = policy.causal_lm().get_input_embeddings()
    ids = torch.arange(40).unsqueeze(0)  # (1, 40)
    clean = embeddings(ids)
    bound = neftune_scale(5.0, 40, embeddings.embedding_dim)
    with noisy_embeddings(policy.model, 5.0, 40):
        noise = embeddings(ids) - clean
    assert noise.abs().max() <= bound * (1 + 1e-6)
    assert noise.abs().max() > 0.9 * bound  # uniform over the whole range, not a few ulps
    assert noise.mean().abs() < bound / 10
    assert torch.equal(embeddings(ids), clean) and not embeddings._forward_hooks
    with noisy_embeddings(policy.model, 0.0, 40):
        assert torch.equal(embeddings(ids), clean)


def test_sft_step_trains_on_noisy_embeddings_and_leaves_the_model_clean():
    policy = make_policy(lora=False)
    samples = [completion_sample(policy, PROMPT, " Paris."),
               completion_sample(policy, "Hi!", " Hello, how can I help?")]
    tokens = sum(sum(s.loss_mask) for s in samples)
    clean_loss = -sum(sum(s.old_logprobs) for s in samples) / tokens  # the untouched model's mean CE
    cfg = TrainerConfig(lr=1e-3, steps=2)
    opt = build_optimizer(policy.model.parameters(), cfg)
    # alpha large enough that the tiny model's (width 64) embeddings are visibly perturbed
    noisy = train_step(policy, opt, build_scheduler(opt, cfg), samples, None, cfg, algo="sft", neftune_alpha=200.0)
    assert noisy["loss"] != pytest.approx(clean_loss, rel=1e-4)
    assert not policy.causal_lm().get_input_embeddings()._forward_hooks  # generation sees clean embeddings
    with pytest.raises(ValueError, match="neftune_alpha is an SFT setting"):
        train_step(policy, opt, None, samples, [1.0, -1.0], cfg, grpo=GrpoConfig(), neftune_alpha=5.0)


def test_backbones_get_neftune_noise_alpha_for_sft_only(tmp_path: Path):
    cfg = load_config(TOOL_YAML, ["model.path=tiny-random", "algorithm=[sft,grpo]", "sft.neftune_alpha=5",
                                  f"output_dir={tmp_path / 'swift'}"], backbone="swift")
    run = SwiftRun(cfg)
    assert run.plan("sft", None)[0].args["neftune_noise_alpha"] == 5.0
    assert "neftune_noise_alpha" not in run.plan("grpo", None)[0].args
    off = load_config(TOOL_YAML, ["model.path=tiny-random", "algorithm=sft", f"output_dir={tmp_path / 'off'}"],
                      backbone="swift")
    assert "neftune_noise_alpha" not in SwiftRun(off).plan("sft", None)[0].args
    with pytest.raises(ConfigError, match="from ajet.sft.neftune_alpha"):
        SwiftRun(load_config(TOOL_YAML, ["model.path=tiny-random", "+backbone.swift.args.neftune_noise_alpha=5",
                                         f"output_dir={tmp_path / 'bad'}"], backbone="swift"))
    lf = load_config(TOOL_YAML, ["model.path=tiny-random", "sft.neftune_alpha=5", "dpo.data=x.jsonl"],
                     backbone="llamafactory")
    paths = {"model_path": "/m", "dataset_dir": tmp_path, "output_dir": tmp_path / "o", "adapter": None, "cuda": False}
    assert stage_args(lf, "sft", **paths)["neftune_noise_alpha"] == 5.0
    assert "neftune_noise_alpha" not in stage_args(lf, "dpo", **paths)
    with pytest.raises(ConfigError, match=r"sft.neftune_alpha = -1 \(from the command line\): expected greater than"):
        load_config(TOOL_YAML, ["sft.neftune_alpha=-1"])
