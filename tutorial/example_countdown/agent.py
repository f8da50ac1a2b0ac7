"""`CountdownWorkflow`: the thin ajet adapter around the AgentScope agent of `countdown_agent.py`.

It hands the agent the gateway's URL, this episode's API key and the model name, exactly as one
would hand it any OpenAI-compatible server, runs it on the task, and returns the reply. The agent
itself is unmodified AgentScope code; every call it makes goes through the gateway and is trained.

Workflow arguments (YAML `workflow_args`):
    stream: let AgentScope stream the completion (default false; both work against the gateway).
"""

from __future__ import annotations

from ajet import Task, Tuner, Workflow, WorkflowOutput
from countdown import extract_answer
from countdown_agent import build_agent, solve

AGENT = "solver"


class CountdownWorkflow(Workflow):
    """Runs the AgentScope countdown agent on one puzzle."""

    async def execute(self, task: Task, tuner: Tuner) -> WorkflowOutput:
        agent = build_agent(tuner.base_url, tuner.api_key_for(AGENT), tuner.model_for(AGENT),
                            stream=bool(self.kwargs.get("stream", False)), name=AGENT)
        try:
            reply = await solve(agent, task.query)
        finally:
            await agent.model.client.close()
        text = reply.get_text_content() or ""
        error = getattr(reply, "error", None)
        return WorkflowOutput(
            answer=text,
            messages=[{"role": "user", "content": task.query}, {"role": "assistant", "content": text}],
            metadata={"expression": extract_answer(text), "finished_reason": str(reply.finished_reason),
                      **({"agent_error": str(error)[:300]} if error else {})},
        )
