"""`NumbersJudge`: does the answer state every number the task expects (`answer.numbers`)?

Reward: the share of expected numbers that some number in the answer matches within `rel_tol`
(1.0 when all are there); success means all. The numbers come from the shop's tools, so an answer
states them only when the agent called the right tools with the right arguments and read the results.
"""

from __future__ import annotations

from typing import Any

from ajet import Judge, Reward, Task, WorkflowOutput
from ajet.judge.numbers import numbers_in


class NumbersJudge(Judge):
    def __init__(self, rel_tol: float = 1e-3, **kwargs: Any) -> None:
        super().__init__(rel_tol=rel_tol, **kwargs)
        self.rel_tol = float(rel_tol)

    async def score(self, task: Task, output: WorkflowOutput) -> Reward:
        expected = [float(n) for n in task.answer["numbers"]]
        found = numbers_in(output.answer if isinstance(output.answer, str) else "")
        hits = sum(any(abs(f - n) <= self.rel_tol * abs(n) + 1e-9 for f in found) for n in expected)
        return Reward(total=hits / len(expected), parts={"numbers_found": float(hits)},
                      is_success=hits == len(expected))
