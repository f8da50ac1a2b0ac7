"""The learning-to-ask tutorial end to end on the tiny model: a short SFT + GRPO run with the scripted
patient and the rule judge, and an `ajet eval` whose doctor turns are replayed, so the real gateway,
multi-turn merging, scripted patient and judge run and the reward is the hand-computed one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.cli import run_ajet
ROOT = Path(__file__).resolve().parents[2]
FOLDER = ROOT / "tutorial" / "example_learn_to_ask"
YAML = FOLDER / "learn_to_ask.yaml"


def test_trains_sft_then_grpo_on_the_tiny_model(tmp_path: Path) -> None:
    out = tmp_path / "run"
    run_ajet("--conf", str(YAML), "model=tiny-random", "sft.epochs=0.125", "sft.batch_size=8", "trainer.steps=1", "rollout.batch_tasks=2",
          "rollout.group_size=2", "rollout.max_tokens_per_turn=12", "rollout.max_turns=3", f"output_dir={out}")
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["stage"] for r in rows] == ["sft", "grpo"] and rows[0]["loss"] > 0 and rows[1]["episodes"] == 4
    episodes = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    assert all({"elicited", "redundant", "rule_score"} <= set(e["reward_parts"]) for e in episodes)
    assert (out / "checkpoints" / "step-000002").is_dir()


def test_replayed_consultations_score_as_computed_by_hand(tmp_path: Path) -> None:
    val = [json.loads(line) for line in (FOLDER / "val.jsonl").read_text().splitlines()[:2]]
    from_demo = ["How long have you had it?", "How severe is it, from 1 to 10?", "Are you taking any medication?",
                 "How are you sleeping?", "Advice: rest."]  # val[0] is a back pain: all 4 topics, then advice
    assert list(val[0]["answer"]["facts"]) == ["duration", "severity", "medication", "sleep"]
    sloppy = ["How long have you had it?", "How long exactly?", "Advice: rest."]  # 1 of 3 facts, 1 repeat
    (tmp_path / "script.json").write_text(json.dumps([{"text": t} for t in from_demo + sloppy]))
    (tmp_path / "val.jsonl").write_text("".join(json.dumps(r) + "\n" for r in val))
    run_ajet("eval", "--conf", str(YAML), "model.path=tiny-random", "engine.type=replay",
          f"engine.replay_file={tmp_path / 'script.json'}", f"task_reader.val={tmp_path / 'val.jsonl'}",
          "rollout.concurrency=1", f"output_dir={tmp_path / 'eval'}")
    episodes = [json.loads(line) for line in (tmp_path / "eval" / "eval_episodes.jsonl").read_text().splitlines()]
    assert episodes[0]["reward"] == 1.0 and episodes[0]["success"] is True
    assert episodes[1]["reward"] == pytest.approx(0.8 / 3 + 0.2 - 0.15) and episodes[1]["success"] is False
    patient = [m["content"] for m in episodes[0]["messages"] if m["role"] == "user"][1:]
    assert patient == list(val[0]["answer"]["facts"].values())  # the scripted patient revealed each fact
    assert all(len(e["samples"]) == 1 for e in episodes)  # each multi-turn consultation merged into one sample


def test_the_patient_can_be_a_model_behind_ajet_serve(tmp_path: Path) -> None:
    """workflow_args.patient=llm against a real `ajet serve` (the tiny model as the patient): its replies
    come back as the patient's turns; the score still reads only the doctor's questions."""
    from tests.e2e.serve_process import ajet_serve

    val = [json.loads(line) for line in (FOLDER / "val.jsonl").read_text().splitlines()[:1]]
    doctor = ["How long have you had it?", "How severe is it, from 1 to 10?", "Advice: rest."]
    (tmp_path / "script.json").write_text(json.dumps([{"text": t} for t in doctor]))
    (tmp_path / "val.jsonl").write_text(json.dumps(val[0]) + "\n")
    with ajet_serve("tiny-random", tmp_path / "serve.log", "--max-tokens", "8", served_name="patient") as url:
        run_ajet("eval", "--conf", str(YAML), "model.path=tiny-random", "engine.type=replay",
              f"engine.replay_file={tmp_path / 'script.json'}", f"task_reader.val={tmp_path / 'val.jsonl'}",
              "workflow_args.patient=llm", f"workflow_args.patient_base_url={url}", "workflow_args.patient_model=patient",
              f"output_dir={tmp_path / 'eval'}")
    episode = json.loads((tmp_path / "eval" / "eval_episodes.jsonl").read_text().splitlines()[0])
    assert episode["error"] is None and episode["metrics"] == {"patient_failures": 0.0}
    assert [m["role"] for m in episode["messages"]] == ["system", "user", "assistant", "user", "assistant", "user", "assistant"]
    assert episode["reward"] == pytest.approx(0.8 * 2 / 4 + 0.2)  # 2 of the 4 hidden topics asked, then advice
