"""`llm_judge`: ask an LLM behind any OpenAI-compatible endpoint to grade episodes against a rubric.

    mode 'score'  one request per episode; the model answers {"score": 0..1, "reason": "..."}
    mode 'rank'   one request per group (RULER-style, as in OpenPipe ART): every episode of a task
                  is shown side by side and the model answers a JSON list of scores, one per episode

Replies are parsed leniently (JSON inside prose or ```json fences; scores outside [0, 1] clipped).
A reply that still cannot be parsed, an HTTP error or a timeout is retried `max_retries` times, then
raised as `JudgeError`, which the rollout counts without stopping the run.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
from collections.abc import Iterator
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ajet.errors import JudgeError
from ajet.judge.base import Judge, Reward
from ajet.judge.registry import parse_args
from ajet.workflow import Task, WorkflowOutput

DEFAULT_RUBRIC = """\
- A trajectory that achieves the user's goal scores higher than one that does not.
- Among trajectories that achieve the goal, one that is more efficient (no wasted turns, no needless
  or repeated tool calls) scores higher.
- A final answer that is correct, complete and grounded in the tool results scores higher than one
  that guesses or invents facts.
- A trajectory that ends without answering scores near 0."""

_SCORE_INSTRUCTIONS = """\
You grade one trajectory of an AI agent working on a task. Grade it with this rubric:
{rubric}

Reply with only a JSON object: {{"score": <a number from 0 to 1>, "reason": "<one short sentence>"}}"""

_RANK_INSTRUCTIONS = """\
You compare {n} trajectories of AI agents that worked on the same task, numbered 1 to {n}. Grade each
one from 0 to 1 with this rubric, relative to the others (better trajectories get higher scores):
{rubric}

Reply with only a JSON list with one entry per trajectory, in order:
[{{"trajectory": 1, "score": <0 to 1>, "reason": "<one short sentence>"}}, ...]"""


class LLMJudgeArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    base_url: str = Field(description="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1.")
    model: str = Field(description="Judge model name sent with each request.")
    api_key: str = Field("EMPTY", description="API key of the endpoint (use ${oc.env:VAR} in the YAML).")
    mode: Literal["score", "rank"] = Field("score", description="score: one episode per request; rank: a whole group.")
    rubric: str = Field(DEFAULT_RUBRIC, description="Grading criteria; the default needs no reference answer.")
    max_retries: int = Field(2, ge=0, description="Extra attempts after an unparseable reply, HTTP error or timeout.")
    timeout_s: float = Field(60, gt=0, description="Seconds allowed for one request.")
    temperature: float = Field(0.0, ge=0, description="Sampling temperature of the judge model.")
    max_tokens: int = Field(1024, ge=1, description="Most tokens the judge may write per reply.")
    show_reference: bool = Field(True, description="Show task.answer to the judge when the task has one.")
    max_transcript_chars: int = Field(12000, ge=200, description="Longer episode transcripts keep head and tail.")


class LLMJudge(Judge):
    """Rubric grading by an LLM. parts: {'llm_score'}; feedback: the judge's reason."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.args = parse_args(LLMJudgeArgs, kwargs, "llm_judge")
        self.scores_groups = self.args.mode == "rank"
        self._client: Any = None
        self._client_loop: asyncio.AbstractEventLoop | None = None

    async def score(self, task: Task, output: WorkflowOutput) -> Reward:
        if self.args.mode == "rank":
            return (await self.score_group(task, [output]))[0]
        system = _SCORE_INSTRUCTIONS.format(rubric=self.args.rubric)
        user = self._task_text(task) + "\n\n## Trajectory\n" + self._transcript(output)
        score, reason = await self._ask(system, user, _parse_score)
        return Reward(total=score, parts={"llm_score": score}, feedback=reason or None)

    async def score_group(self, task: Task, outputs: list[WorkflowOutput]) -> list[Reward]:
        if self.args.mode == "score":
            return list(await asyncio.gather(*(self.score(task, output) for output in outputs)))
        n = len(outputs)
        system = _RANK_INSTRUCTIONS.format(n=n, rubric=self.args.rubric)
        episodes = "\n\n".join(
            f"## Trajectory {i + 1}\n{self._transcript(output)}" for i, output in enumerate(outputs)
        )
        ranked = await self._ask(system, self._task_text(task) + "\n\n" + episodes, lambda t: _parse_ranking(t, n))
        return [Reward(total=s, parts={"llm_score": s}, feedback=reason or None) for s, reason in ranked]

    async def aclose(self) -> None:
        """Close the HTTP client (call it from the event loop that used the judge)."""
        if self._client is not None:
            client, self._client = self._client, None
            await client.close()

    async def _ask(self, system: str, user: str, parse: Any) -> Any:
        import openai

        attempts = self.args.max_retries + 1
        problems: list[str] = []
        for attempt in range(attempts):
            try:
                reply = await asyncio.wait_for(self._complete(system, user), timeout=self.args.timeout_s)
            except (asyncio.TimeoutError, openai.APITimeoutError):
                problems.append(f"attempt {attempt + 1}: no reply within timeout_s={self.args.timeout_s}")
                continue
            except openai.OpenAIError as exc:
                problems.append(f"attempt {attempt + 1}: {type(exc).__name__}: {exc}")
                if attempt + 1 < attempts:
                    await asyncio.sleep(min(2.0, 0.25 * 2**attempt))  # let a busy server breathe
                continue
            try:
                return parse(reply)
            except ValueError as exc:
                problems.append(f"attempt {attempt + 1}: {exc}; reply was {reply[:200]!r}")
        raise JudgeError(
            f"llm_judge ({self.args.model} at {self.args.base_url}) gave no usable reply in {attempts} attempt(s): "
            + " | ".join(problems)
            + ". Check the endpoint, raise timeout_s / max_retries, or use a model that follows JSON instructions."
        )

    async def _complete(self, system: str, user: str) -> str:
        response = await self._get_client().chat.completions.create(
            model=self.args.model,
            messages=[{"role": "system", "content": system}, {"role": "user", "content": user}],
            temperature=self.args.temperature,
            max_tokens=self.args.max_tokens,
        )
        if not response.choices:
            return ""  # parsed like any other unusable reply, and retried
        return response.choices[0].message.content or ""

    def _get_client(self) -> Any:
        import openai

        # httpx clients belong to one event loop; a judge reused under another loop gets a new one.
        loop = asyncio.get_running_loop()
        if self._client is None or self._client_loop is not loop:
            self._client = openai.AsyncOpenAI(
                base_url=self.args.base_url,
                api_key=self.args.api_key,
                timeout=self.args.timeout_s,
                max_retries=0,  # retries are ours: they also cover unparseable replies
            )
            self._client_loop = loop
        return self._client

    def _task_text(self, task: Task) -> str:
        text = f"## Task\n{task.query}"
        if self.args.show_reference and task.answer is not None:
            text += f"\n\n## Reference answer\n{_render(task.answer)}"
        return text

    def _transcript(self, output: WorkflowOutput) -> str:
        return _clip(render_transcript(output), self.args.max_transcript_chars)


def render_transcript(output: WorkflowOutput) -> str:
    """The episode as plain text: each message, each tool call, then the final answer."""
    lines = []
    for message in output.messages:
        role = message.get("role", "?")
        if role == "system":
            continue  # the agent's instructions are the same for every episode; they only cost tokens
        content = message.get("content")
        if isinstance(content, list):  # OpenAI content parts
            content = " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
        if content:
            label = f"tool {message.get('name', '')}".strip() if role == "tool" else role
            lines.append(f"[{label}] {_clip(str(content), 2000)}")
        for call in message.get("tool_calls") or []:
            function = call.get("function", call) if isinstance(call, dict) else {}
            lines.append(f"[{role} calls] {function.get('name')}({_render(function.get('arguments'))})")
    if not output.messages:
        for call in output.tool_calls:
            result = call.get("error") or call.get("result")
            shown = _clip(_render(result), 500)
            lines.append(f"[call] {call.get('name')}({_render(call.get('arguments'))}) -> {shown}")
    lines.append(f"[final answer] {_render(output.answer) if output.answer is not None else '(none)'}")
    return "\n".join(lines)


def extract_json(text: str) -> Iterator[Any]:
    """Every JSON value found in `text`: fenced blocks first, then the whole text, then embedded ones."""
    for block in re.findall(r"```(?:json)?\s*(.*?)```", text, flags=re.S):
        try:
            yield json.loads(block)
        except json.JSONDecodeError:
            pass
    try:
        yield json.loads(text)
    except json.JSONDecodeError:
        pass
    decoder = json.JSONDecoder()
    for i, ch in enumerate(text):
        if ch in "{[":
            try:
                yield decoder.raw_decode(text, i)[0]
            except json.JSONDecodeError:
                continue


def _parse_score(text: str) -> tuple[float, str]:
    for value in extract_json(text):
        if isinstance(value, dict) and "score" in value:
            score = _unit(value["score"])
            if score is not None:
                return score, str(value.get("reason", ""))
        elif not isinstance(value, (dict, list)):
            score = _unit(value)
            if score is not None:
                return score, ""
    raise ValueError('no JSON object with a numeric "score" in the reply')


def _parse_ranking(text: str, n: int) -> list[tuple[float, str]]:
    for value in extract_json(text):
        if isinstance(value, dict) and isinstance(value.get("scores"), list):
            value = value["scores"]
        if not isinstance(value, list) or len(value) != n:
            continue
        entries = [_rank_entry(item) for item in value]
        if any(entry is None for entry in entries):
            continue
        ids = [entry[2] for entry in entries]
        if all(i is not None for i in ids) and sorted(ids) == list(range(1, n + 1)):
            entries.sort(key=lambda entry: entry[2])  # the judge listed them out of order
        return [(score, reason) for score, reason, _ in entries]
    raise ValueError(f"no JSON list of {n} scores in the reply")


def _rank_entry(item: Any) -> tuple[float, str, int | None] | None:
    if isinstance(item, dict):
        score = _unit(item.get("score"))
        raw_id = item.get("trajectory", item.get("id"))
        ident = raw_id if isinstance(raw_id, int) and not isinstance(raw_id, bool) else None
        return None if score is None else (score, str(item.get("reason", "")), ident)
    score = _unit(item)
    return None if score is None else (score, "", None)


def _unit(value: Any) -> float | None:
    """A score clipped to [0, 1], from a number or a numeric string; None when not a number."""
    if isinstance(value, bool) or value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return min(1.0, max(0.0, number)) if math.isfinite(number) else None


def _render(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    half = (limit - 40) // 2
    return f"{text[:half]}\n... [{len(text) - 2 * half} characters cut] ...\n{text[-half:]}"
