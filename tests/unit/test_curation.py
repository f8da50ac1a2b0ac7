"""SFT curation (seed 002): coreset strategies, task-weight mixing and the replay buffer by hand, then the
debug backbone training on a curated set of the tutorial's demonstrations (tiny model)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ajet.backbone.registry import run_backbone
from ajet.config.loader import load_config
from ajet.errors import ConfigError
from ajet.trainer.curation import (DialogMetrics, ReplayBuffer, jaccard_distance, lexical_diversity,
                                   select_coreset, weighted_mix, words_of)

ROOT = Path(__file__).resolve().parents[2]
TOOL_YAML = ROOT / "tutorial" / "example_tool_agent" / "tool_agent.yaml"


def dialog(i: int, text: str, loss: float | None = None, category: str | None = None) -> DialogMetrics:
    return DialogMetrics(index=i, token_length=10, trained_tokens=5, lexical_diversity=lexical_diversity(text),
                         loss=loss, category=category, words=frozenset(words_of(text)))


def test_metrics_by_hand():
    assert words_of("Price: 3.5 in Boston") == ["price", ":", "3", ".", "5", "in", "boston"]
    assert lexical_diversity("a b a b") == 0.5 and lexical_diversity("") == 0.0
    assert jaccard_distance(frozenset("ab"), frozenset("bc")) == pytest.approx(2 / 3)  # 1 shared of 3


def test_loss_topk_random_and_their_limits():
    dialogs = [dialog(0, "a", 0.5), dialog(1, "b", 2.0), dialog(2, "c", 1.0), dialog(3, "d", 2.0)]
    assert select_coreset(dialogs, "loss_topk", 3) == [1, 3, 2]  # ties: the earlier row first
    assert select_coreset(dialogs, "loss_topk", 10) == [1, 3, 2, 0]
    picked = select_coreset(dialogs, "random", 2, seed=7)
    assert len(set(picked)) == 2 and picked == select_coreset(dialogs, "random", 2, seed=7)
    with pytest.raises(ValueError, match="needs a loss for every dialog"):
        select_coreset([dialog(0, "a")], "hybrid", 1)


def test_diversity_takes_near_duplicates_once():
    dialogs = [dialog(0, "price of gas in boston"), dialog(1, "price of gas in boston today"),
               dialog(2, "compare denver and austin storage"), dialog(3, "price of gas in denver")]
    # first: the most diverse (all four have distinct words only: ties -> row 0); then the farthest from
    # row 0: row 2 (distance 1.0); then the farthest from {0, 2}: row 3 (0.4 from 0) beats row 1 (1/6 from 0)
    assert select_coreset(dialogs, "diversity", 3) == [0, 2, 3]


def test_hybrid_is_half_hardest_then_diversity_around_them():
    dialogs = [dialog(0, "price of gas in boston", 3.0), dialog(1, "price of gas in boston today", 2.5),
               dialog(2, "compare denver and austin storage", 0.1), dialog(3, "price of gas in denver", 0.2)]
    # ceil(3 / 2) = 2 by loss: rows 0 and 1; then the farthest from both: row 2
    assert select_coreset(dialogs, "hybrid", 3) == [0, 1, 2]


def test_weighted_mix_by_category_shares():
    categories = ["tool", "tool", "tool", "plan", None]
    picked, taken = weighted_mix(categories, {"tool": 0.5, "plan": 0.5}, 4, seed=0)
    # 4 rows: 2 tool rows (of 3), 2 plan rows (its only row, repeated); the uncategorised row is left out
    assert taken == {"tool": 2, "plan": 2} and sorted(picked).count(3) == 2 and 4 not in picked
    assert len({i for i in picked if categories[i] == "tool"}) == 2
    with pytest.raises(ValueError, match="positive weight"):
        weighted_mix(categories, {"tool": 0.0}, 4)


def test_replay_buffer_keeps_its_capacity_and_survives_reopening(tmp_path: Path):
    buffer = ReplayBuffer(tmp_path / "buf.jsonl", capacity=3)
    buffer.add([{"n": i} for i in range(5)], seed=1)
    assert len(buffer.rows) == 3 and buffer.seen == 5
    buffer.save()
    again = ReplayBuffer(tmp_path / "buf.jsonl", capacity=3)
    assert again.rows == buffer.rows and again.seen == 5
    assert len(again.sample(2, seed=0)) == 2 and len(again.sample(10)) == 3


def test_bad_curation_config_is_refused():
    with pytest.raises(ConfigError, match="task weights must be >= 0"):
        load_config(TOOL_YAML, ["+sft.task_weights.a=-1"])
    with pytest.raises(ConfigError, match="target_size"):
        load_config(TOOL_YAML, ["+sft.coreset.strategy=random"])
    with pytest.raises(ConfigError, match="applied by the debug backbone only"):
        from ajet.backbone.swift.args import refuse_unsupported
        refuse_unsupported(load_config(TOOL_YAML, ["algorithm=sft", "+sft.coreset.target_size=4"], backbone="swift"))


def test_the_debug_backbone_trains_on_the_curated_rows_and_feeds_the_buffer(tmp_path: Path):
    data = tmp_path / "sft.jsonl"
    rows = [json.loads(line) for line in (TOOL_YAML.parent / "sft.jsonl").read_text().splitlines()[:8]]
    for n, row in enumerate(rows):
        row["metadata"] = {"category": "lookup" if n < 6 else "compare", **({"loss": 20.0 + n} if n % 2 else {})}
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    buffer = tmp_path / "buffer.jsonl"
    seeded = ReplayBuffer(buffer, 10)
    seeded.add([rows[7]])
    seeded.save()
    overrides = ["model.path=tiny-random", "algorithm=sft", f"sft.data={data}", "sft.batch_size=2",
                 "sft.epochs=1", "+sft.coreset.strategy=hybrid", "+sft.coreset.target_size=4", "+sft.task_weights.lookup=1",
                 f"+sft.replay.buffer={buffer}", "+sft.replay.ratio=0.5", f"output_dir={tmp_path / 'run'}"]
    result = run_backbone(load_config(TOOL_YAML, overrides))
    report = json.loads((tmp_path / "run" / "sft_curation.json").read_text())
    # task weights fill all 8 places with the 6 'lookup' rows (2 repeated); hybrid picks 4 distinct ones;
    # 0.5 x 4 = 2 rows to replay, and the buffer holds 1
    assert report["rows"] == 8 and report["task_mix"] == {"lookup": 8} and len(report["selected"]) == 4
    assert set(report["selected"]) <= set(range(6)) and report["replayed"] == 1
    # half by loss: rows 5 and 3 carry the highest losses (25.0, 23.0; row 7 is not a 'lookup' row, and
    # the random model's own losses are about ln(vocabulary) = 10.8)
    assert report["selected"][:2] == [5, 3]
    dialogs = report["dialogs"]
    assert [d["loss"] for d in dialogs][1::2] == [21.0, 23.0, 25.0, 27.0]  # the rows' own losses are respected
    assert all(d["loss"] is not None and d["loss"] > 0 for d in dialogs)  # the others computed by the model
    assert result["steps"] == 3  # 4 selected + 1 replayed = 5 rows at 2 per step, one epoch
    assert ReplayBuffer(buffer, 10).seen == 5  # 1 before + the 4 selected

    # a resumed run trains on the rows chosen when it started and does not feed the buffer again
    from ajet.engine.factory import load_tokenizer
    from ajet.render import ChatRenderer
    from ajet.trainer.sft_curation import curated_sft_samples

    cfg = load_config(TOOL_YAML, overrides)
    samples, _, again = curated_sft_samples(cfg.sft, ChatRenderer(load_tokenizer(cfg)), tmp_path / "run", 0,
                                            loss_fn=None)
    assert again["selected"] == report["selected"] and len(samples) == 5 and ReplayBuffer(buffer, 10).seen == 5


def test_grpo_samples_its_tasks_by_rollout_task_weights(tmp_path: Path):
    """rollout.task_weights: one GRPO step on the tiny model draws only the weighted category's tasks;
    weights naming no task's category and swift's GRPO are clear errors."""
    rows = [json.loads(line) for line in (TOOL_YAML.parent / "train.jsonl").read_text().splitlines()[:8]]
    for n, row in enumerate(rows):
        row["metadata"] = {**(row.get("metadata") or {}), "category": "price" if n < 3 else "other"}
    tasks = tmp_path / "train.jsonl"
    tasks.write_text("".join(json.dumps(r) + "\n" for r in rows))
    overrides = ["model.path=tiny-random", "algorithm=grpo", f"task_reader.train={tasks}", "trainer.steps=1",
                 "rollout.batch_tasks=4", "rollout.group_size=2", "rollout.max_tokens_per_turn=8", "rollout.max_turns=1",
                 "+rollout.task_weights.price=1", f"output_dir={tmp_path / 'run'}"]
    run_backbone(load_config(TOOL_YAML, overrides))
    episodes = [json.loads(line) for line in (tmp_path / "run" / "episodes.jsonl").read_text().splitlines()]
    assert len(episodes) == 8
    # the 3 'price' tasks fill all 8 places of the mix; a batch of 4 takes 4 of them (one repeated)
    assert {e["task"]["metadata"]["category"] for e in episodes} == {"price"}
    with pytest.raises(ConfigError, match="selects no train task"):
        run_backbone(load_config(TOOL_YAML, [*overrides[:-2], "+rollout.task_weights.nothing=1",
                                             f"output_dir={tmp_path / 'run2'}"]))
    with pytest.raises(ConfigError, match="rollout.task_weights is applied by the debug backbone only"):
        from ajet.backbone.swift.args import refuse_unsupported
        refuse_unsupported(load_config(TOOL_YAML, [*overrides[:-1]], backbone="swift"))
