"""`CountdownJudge`: the verifier. It reads the last `<answer>...</answer>` of the reply, parses the
expression (integers, + - * /, parentheses; nothing is `eval`ed), and checks that it uses the task's
numbers by the rule (`use_all`: each exactly once; else each at most once, at least two) and equals
the target.

Reward: 1.0 when solved; `format_reward` (default 0.1) for a well-formed expression that follows the
rule but misses the target; 0 otherwise. Success means solved (`parts.solved`), never the reward.
"""

from __future__ import annotations

from typing import Any

from ajet import Judge, Reward, Task, WorkflowOutput
from countdown import InvalidExpression, extract_answer, parse, uses_allowed, verify


class CountdownJudge(Judge):
    """Scores a countdown reply against the task's `metadata.numbers` and `metadata.target`."""

    def __init__(self, format_reward: float = 0.1, use_all: bool = True, **kwargs: Any) -> None:
        super().__init__(format_reward=format_reward, use_all=use_all, **kwargs)
        if not 0.0 <= float(format_reward) < 1.0:
            raise ValueError(f"format_reward = {format_reward!r}; it must lie in [0, 1)")
        self.format_reward = float(format_reward)
        self.use_all = bool(use_all)

    async def score(self, task: Task, output: WorkflowOutput) -> Reward:
        numbers, target = task.metadata["numbers"], task.metadata["target"]
        text = output.answer if isinstance(output.answer, str) else ""
        expression = extract_answer(text)
        solved, why = verify(expression, numbers, target, self.use_all)
        if solved:
            return Reward(total=1.0, parts={"solved": 1.0, "format": 1.0}, is_success=True, feedback=why)
        well_formed = _follows_rule(expression, numbers, self.use_all)
        total = self.format_reward if well_formed else 0.0
        return Reward(total=total, parts={"solved": 0.0, "format": float(well_formed)}, is_success=False, feedback=why)


def _follows_rule(expression: str | None, numbers: list[int], use_all: bool) -> bool:
    if expression is None:
        return False
    try:
        _, used = parse(expression)
    except InvalidExpression:
        return False
    return uses_allowed(used, numbers, use_all)
