"""`FinalStateJudge`: scores an appworld episode by the apps' final state, never by the reply's text.

The workflow leaves the world's final state in `output.metadata["final_state"]`; the judge lists
what changed since the initial state (`appworld_env.changes`) and compares those facts with the
task's expected ones (`task.answer["changes"]`, made by running the reference calls on a fresh
world). Reward = |expected ∩ done| / |expected ∪ done| (Jaccard, counting repeats: paying twice is
two facts), so a missing change and an extra, unasked-for change (a second payment, a wrong event)
both cost; success = exactly the expected changes. An episode with no final state scores 0.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from ajet import Reward, Task, WorkflowOutput
from ajet.judge.base import Judge
from appworld_env import INITIAL, changes


class FinalStateJudge(Judge):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)

    async def score(self, task: Task, output: WorkflowOutput) -> Reward:
        state = (output.metadata or {}).get("final_state")
        expected = Counter(json.dumps(f) for f in ((task.answer or {}).get("changes") or []))
        try:
            done = Counter(json.dumps(f) for f in changes(INITIAL, state))
        except (TypeError, KeyError, AttributeError, ValueError):  # no state, or not a world's state
            return Reward(total=0.0, parts={"missing": float(expected.total()), "extra": 0.0}, is_success=False)
        union = (expected | done).total()
        score = (expected & done).total() / union if union else 1.0
        return Reward(total=score, parts={"missing": float((expected - done).total()),
                                          "extra": float((done - expected).total())}, is_success=done == expected)
