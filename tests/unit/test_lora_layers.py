"""`model.lora.layers: N` adapts only the last N decoder layers; SFT then keeps each row's output of the
frozen layers below (the trunk, ajet/trainer/trunk.py) and runs only the adapted layers on later visits.
The loss and the update equal those of the whole computation; the cache follows a change of the frozen
weights, keeps to its budget, and a model the split does not fit runs whole with a warning."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from ajet.config.schema import LoraConfig, ModelConfig, TrainerConfig
from ajet.errors import ModelError
from ajet.render import ChatRenderer
from ajet.trainer.policy import load_policy
from ajet.trainer.sft_data import load_sft_samples
from ajet.trainer.step import train_step

DATA = Path(__file__).resolve().parents[2] / "tutorial" / "example_tool_agent" / "sft.jsonl"


def policy_with(layers: int | None, **lora):
    torch.manual_seed(0)
    policy = load_policy(ModelConfig(path="tiny-random", lora=LoraConfig(rank=4, layers=layers, **lora)), autocast=None)
    with torch.no_grad():  # non-zero adapters, so the adapted layers' gradients are not trivially structured
        for name, p in policy.model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.05)
    return policy


def trained_names(policy) -> set[str]:
    return {n for n, p in policy.model.named_parameters() if p.requires_grad}


def test_only_the_last_layers_get_adapters():
    assert {n.split(".layers.")[1].split(".")[0] for n in trained_names(policy_with(1))} == {"1"}
    both = trained_names(policy_with(None))
    assert {n.split(".layers.")[1].split(".")[0] for n in both} == {"0", "1"}
    assert trained_names(policy_with(5)) == both  # more layers than the model has: all of them
    named = trained_names(policy_with(1, target_modules=["q_proj", "v_proj"]))
    assert named and all(".layers.1.self_attn." in n and ("q_proj" in n or "v_proj" in n) for n in named)
    with pytest.raises(ModelError, match=r"matches no Linear module in the last 1 decoder layers \(model\.layers\.1"):
        policy_with(1, target_modules=["no_such_proj"])


def sft_steps(policy, rows_per_step: list[list], cache_mb: float) -> tuple[list[float], dict[str, torch.Tensor]]:
    start = {n: p.detach().clone() for n, p in policy.model.named_parameters() if p.requires_grad}
    optimizer = torch.optim.SGD(policy.trainable_parameters(), lr=1.0)
    cfg = TrainerConfig(micro_batch_tokens=4096, grad_clip=1e9, trunk_cache_mb=cache_mb)
    losses = [train_step(policy, optimizer, None, rows, None, cfg, algo="sft")["loss"] for rows in rows_per_step]
    return losses, {n: p.detach() - start[n] for n, p in policy.model.named_parameters() if n in start}


@pytest.fixture(scope="module")
def rows(tiny_tokenizer):
    samples, _ = load_sft_samples(DATA, ChatRenderer(tiny_tokenizer))
    return samples[:6]


def assert_same_training(got, expected) -> None:
    (losses, update), (want_losses, want_update) = got, expected
    assert all(abs(a - b) <= 1e-5 * abs(b) for a, b in zip(losses, want_losses))
    for name, value in want_update.items():
        scale = float(value.abs().max())
        assert scale > 0, name
        assert float((update[name] - value).abs().max()) <= 1e-4 * scale + 1e-7, name


def test_sft_reuses_the_frozen_layers_output_and_trains_the_same(rows):
    steps = [rows[:3], rows[3:], rows[:3], rows[3:]]  # two epochs of two steps
    whole = policy_with(1)
    expected = sft_steps(whole, steps, cache_mb=0)
    assert whole._trunk is None
    cached = policy_with(1)
    got = sft_steps(cached, steps, cache_mb=64)
    assert_same_training(got, expected)
    trunk = cached._trunk
    assert trunk.usable and trunk.split == 1 and len(trunk.rows) == 6
    assert trunk.hits == 6 and trunk.misses >= 6  # the second epoch ran only the adapted layer
    hidden = cached.causal_lm().config.hidden_size
    assert trunk.bytes == sum(len(r.input_ids) for r in rows) * hidden * 4  # float32 (T, H) per row


def test_the_cache_keeps_to_its_budget_and_follows_a_change_of_the_frozen_weights(rows):
    steps = [rows[:3], rows[3:], rows[:3], rows[3:]]
    small = policy_with(1)
    first_row = len(rows[0].input_ids) * small.causal_lm().config.hidden_size * 4
    got = sft_steps(small, steps, cache_mb=1.5 * first_row / 2**20)  # room for one row and a half
    assert_same_training(got, sft_steps(policy_with(1), steps, cache_mb=0))
    assert len(small._trunk.rows) == 1 and small._trunk.hits == 1
    trunk = small._trunk
    with torch.no_grad():  # the frozen embedding changes: what was kept is of other weights now
        small.causal_lm().get_input_embeddings().weight.mul_(1.5)
    sft_steps(small, [rows[:3]], cache_mb=64)
    assert trunk.hits == 1 and len(trunk.rows) == 3  # nothing stale was used; the rows were computed anew


def test_a_decoder_the_split_does_not_fit_runs_whole_with_a_warning(rows):
    steps = [rows[:3], rows[:3]]
    expected = sft_steps(policy_with(1), steps, cache_mb=0)
    odd = policy_with(1)
    decoder = odd.causal_lm().get_decoder()

    def scale_embeds(module, args, kwargs):  # as Gemma does: its forward scales whatever embeddings it gets
        if kwargs.get("inputs_embeds") is not None:
            kwargs["inputs_embeds"] = kwargs["inputs_embeds"] * 2.0
        return args, kwargs

    decoder.register_forward_pre_hook(scale_embeds, with_kwargs=True)
    with pytest.warns(UserWarning, match=r"model.lora.layers: this model's frozen layers cannot be run apart \(the "
                                         r"split result differs"):
        got = sft_steps(odd, steps, cache_mb=64)
    assert_same_training(got, expected)
    assert not odd._trunk.usable and odd._trunk.rows == {}
