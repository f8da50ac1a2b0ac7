"""benchmarks/paired.py, measures.py and rl_gain.compare_arms: paired gains and their intervals on hand-made numbers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import measures  # noqa: E402
from paired import bootstrap_interval, gain, paired_differences, unpaired_interval  # noqa: E402


def test_paired_differences_average_the_seeds_first():
    # task a: sft 0, seeds 1 and 0 -> 0.5; task b: sft 1, seeds 1, 1 -> 0; task c: sft 0, seeds 0, 1 -> 0.5
    sft = {"a": 0.0, "b": 1.0, "c": 0.0, "d": 1.0}
    rl = [{"a": 1.0, "b": 1.0, "c": 0.0}, {"a": 0.0, "b": 1.0, "c": 1.0, "d": 1.0}]
    assert paired_differences(sft, rl) == {"a": 0.5, "b": 0.0, "c": 0.5}  # d: missing in seed 1, left out


def test_gain_of_a_clear_improvement_has_an_interval_above_zero():
    # 100 tasks: SFT solves 20 of them; both seeds solve those 20 and 30 more -> every d_t is 0 or 1,
    # the mean 0.30. The bootstrap's mean of 100 draws of a 0/1 variable with p = 0.3 has sd
    # sqrt(0.3 * 0.7 / 100) = 0.0458: the 95% interval is about 0.30 +- 0.09.
    sft = {f"t{i}": float(i < 20) for i in range(100)}
    seed = {f"t{i}": float(i < 50) for i in range(100)}
    g = gain(sft, [seed, seed])
    assert (g.tasks, g.clusters, g.sft, g.rl, g.mean, g.per_seed) == (100, 100, 0.2, [0.5, 0.5], 0.3, [0.3, 0.3])
    assert 0.20 < g.low < 0.23 and 0.37 < g.high < 0.40 and g.significant


def test_a_gain_within_the_noise_is_not_counted():
    # 100 tasks, +1 on 10 and -1 on 6: mean 0.04, sd of the mean sqrt((16/100 - 0.04^2) / 100) = 0.0398
    # -> the interval reaches below 0, so the task does not count as improved
    sft = {f"t{i}": 0.0 if i < 10 else 1.0 if i < 16 else 0.0 for i in range(100)}
    rl = {f"t{i}": 1.0 if i < 10 else 0.0 for i in range(100)}
    g = gain(sft, [rl, rl])
    assert g.mean == pytest.approx(0.04) and g.low < 0 < g.high and not g.significant


def test_bootstrap_is_seeded_and_a_constant_difference_has_a_point_interval():
    diffs = {f"t{i}": (i % 3) / 2 for i in range(30)}
    assert bootstrap_interval(diffs, resamples=500, seed=7) == bootstrap_interval(diffs, resamples=500, seed=7)
    assert bootstrap_interval({f"t{i}": 0.25 for i in range(10)}, resamples=200) == (0.25, 0.25)
    with pytest.raises(ValueError, match="no paired task"):
        bootstrap_interval({})


def test_clusters_are_resampled_whole():
    # two clusters of 50 identical tasks each: +1 and -1. Task by task the interval is narrow around 0
    # (sd 0.1); by cluster there are 2 units, so a resample is all +1, all -1 or mixed: the interval
    # spans [-1, 1].
    diffs = {f"t{i}": 1.0 if i < 50 else -1.0 for i in range(100)}
    clusters = {t: ("x" if d > 0 else "y") for t, d in diffs.items()}
    low, high = bootstrap_interval(diffs, resamples=2000)
    assert -0.25 < low < 0 < high < 0.25
    assert bootstrap_interval(diffs, clusters, resamples=2000) == (-1.0, 1.0)
    assert gain(dict.fromkeys(diffs, 0.0), [diffs, diffs], clusters, resamples=100).clusters == 2


def test_measures_refuse_the_reward_and_read_episodes():
    with pytest.raises(ValueError, match="format credit"):
        measures.check("reward_mean")
    with pytest.raises(ValueError, match="not one of"):
        measures.check("solved")
    episode = {"success": True, "reward_parts": {"elicited": 0.5}, "metrics": {"seer_accuses_seen_wolf": 1.0}}
    assert measures.from_episode(episode, "success_rate") == 1.0
    assert measures.from_episode(episode, "reward_parts.elicited") == 0.5
    assert measures.from_episode(episode, "workflow_metrics.seer_accuses_seen_wolf") == 1.0
    assert measures.from_episode({"success": False, "metrics": {}}, "workflow_metrics.seer_accuses_seen_wolf") is None
    report = {"success_rate": 0.25, "workflow_metrics": {"win": 0.5}, "reward_parts": {}}
    assert measures.from_report(report, "success_rate") == 0.25
    assert measures.from_report(report, "workflow_metrics.win") == 0.5
    assert measures.from_report(report, "reward_parts.elicited") is None


def _arm(work: Path, weights: bytes, seeds: list[list[bool]]) -> Path:
    (work / "sft-model").mkdir(parents=True)
    (work / "sft-model" / "model.safetensors").write_bytes(weights)
    for seed, solved in enumerate(seeds, 1):
        (work / f"eval-rl-seed{seed}").mkdir()
        lines = [json.dumps({"task": {"task_id": f"t{i}"}, "success": ok}) for i, ok in enumerate(solved)]
        (work / f"eval-rl-seed{seed}" / "eval_episodes.jsonl").write_text("\n".join(lines) + "\n")
    return work


def _task_folder(folder: Path, files: dict[str, list[str]]) -> dict:
    """A task folder as rl_gain reads it: a conf with a JSONL reader, held-out files of these task ids."""
    folder.mkdir()
    (folder / "c.yaml").write_text(
        "ajet:\n  workflow: agent.py:Agent\n  task_reader: {type: jsonl, train: heldout.jsonl}\n")
    for file, ids in files.items():
        (folder / file).write_text("".join(json.dumps({"task_id": t, "query": "q"}) + "\n" for t in ids))
    return {"conf": "c.yaml", "measure": "success_rate", "rl_gain": {"heldout": "heldout.jsonl"}}


def test_compare_arms_pairs_two_rl_arms_task_by_task_from_one_sft_checkpoint(tmp_path):
    import rl_gain

    folder = tmp_path / "task"
    spec = _task_folder(folder, {"heldout.jsonl": [f"t{i}" for i in range(4)]})
    # A solves t0 with both seeds and t1 with one: per task 1, 0.5, 0, 0. B: both seeds t0, t1, t2 -> 1, 1, 1, 0.
    # differences 0, 0.5, 1, 0: mean 0.375 (37.5 points); seed means A 0.5 / 0.25, B 0.75 / 0.75.
    a = _arm(tmp_path / "a", b"weights", [[True, True, False, False], [True, False, False, False]])
    b = _arm(tmp_path / "b", b"weights", [[True, True, True, False]] * 2)
    # an eval kept beside from a shorter run (an extended run's) is not a seed of its arm
    (a / "eval-rl-seed1-step16").mkdir()
    (a / "eval-rl-seed1-step16" / "eval_episodes.jsonl").write_text(
        json.dumps({"task": {"task_id": "t3"}, "success": True}) + "\n")
    row = rl_gain.compare_arms("t", folder, spec, a, b)
    assert (row["tasks"], row["points"], row["a_rl"], row["b_rl"], row["per_seed"]) == (
        4, 37.5, [0.5, 0.25], [0.75, 0.75], [37.5, 37.5])
    assert 0 <= row["ci_low"] <= 37.5 <= row["ci_high"] <= 100
    other = _arm(tmp_path / "c", b"other weights", [[True] * 4] * 2)
    with pytest.raises(SystemExit, match="same SFT checkpoint"):
        rl_gain.compare_arms("t", folder, spec, a, other)
    (tmp_path / "d").mkdir()
    one_seed = _arm(tmp_path / "d" / "w", b"weights", [[True] * 4])
    with pytest.raises(SystemExit, match="1 evaluated RL seeds"):
        rl_gain.compare_arms("t", folder, spec, a, one_seed)


def test_a_reused_phase_names_what_its_recorded_command_lacked_or_added(tmp_path, capsys):
    import rl_gain

    # an SFT run of work folder `first`, copied into `second` and reused there with one more override
    first, second = tmp_path / "first", tmp_path / "second"
    ran = ["ajet", "--conf", "c.yaml", "--backbone=debug", f"output_dir={first / 'sft'}", "algorithm=sft", "sft.epochs=1"]
    second.mkdir()
    (second / "sft.command.json").write_text(json.dumps(ran))
    (second / "sft" / "checkpoints").mkdir(parents=True)
    reused: dict[str, list[str]] = {}
    rl_gain._train(Path("c.yaml"), second / "sft", ["algorithm=sft", "sft.epochs=1", "rollout.group_size=8"], reused)
    assert reused == {"sft": ["+rollout.group_size=8"]}
    assert f"reusing {second / 'sft'} (differs: +rollout.group_size=8)" in capsys.readouterr().err
    # the same command: reused without a difference; a folder with no recorded command says so
    rl_gain._train(Path("c.yaml"), second / "sft", ["algorithm=sft", "sft.epochs=1"], reused)
    (second / "rl-seed1" / "checkpoints").mkdir(parents=True)
    rl_gain._train(Path("c.yaml"), second / "rl-seed1", ["algorithm=grpo"], reused)
    assert reused == {"sft": [], "rl-seed1": ["its command was not recorded"]}


def _finished_run(work: Path, name: str, step: int, command: list[str]) -> Path:
    """A run folder whose only checkpoint is a complete `step` (an empty manifest) and its recorded command."""
    run = work / name
    (run / "checkpoints" / f"step-{step:06d}").mkdir(parents=True)
    (run / "checkpoints" / f"step-{step:06d}" / "COMPLETE").write_text(json.dumps({"files": {}}))
    (work / f"{name}.command.json").write_text(json.dumps(command))
    return run


def test_a_finished_rl_run_asked_for_more_steps_is_resumed_and_nothing_else_is(tmp_path, monkeypatch, capsys):
    import rl_gain

    ran: list[tuple[list[str], bool]] = []
    monkeypatch.setattr(rl_gain, "_run", lambda command, log, append=False: ran.append((command, append)))
    conf, grpo = Path("c.yaml"), ["algorithm=grpo", "trainer.steps=16", "trainer.seed=1"]
    run = _finished_run(tmp_path, "rl-seed1", 16, ["ajet", "--conf", "c.yaml", "--backbone=debug",
                                                  f"output_dir={tmp_path / 'rl-seed1'}", *grpo])
    reused: dict[str, list[str]] = {}
    # the task's trainer.steps=16, then --set trainer.steps=24 after it: the last one counts
    assert rl_gain._train(conf, run, [*grpo, "trainer.steps=24"], reused, True) == 16
    (command, append), = ran
    assert command[:4] == ["ajet", "--conf", "c.yaml", "--resume"] and command[-1] == "trainer.steps=24" and append
    assert reused == {"rl-seed1": ["extended from step 16", "+trainer.steps=24"]}
    assert f"extending {run} from step 16 to 24" in capsys.readouterr().err
    # the resumed command is recorded with --resume; the same ask again reuses the run (its step is still 16
    # here, so a run that really reached 24 is not extended twice: only a larger step count extends)
    (tmp_path / "rl-seed1.command.json").write_text(json.dumps(command))
    _finished_run(tmp_path, "rl-seed1", 24, command)
    ran.clear()
    assert rl_gain._train(conf, run, [*grpo, "trainer.steps=24"], reused, True) is None and not ran
    assert reused["rl-seed1"] == []
    # fewer steps, another setting beside the steps, or an SFT run (extend=False): reused, never resumed
    assert rl_gain._train(conf, run, [*grpo, "trainer.steps=8"], reused, True) is None
    assert rl_gain._train(conf, run, [*grpo, "trainer.steps=32", "trainer.lr=1e-5"], reused, True) is None
    assert reused["rl-seed1"] == ["-trainer.steps=24", "+trainer.steps=32", "+trainer.lr=1e-5"]
    assert rl_gain._train(conf, run, [*grpo, "trainer.steps=32"], reused, False) is None and not ran


def test_an_extended_run_keeps_the_evals_of_its_shorter_run_under_their_step(tmp_path):
    import rl_gain

    names = ["eval-rl-seed1", "eval-rl-seed1.log", "eval-rl-seed1-heldout2", "eval-rl-seed1-step8", "eval-rl-seed10",
             "eval-rl-seed2", "rl-seed1"]
    for name in names:
        (tmp_path / name).mkdir()
    rl_gain._keep_evals_of_step(tmp_path, 1, 16)
    # seed 1's evals on every held-out file move; an older step's, seed 10's and seed 2's stay
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "eval-rl-seed1-step16", "eval-rl-seed1-step16-heldout2", "eval-rl-seed1-step16.log", "eval-rl-seed1-step8",
        "eval-rl-seed10", "eval-rl-seed2", "rl-seed1"]


def test_unpaired_interval_resamples_each_arm_alone():
    # after: always 1. before: [0, 1], so a resample's mean is 0 (p 1/4), 0.5 (1/2) or 1 (1/4): the
    # difference is 1, 0.5 or 0, and the 2.5th and 97.5th percentiles are its extremes.
    assert unpaired_interval([0.0, 1.0], [1.0, 1.0]) == (0.5, 0.0, 1.0)
    assert unpaired_interval([0.0] * 5, [1.0] * 7, resamples=50) == (1.0, 1.0, 1.0)
    assert unpaired_interval([0.0, 1.0] * 9, [1.0, 0.0, 1.0] * 6, seed=3) == \
        unpaired_interval([0.0, 1.0] * 9, [1.0, 0.0, 1.0] * 6, seed=3)
    with pytest.raises(ValueError, match="no score"):
        unpaired_interval([], [1.0])


def test_unpaired_counts_from_the_command_line_give_the_zoo_readmes_interval():
    # benchmarks/mcp_zoo/README.md quotes the 0.5B's cooking_units 30/32 against the 135M's 22/32 by this command
    script = Path(__file__).resolve().parents[2] / "benchmarks" / "paired.py"
    done = subprocess.run([sys.executable, str(script), "22/32", "30/32"], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "difference=+25.0 ci=[+6.2, +43.8] (points)"
    for counts in ("30/25", "three/25", "3"):
        refused = subprocess.run([sys.executable, str(script), "3/25", counts], capture_output=True, text=True)
        assert refused.returncode == 2 and f"'{counts}': want successes/total" in refused.stderr


def test_a_row_scored_on_another_heldout_file_is_a_variant_not_counted(tmp_path, capsys):
    import rl_gain

    base = {"task": "t", "measure": "success_rate", "tasks": 128, "sft": 0.5, "rl": [0.6, 0.6], "seeds": [1, 2],
            "minutes": 1, "commit": "c", "cpu": "amx", "significant": True, "ci_low": 1.0, "ci_high": 9.0}
    rows = [{**base, "gain_points": 10.0, "set": []},
            {**base, "gain_points": 4.0, "set": ["trainer.steps=24"], "heldout_file": "heldout2.jsonl"}]
    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert rl_gain.summary(path) == (10.0, 1, 1)
    assert "variant (not counted below): --set trainer.steps=24 --heldout heldout2.jsonl" in capsys.readouterr().out


def test_the_summary_tells_a_loss_from_an_interval_that_reaches_0(tmp_path, capsys):
    import rl_gain

    base = {"measure": "success_rate", "tasks": 128, "sft": 0.8, "rl": [0.75, 0.75], "seeds": [1, 2], "minutes": 1,
            "commit": "c", "cpu": "amx", "significant": False, "set": []}
    rows = [{**base, "task": "lost", "gain_points": -4.7, "ci_low": -7.8, "ci_high": -1.9},
            {**base, "task": "flat", "gain_points": -0.4, "ci_low": -4.3, "ci_high": 3.1}]
    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    mean, with_gain, tasks = rl_gain.summary(path)
    assert (round(mean, 2), with_gain, tasks) == (-2.55, 0, 2)
    out = capsys.readouterr().out.splitlines()
    lines = {line.split()[0]: line for line in out if line.startswith(("lost", "flat"))}
    assert lines["lost"].endswith("(a loss: the interval is below 0)")
    assert lines["flat"].endswith("(interval reaches 0)")


def _evals(work: Path, name: str, ids: list[str], solved: list[bool]) -> None:
    (work / name).mkdir(parents=True)
    (work / name / "eval_episodes.jsonl").write_text(
        "".join(json.dumps({"task": {"task_id": t}, "success": ok}) + "\n" for t, ok in zip(ids, solved)))


def test_pool_scores_a_work_folder_over_several_heldout_files_at_once(tmp_path):
    import rl_gain

    folder, work = tmp_path / "task", tmp_path / "work"
    first, second = ["a0", "a1"], ["b0", "b1", "b2", "b3"]
    spec = _task_folder(folder, {"heldout.jsonl": first, "heldout2.jsonl": second})
    # heldout (benchmark.json's own, evals without a suffix): SFT solves a0; both seeds a0 and a1 -> +1 on a1.
    # heldout2: SFT b0 b1; seed 1 b0 b1 b2, seed 2 b0 -> per task 0, -0.5, +0.5, 0.
    # pooled over 6 tasks: differences 0, 1, 0, -0.5, 0.5, 0 -> mean 1/6 = 16.67 points; seeds solve 5 and 3 of 6
    _evals(work, "eval-sft", first, [True, False])
    _evals(work, "eval-rl-seed1", first, [True, True])
    _evals(work, "eval-rl-seed2", first, [True, True])
    _evals(work, "eval-rl-seed1-step16", first, [False, False])  # a shorter run's eval, kept beside: not a seed
    _evals(work, "eval-sft-heldout2", second, [True, True, False, False])
    _evals(work, "eval-rl-seed1-heldout2", second, [True, True, True, False])
    _evals(work, "eval-rl-seed2-heldout2", second, [True, False, False, False])
    row = rl_gain.pool_heldout("t", folder, spec, work, ["heldout.jsonl", "heldout2.jsonl"])
    assert (row["tasks"], row["sft"], row["rl"], row["points"]) == (6, 0.5, [0.8333, 0.5], 16.67)
    assert row["files"]["heldout.jsonl"]["points"] == 50.0 and row["files"]["heldout2.jsonl"]["points"] == 0.0
    assert row["per_seed"] == [33.33, 0.0] and row["ci_low"] <= 16.67 <= row["ci_high"]
    # a file with no evals in the folder, or one repeating another's task ids, is refused by name
    (folder / "heldout3.jsonl").write_text(json.dumps({"task_id": "c0", "query": "q"}) + "\n")
    with pytest.raises(SystemExit, match="lacks the evals of heldout3.jsonl"):
        rl_gain.pool_heldout("t", folder, spec, work, ["heldout.jsonl", "heldout3.jsonl"])
    with pytest.raises(SystemExit, match="repeats task ids"):
        rl_gain.pool_heldout("t", folder, spec, work, ["heldout.jsonl", "heldout.jsonl"])


def test_heldout_tasks_are_read_as_the_evals_read_them():
    # function_calling's held-out file is xLAM-shaped (a JSON array, ids as numbers): its task ids must be the
    # ones the xlam reader gives the episodes, or no held-out task would pair with an eval
    import rl_gain

    name, folder, spec = rl_gain.task_spec("function_calling")
    rows = rl_gain.read_heldout(folder, spec)
    raw = json.loads((folder / spec["rl_gain"]["heldout"]).read_text())
    assert [r["task_id"] for r in rows] == [f"xlam-{r['id']}" for r in raw] and len(rows) >= 100
    name, folder, spec = rl_gain.task_spec("math_agent")
    assert [r["task_id"] for r in rl_gain.read_heldout(folder, spec)] == [
        json.loads(line)["task_id"] for line in (folder / "heldout.jsonl").read_text().splitlines()]
