"""The thin ajet adapter: one `Workflow` that runs any of this folder's framework agents.

Each hands its agent what it would hand any OpenAI-compatible server: `tuner.base_url`, this episode's
API key for the agent (`tuner.api_key_for("assistant")`: the key tells the gateway whose call it is)
and the model name, runs it on the task, and returns its final text for the judge. The agents
themselves (`*_agent.py`) import nothing from ajet.

A call the gateway refuses (the turn budget `rollout.max_turns`, a prompt over
`rollout.max_prompt_tokens`: HTTP 400), and a framework's own step limit, end the episode with the
answer so far (judged 0); anything else the agent raises fails the episode, which the rollout retries
and counts.

Workflow arguments (YAML `workflow_args`):
    framework: openai_agents, langgraph, smolagents, pydantic_ai or ag2 (default openai_agents)
    timeout_s: the framework's client timeout per LLM call (default 600)
    max_retries: how often the framework's client resends a call that failed or timed out (default 0)
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
from typing import Any

import openai

from ajet import Task, Tuner, Workflow, WorkflowOutput
from ajet.plugins import load_object

AGENT = "assistant"


# framework -> (its agent file of this folder, the exceptions that are its own turn or step limits)
FRAMEWORKS: dict[str, tuple[str, tuple[str, ...]]] = {
    "openai_agents": ("openai_agents_agent", ("agents.exceptions:MaxTurnsExceeded",
                                              "agents.exceptions:ModelBehaviorError")),
    "langgraph": ("langgraph_agent", ("langgraph.errors:GraphRecursionError",)),
    "smolagents": ("smolagents_agent", ()),
    "pydantic_ai": ("pydantic_ai_agent", ("pydantic_ai.exceptions:UsageLimitExceeded",
                                          "pydantic_ai.exceptions:UnexpectedModelBehavior")),
    "ag2": ("ag2_agent", ()),
}


class FrameworkWorkflow(Workflow):
    """Builds the agent of `workflow_args.framework` on the gateway and runs it on the task's query."""

    def __init__(self, framework: str = "openai_agents", timeout_s: float = 600.0, max_retries: int = 0,
                 **kwargs: Any) -> None:
        super().__init__(framework=framework, timeout_s=timeout_s, max_retries=max_retries, **kwargs)
        if framework not in FRAMEWORKS:
            raise ValueError(f"framework = {framework!r}; this folder has agents for {', '.join(FRAMEWORKS)}")
        module, limits = FRAMEWORKS[framework]
        try:
            self.agent_module = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            raise ValueError(f"framework = {framework!r} needs the {exc.name!r} package: "
                             "pip install -e '.[frameworks]'") from None
        self.limits = tuple(load_object(ref) for ref in limits)
        self.timeout_s, self.max_retries = float(timeout_s), int(max_retries)

    async def execute(self, task: Task, tuner: Tuner) -> WorkflowOutput:
        framework = self.agent_module
        agent = framework.build_agent(tuner.base_url, tuner.api_key_for(AGENT), tuner.model_for(AGENT),
                                      timeout=self.timeout_s, max_retries=self.max_retries)
        try:
            if inspect.iscoroutinefunction(framework.answer):
                answer = await framework.answer(agent, task.query)
            else:  # a synchronous framework: its blocking client runs in a thread, the gateway on this loop
                answer = await asyncio.to_thread(framework.answer, agent, task.query)
        except Exception as exc:
            if not self._refused(exc):
                raise
            return WorkflowOutput(answer="", metadata={"stop_reason": f"{type(exc).__name__}: {exc}"[:300]})
        return WorkflowOutput(answer=answer, metadata={"stop_reason": "answered"})

    def _refused(self, exc: BaseException | None) -> bool:
        """Whether `exc`, or an exception it wraps, is the gateway's refusal or the framework's limit."""
        for _ in range(8):  # frameworks wrap the client's error in their own, once or twice
            if exc is None:
                return False
            if isinstance(exc, (openai.BadRequestError, *self.limits)):
                return True
            exc = exc.__cause__ or exc.__context__
        return False
