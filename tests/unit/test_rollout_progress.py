"""The rollout's live ETA knows episodes run `concurrency` at a time (ajet/rollout/progress.py)."""

from __future__ import annotations

from contextlib import ExitStack

import ajet.rollout.progress as progress_module
from ajet.rollout.episode import EpisodeResult
from ajet.rollout.progress import RolloutProgress, batch_eta
from ajet.workflow import Task


def test_no_eta_before_an_episode_has_ended():
    assert batch_eta(5.0, [0.0, 0.0], [], queued=2, concurrency=2) is None


def test_episodes_that_started_together_end_together():
    # the quickstart's rollout: 16 episodes at once, the first ended after 17 s
    assert batch_eta(17.0, [0.0] * 15, [17.0], queued=0, concurrency=16) == 0.0


def test_queued_episodes_wait_for_a_free_slot():
    # two slots; the first episode took 10 s, its slot took the third episode at once; 2 more queued:
    # slot A (third episode) frees at 20, slot B (second episode, started at 0) at 10 -> it runs the
    # fourth until 20 and the fifth until 30: 20 s from now. Read as one episode after another it would be 30 s.
    assert batch_eta(10.0, [0.0, 10.0], [10.0], queued=2, concurrency=2) == 20.0
    assert batch_eta(10.0, [], [10.0], queued=3, concurrency=2) == 20.0  # idle slots start queued ones now


def test_the_progress_eta_follows_running_episodes(monkeypatch):
    clock = [0.0]
    monkeypatch.setattr(progress_module.time, "perf_counter", lambda: clock[0])
    progress = RolloutProgress("rollout", total=5, enabled=False, concurrency=2)
    episode = EpisodeResult(episode_id="e", task=Task(task_id="t", query="q"), repeat=0, group_id="g")
    with ExitStack() as second:
        first = ExitStack()
        first.enter_context(progress.running())
        second.enter_context(progress.running())
        assert progress.eta_seconds() is None
        clock[0] = 10.0
        first.close()  # the first episode ran 10 s
        progress.episode_done(episode)
        with progress.running():  # the third takes its slot
            # the second should end at 10, the fourth then runs 10-20 in its slot, the fifth 20-30 after the third
            assert progress.eta_seconds() == 20.0
            clock[0] = 12.0  # the second is late: counted as ending now
            assert progress.eta_seconds() == 18.0
        # the third ran 2 s (mean now 6 s) and waits for its judge, no episode_done yet: the fourth and fifth
        # take the two slots for 6 s; counting the third as queued again would say 12
        assert progress.eta_seconds() == 6.0
