"""RolloutSettings comes from the config: its defaults are the schema's, and every key reaches it."""

from __future__ import annotations

import dataclasses

import pytest

from ajet.config.schema import AjetConfig, RolloutConfig
from ajet.rollout.runner import RolloutSettings
from ajet.rollout.stack import settings_for

WORKFLOW = "ajet.workflows.chat:ChatWorkflow"


def test_the_defaults_are_those_of_a_default_config():
    """The dataclass reads its defaults from the schema (not copies): a default changed there is changed here."""
    built = settings_for(AjetConfig(workflow=WORKFLOW), "train")
    # group_size (1: one episode per task) and seed (None: unseeded) are the dataclass's own
    assert RolloutSettings() == dataclasses.replace(built, group_size=1, seed=None)
    assert RolloutSettings().max_tokens == RolloutConfig.model_fields["max_tokens_per_turn"].default


@pytest.mark.parametrize("split", ["train", "val"])
def test_every_key_reaches_the_settings(split):
    cfg = AjetConfig.model_validate({
        "workflow": WORKFLOW,
        "rollout": {"group_size": 5, "concurrency": 3, "temperature": 0.7, "top_p": 0.9, "val_temperature": 0.2,
                    "max_tokens_per_turn": 33, "max_turns": 2, "episode_timeout_s": 9.5, "retries": 4},
        "eval": {"group_size": 2}, "tracker": {"merge": "text"}, "judge": {"success_threshold": 0.5},
        "engine": {"seed": 17},
    })
    settings = settings_for(cfg, split)
    val = split == "val"
    assert settings == RolloutSettings(
        group_size=2 if val else 5, concurrency=3, temperature=0.2 if val else 0.7, top_p=1.0 if val else 0.9,
        max_tokens=33, max_turns=2, episode_timeout_s=9.5, retries=4, merge="text", success_threshold=0.5, seed=17)
