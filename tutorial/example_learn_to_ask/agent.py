"""`DoctorAgent`: a consultation. The doctor (the model being tuned) asks questions, a simulated patient
answers from a hidden record, and the doctor ends with advice.

The patient is either scripted (`patient: scripted`, the default: answers the hidden fact of the
question's topic, see consult.py; runs anywhere) or a language model (`patient: llm`: any
OpenAI-compatible endpoint, e.g. the base model served by `ajet serve`, told the hidden record and to
answer only what is asked). The patient is not trained: only the doctor's calls go through the tuner.

Workflow arguments (YAML `workflow_args`):
    max_turns: doctor turns per consultation when the tuner sets none (default 6).
    patient: 'scripted' or 'llm'.
    patient_base_url, patient_model, patient_api_key: the endpoint of the llm patient.
"""

from __future__ import annotations

from typing import Any

import openai

from ajet import Task, Tuner, Workflow, WorkflowOutput
from consult import SYSTEM_PROMPT, clean, is_advice, scripted_answer, topic_of

PATIENT_PROMPT = (
    "You are a patient talking to a doctor. Your complaint: {complaint}\nWhat is true about you:\n{record}\n"
    "Answer the doctor's question in one short sentence, using only these facts. If the question is about "
    "something not listed, say no. Never volunteer facts that were not asked for."
)


class DoctorAgent(Workflow):
    """Asks the patient questions, then advises. Returns the conversation for the judge."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.patient = kwargs.get("patient", "scripted")
        if self.patient not in ("scripted", "llm"):
            raise ValueError(f"workflow_args.patient = {self.patient!r}; use 'scripted' or 'llm'")
        if self.patient == "llm" and not kwargs.get("patient_base_url"):
            raise ValueError("workflow_args.patient = 'llm' needs patient_base_url (e.g. http://127.0.0.1:8000/v1)")

    async def execute(self, task: Task, tuner: Tuner) -> WorkflowOutput:
        facts: dict[str, str] = dict(task.answer["facts"])
        max_turns = tuner.max_turns or int(self.kwargs.get("max_turns", 6))
        doctor = tuner.openai_client(agent="doctor")
        messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM_PROMPT},
                                          {"role": "user", "content": task.query}]
        stop, patient_failures = "max_turns", 0
        for _ in range(max_turns):
            try:
                response = await doctor.chat.completions.create(model=tuner.model, messages=messages)
            except openai.BadRequestError as exc:  # turn budget or context spent: the judge scores what there is
                stop = f"llm_refused: {exc.message}"
                break
            message = response.choices[0].message
            messages.append(message.model_dump(exclude_none=True))
            text = message.content or ""
            if is_advice(text):
                stop = "advised"
                break
            try:
                reply = await self._answer(text, task, facts)
            except openai.OpenAIError as exc:  # the patient's endpoint failed: count it, end the consultation
                patient_failures += 1
                stop = f"patient_failed: {type(exc).__name__}"
                break
            messages.append({"role": "user", "content": reply})
        return WorkflowOutput(
            answer=messages[-1]["content"] if messages[-1]["role"] == "assistant" else "",
            messages=messages,
            metadata={"stop_reason": stop, "topics_asked": [topic_of(str(m.get("content") or "")) for m in messages
                                                            if m["role"] == "assistant"]},
            metrics={"patient_failures": float(patient_failures)},
        )

    async def _answer(self, question: str, task: Task, facts: dict[str, str]) -> str:
        if self.patient == "scripted":
            return scripted_answer(question, facts)
        client = openai.AsyncOpenAI(base_url=self.kwargs["patient_base_url"],
                                    api_key=str(self.kwargs.get("patient_api_key") or "EMPTY"), max_retries=1, timeout=60)
        async with client:
            record = "\n".join(f"- {fact}" for fact in facts.values())
            response = await client.chat.completions.create(
                model=str(self.kwargs.get("patient_model") or "patient"), max_tokens=48, temperature=0.0,
                messages=[{"role": "system", "content": PATIENT_PROMPT.format(complaint=task.query, record=record)},
                          {"role": "user", "content": clean(question)}])
        return clean(response.choices[0].message.content or "") or "I don't know."
