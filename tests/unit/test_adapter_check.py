"""All-or-nothing adapter loads in the hf engine itself, on a trainer's peft model: a broken adapter
folder is refused naming the problem, and the policy's logits, active adapter, adapters and
trainable flags are exactly as before (issue 16, item 1)."""

from __future__ import annotations

import shutil

import pytest
import torch
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM, AutoTokenizer

from ajet.engine.hf import HFEngine
from ajet.errors import EngineError
from tests.unit.bad_adapters import BAD, save_adapter


@pytest.mark.parametrize("breaker", [b for b in BAD if b.__name__ != "no_config"], ids=lambda b: b.__name__)
def test_a_bad_adapter_leaves_a_trainers_peft_model_as_it_was(tiny_model_path, tmp_path, breaker):
    torch.manual_seed(7)
    base = AutoModelForCausalLM.from_pretrained(tiny_model_path).eval()
    policy = get_peft_model(base, LoraConfig(r=4, target_modules="all-linear", init_lora_weights=False))
    engine = HFEngine(policy, AutoTokenizer.from_pretrained(tiny_model_path))
    good = save_adapter(tiny_model_path, tmp_path / "good", 5)
    shutil.copytree(good, tmp_path / "bad")
    breaker(tmp_path / "bad")
    engine.load_adapter("keep", good)
    ids = torch.tensor([[1, 2, 3, 4, 5]])

    def state():
        with torch.no_grad():
            logits = policy(ids).logits
        return (logits, policy.active_adapter, sorted(policy.peft_config),
                sorted(n for n, p in policy.named_parameters() if p.requires_grad))

    before = state()
    with pytest.raises(EngineError, match=f"cannot load adapter 'x' from '{tmp_path / 'bad'}'"):
        engine.load_adapter("x", tmp_path / "bad")
    with pytest.raises(EngineError, match="cannot load adapter 'keep'"):  # an in-place reload, refused
        engine.load_adapter("keep", tmp_path / "bad")
    after = state()
    assert torch.equal(before[0], after[0]) and before[1:] == after[1:]
    assert sorted(engine.adapters.loaded) == ["keep"]
    engine.load_adapter("x", good)  # the name is not stuck
    assert sorted(engine.adapters.loaded) == ["keep", "x"]
