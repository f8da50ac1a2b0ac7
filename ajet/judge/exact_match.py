"""`exact_match`: compare the final answer with the task's reference answer.

Modes: `equals` (whole answer equals the reference), `contains` (the reference appears in the
answer), `number` (some number in the answer is within `rel_tol` of the reference number).
The helpers `answer_text` and `reference` are shared with `math_boxed`.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ajet.errors import JudgeError
from ajet.judge.base import Judge, Reward
from ajet.judge.numbers import numbers_in, parse_number
from ajet.judge.registry import parse_args
from ajet.workflow import Task, WorkflowOutput

class ExactMatchArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    answer_key: str | None = Field(
        None, description="When task.answer is a dict, compare with task.answer[answer_key]."
    )
    mode: Literal["equals", "contains", "number"] = Field("equals", description="How to compare.")
    ignore_case: bool = Field(True, description="Compare case-insensitively (equals, contains).")
    strip: bool = Field(True, description="Strip surrounding whitespace before comparing (equals, contains).")
    rel_tol: float = Field(1e-2, ge=0, description="number: accept |x - ref| <= rel_tol * |ref|.")


class ExactMatchJudge(Judge):
    """1.0 when the final answer matches the reference, else 0.0. parts: {'correct'}."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.args = parse_args(ExactMatchArgs, kwargs, "exact_match")

    async def score(self, task: Task, output: WorkflowOutput) -> Reward:
        expected = reference(task, self.args.answer_key, "exact_match")
        text = answer_text(output)
        options = expected if isinstance(expected, list) else [expected]  # a list means "any of these"
        correct = any(self._matches(text, option) for option in options)
        return Reward(total=float(correct), parts={"correct": float(correct)})

    def _matches(self, text: str, expected: Any) -> bool:
        if self.args.mode == "number":
            target = parse_number(expected)
            if target is None:
                raise JudgeError(
                    f"exact_match (mode 'number'): the reference answer {expected!r} is not a number; "
                    "use mode 'equals' or fix the task's answer"
                )
            return any(
                abs(found - target) <= self.args.rel_tol * abs(target) + 1e-12 for found in numbers_in(text)
            )
        got, want = self._normalize(text), self._normalize(_as_text(expected))
        return got == want if self.args.mode == "equals" else want in got

    def _normalize(self, text: str) -> str:
        if self.args.strip:
            text = text.strip()
        return text.casefold() if self.args.ignore_case else text


def answer_text(output: WorkflowOutput) -> str:
    """The final answer as text; falls back to the last assistant message when `answer` is None."""
    if output.answer is not None:
        return _as_text(output.answer)
    for message in reversed(output.messages):
        if message.get("role") == "assistant" and isinstance(message.get("content"), str):
            return message["content"]
    return ""


def reference(task: Task, answer_key: str | None, judge_name: str) -> Any:
    """The reference answer: `task.answer`, or `task.answer[answer_key]` when it is a dict."""
    expected = task.answer
    if answer_key is not None:
        if not isinstance(expected, dict) or answer_key not in expected:
            raise JudgeError(
                f"{judge_name}: answer_key is {answer_key!r} but task {task.task_id!r} has answer {expected!r}; "
                "give the task a dict answer with that key, or drop answer_key"
            )
        expected = expected[answer_key]
    elif isinstance(expected, dict):
        raise JudgeError(
            f"{judge_name}: task {task.task_id!r} has a dict answer (keys {sorted(expected)}); "
            "set judge.args.answer_key to the key holding the reference"
        )
    if expected is None:
        raise JudgeError(f"{judge_name}: task {task.task_id!r} has no reference answer (task.answer is None)")
    return expected


def _as_text(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))  # 42.0 reads as "42", the way a reference written as 42 does
    return value if isinstance(value, str) else str(value)
