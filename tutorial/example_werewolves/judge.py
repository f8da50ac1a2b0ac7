"""`WinJudge`: scores a werewolves episode by the game's outcome for the trained side.

It reads what the workflow recorded in `output.metadata` (the winner, the trained side, each
agent's invalid actions) and never the text. Reward:

    1.0 if the trained side won, else 0.0,
    minus `invalid_penalty` x (the trained side's invalid actions / the actions it was asked for).

The episode succeeds when the trained side won, whatever the penalty, so `success_rate` is the
trained side's win rate against the frozen one.
"""

from __future__ import annotations

from typing import Any

from ajet import Reward, Task, WorkflowOutput
from ajet.judge.base import Judge

VILLAGE = ("seer", "villager1", "villager2")
WOLVES = ("wolf1", "wolf2")


class WinJudge(Judge):
    def __init__(self, invalid_penalty: float = 0.5, **kwargs: Any) -> None:
        super().__init__(invalid_penalty=invalid_penalty, **kwargs)
        self.invalid_penalty = float(invalid_penalty)

    async def score(self, task: Task, output: WorkflowOutput) -> Reward:
        meta = output.metadata or {}
        side = meta.get("trained_side")
        if side not in ("village", "wolves") or "winner" not in meta:
            # not a werewolves episode's output: nothing to score, and no success
            return Reward(total=0.0, parts={"win": 0.0, "invalid_rate": 0.0}, is_success=False)
        agents = VILLAGE if side == "village" else WOLVES
        invalid = sum(int((meta.get("invalid") or {}).get(a, 0)) for a in agents)
        asked = sum(int((meta.get("actions") or {}).get(a, 0)) for a in agents)
        rate = invalid / asked if asked else 0.0
        win = float(meta["winner"] == side)
        return Reward(total=win - self.invalid_penalty * rate, parts={"win": win, "invalid_rate": rate},
                      is_success=bool(win))
