"""`math_boxed`: grade the last `\\boxed{...}` of the final answer against the reference.

Both sides are compared as numbers when both parse as numbers (`3/4`, `\\frac{3}{4}`, `1,000`,
`2.0`, `50\\%`, `x = 5`), else as normalized strings (LaTeX spacing, `\\left`/`\\right`,
`\\text{}`, `$` and whitespace removed, case folded).
"""

from __future__ import annotations

import math
import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ajet.judge.base import Judge, Reward
from ajet.judge.exact_match import answer_text, reference
from ajet.judge.numbers import parse_number
from ajet.judge.registry import parse_args
from ajet.workflow import Task, WorkflowOutput

_BOXED = "\\boxed"


class MathBoxedArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    answer_key: str | None = Field(
        None, description="When task.answer is a dict, grade against task.answer[answer_key]."
    )
    rel_tol: float = Field(1e-6, ge=0, description="Numbers match when |x - ref| <= rel_tol * max(1, |ref|).")


class MathBoxedJudge(Judge):
    """1.0 when the last boxed answer equals the reference. parts: {'boxed_found', 'correct'}."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.args = parse_args(MathBoxedArgs, kwargs, "math_boxed")

    async def score(self, task: Task, output: WorkflowOutput) -> Reward:
        expected = reference(task, self.args.answer_key, "math_boxed")
        boxed = last_boxed(answer_text(output))
        correct = boxed is not None and answers_equal(boxed, expected, self.args.rel_tol)
        return Reward(
            total=float(correct),
            parts={"boxed_found": float(boxed is not None), "correct": float(correct)},
        )


def last_boxed(text: str) -> str | None:
    """The content of the last `\\boxed{...}` in `text` (nested braces kept), or None."""
    start = text.rfind(_BOXED + "{")
    while start != -1:
        content = _braced(text, start + len(_BOXED))
        if content is not None:
            return content
        start = text.rfind(_BOXED + "{", 0, start)  # unbalanced: try the one before it
    return None


def _braced(text: str, open_at: int) -> str | None:
    depth = 0
    for i in range(open_at, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return text[open_at + 1 : i]
    return None


def answers_equal(got: str, expected: Any, rel_tol: float = 1e-6) -> bool:
    """Numeric comparison when both sides are numbers, else normalized string equality."""
    got_norm, want_norm = normalize(got), normalize(str(expected) if not isinstance(expected, str) else expected)
    got_num = parse_number(got_norm)
    want_num = parse_number(expected) if isinstance(expected, (int, float)) else parse_number(want_norm)
    if got_num is not None and want_num is not None:
        return math.isclose(got_num, want_num, rel_tol=0, abs_tol=rel_tol * max(1.0, abs(want_num)))
    return got_norm.casefold() == want_norm.casefold()


def normalize(text: str) -> str:
    """Strip the LaTeX that does not change a math answer's value."""
    text = text.strip().strip("$").strip()
    text = re.sub(r"\\text\{([^{}]*)\}", r"\1", text)
    text = re.sub(r"\\(?:d|t)?frac\{([^{}]*)\}\{([^{}]*)\}", r"(\1)/(\2)", text)
    for token in ("\\left", "\\right", "\\!", "\\,", "\\;", "\\:", "\\ ", "^\\circ", "^{\\circ}", "\\%", "%"):
        text = text.replace(token, "")
    text = re.sub(r"\s+", "", text)
    # (3)/(4) -> 3/4 once the braces are gone, so simple fractions parse as numbers.
    text = re.sub(r"\((-?[\d.]+)\)/\((-?[\d.]+)\)", r"\1/\2", text)
    text = re.sub(r"^[A-Za-z]\w*=(?=[^=])", "", text)  # "x=5" -> "5"
    if text.startswith("+"):
        text = text[1:]
    return text
