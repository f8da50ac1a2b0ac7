"""What a tutorial is judged by: its success measure, from `ajet eval`'s report or from one episode.

A measure names what the task is for, never a reward that may hold format credit (countdown's reward
gives 0.1 for a well-formed expression that misses, the tool agent's for calls that parse): a
benchmark that read the reward would count learning the format as learning the task. Measures are

    success_rate              the judge's success verdict (countdown: solved; werewolves: the village won)
    reward_parts.NAME         one part of the judge's reward that is a success measure itself
                              (learn_to_ask: elicited, the share of the hidden facts asked about)
    workflow_metrics.NAME     a number the workflow reports (werewolves: seer_accuses_seen_wolf)

and `reward_mean` / `reward_std` are refused.
"""

from __future__ import annotations

from typing import Any

REFUSED = ("reward_mean", "reward_std")


def check(key: str) -> str:
    """`key` when it names a success measure; ValueError otherwise."""
    if key in REFUSED:
        raise ValueError(f"measure {key!r} is the judge's reward, which may include format credit; name a success "
                         "measure: success_rate, reward_parts.NAME or workflow_metrics.NAME")
    if key != "success_rate" and not key.startswith(("reward_parts.", "workflow_metrics.", "pass@")):
        raise ValueError(f"measure {key!r} is not one of success_rate, pass@k, reward_parts.NAME, workflow_metrics.NAME")
    return key


def from_report(report: dict[str, Any], key: str) -> float | None:
    """The measure in an eval.json report (None when no episode reported it)."""
    section, _, name = check(key).partition(".")
    value = report.get(section, {}).get(name) if name else report.get(section)
    return None if value is None else float(value)


def from_episode(episode: dict[str, Any], key: str) -> float | None:
    """The measure of one episode of eval_episodes.jsonl (None when the episode did not report it)."""
    section, _, name = check(key).partition(".")
    if section == "success_rate" or section.startswith("pass@"):
        return float(bool(episode.get("success")))
    source = episode.get("reward_parts") if section == "reward_parts" else episode.get("metrics")
    value = (source or {}).get(name)
    return None if value is None else float(value)
