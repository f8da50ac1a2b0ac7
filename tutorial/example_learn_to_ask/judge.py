"""`ConsultationJudge`: the learning-to-ask reward, by an LLM judge or by rule.

Rule (always computed, consult.score_consultation): 0.8 x the share of hidden facts the doctor asked
about + 0.2 when it ended with advice - 0.15 per question asked once the answer was known (a repeated
topic, or any question after every fact was elicited); clipped to [0, 1]. Success: every fact
elicited, advice given, no redundant question.

With `llm` set (the arguments of ajet's `llm_judge`: base_url, model, api_key, ...), the total is the
LLM judge's score on RUBRIC, with the hidden record shown to it as the reference; if the endpoint fails
or never answers usably, the rule's total is used and `llm_fallback` is 1 in the reward's parts.
"""

from __future__ import annotations

from typing import Any

from ajet import Judge, Reward, Task, WorkflowOutput
from ajet.errors import JudgeError
from ajet.judge import build_judge
from consult import score_consultation

RUBRIC = """\
- The reference answer lists the patient's hidden facts. The doctor scores higher the more of these facts
  it asked about, one question at a time.
- Each question asked after the answer was already known (repeating a topic, or asking once every hidden
  fact was learned) lowers the score.
- The consultation should end with advice (a turn starting with 'Advice:'); without it, at most 0.8.
- A doctor that asks nothing and advises at once scores near 0.2."""


class ConsultationJudge(Judge):
    """parts: elicited, advised, redundant, questions, rule_score (+ llm_score, llm_fallback with `llm`)."""

    def __init__(self, llm: dict[str, Any] | None = None) -> None:
        super().__init__(llm=llm)
        self.llm = None
        if llm:
            self.llm = build_judge({"type": "llm_judge", "args": {"rubric": RUBRIC, **llm}}, where="judge.args.llm")

    async def score(self, task: Task, output: WorkflowOutput) -> Reward:
        facts = dict(task.answer["facts"])
        rule = score_consultation(output.messages, facts)
        parts = {k: v for k, v in rule.items() if k != "total"} | {"rule_score": rule["total"]}
        success = rule["elicited"] == 1.0 and rule["advised"] == 1.0 and rule["redundant"] == 0
        total, feedback = rule["total"], None
        if self.llm is not None:
            try:
                graded = await self.llm.score(task, output)
                total, feedback = graded.total, graded.feedback
                parts |= {"llm_score": graded.total, "llm_fallback": 0.0}
            except JudgeError as exc:  # the endpoint is down or unusable: the rule scores this episode
                parts |= {"llm_fallback": 1.0}
                feedback = f"llm_judge failed, rule-based score used: {str(exc)[:200]}"
        return Reward(total=total, parts=parts, is_success=success, feedback=feedback)

    async def aclose(self) -> None:
        if self.llm is not None:
            await self.llm.aclose()
