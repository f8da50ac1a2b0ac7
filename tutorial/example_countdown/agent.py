"""`CountdownWorkflow`: the thin ajet adapter around the AgentScope agent of `countdown_agent.py`.

It hands the agent the gateway's URL, this episode's API key and the model name, exactly as one
would hand it any OpenAI-compatible server, runs it on the task, and returns the reply. The agent
itself is unmodified AgentScope code; every call it makes goes through the gateway and is trained.

Workflow arguments (YAML `workflow_args`):
    stream: let AgentScope stream the completion (default false; both work against the gateway).
    style: `answer` (default: the expression only) or `search` (the search written out first, then the
        answer; train it on `sft_search.jsonl` with a larger `rollout.max_tokens_per_turn`).
"""

from __future__ import annotations

import openai

from ajet import Task, Tuner, Workflow, WorkflowOutput
from countdown import extract_answer
from countdown_agent import PROMPTS, build_agent, solve

AGENT = "solver"


class CountdownWorkflow(Workflow):
    """Runs the AgentScope countdown agent on one puzzle."""

    async def execute(self, task: Task, tuner: Tuner) -> WorkflowOutput:
        style = str(self.kwargs.get("style", "answer"))
        agent = build_agent(tuner.base_url, tuner.api_key_for(AGENT), tuner.model_for(AGENT),
                            stream=bool(self.kwargs.get("stream", False)), name=AGENT, style=style)
        try:
            reply = await solve(agent, task.query)
        except openai.BadRequestError as exc:  # the gateway refused (prompt too long): no answer, judged 0
            return WorkflowOutput(answer="", metadata={"stop_reason": f"llm_refused: {exc.message}"})
        finally:
            await agent.model.client.close()
        # Anything else the agent raises fails the episode; the rollout retries it, then counts it.
        text = reply.get_text_content() or ""
        return WorkflowOutput(
            answer=text,
            messages=[{"role": "system", "content": PROMPTS[style]}, {"role": "user", "content": task.query},
                      {"role": "assistant", "content": text}],
            metadata={"expression": extract_answer(text), "stop_reason": str(reply.finished_reason)},
        )
