"""The shop agent, written with the OpenAI Agents SDK (`openai-agents`) only: nothing here knows ajet.

`build_agent(base_url, api_key, model)` is the SDK's documented way to use a non-OpenAI endpoint: an
`AsyncOpenAI` client on `base_url`, wrapped in `OpenAIResponsesModel` (the SDK's default API, the
Responses API). `answer(agent, question)` runs it with `Runner.run` and returns the final text.
"""

from __future__ import annotations

from agents import Agent, OpenAIResponsesModel, RunConfig, Runner, function_tool
from openai import AsyncOpenAI

import shop_tools

INSTRUCTIONS = ("You are a shop assistant. Look up prices, stock and currency conversions with the tools, "
                "then answer in one short sentence that states the numbers.")
# The plain functions as the SDK's tools: their names, signatures and docstrings are the tool specs.
TOOLS = [function_tool(f) for f in shop_tools.TOOLS]


def build_agent(base_url: str, api_key: str, model: str, *, timeout: float = 600.0, max_retries: int = 0) -> Agent:
    client = AsyncOpenAI(base_url=base_url, api_key=api_key, timeout=timeout, max_retries=max_retries)
    return Agent(
        name="shop_assistant",
        instructions=INSTRUCTIONS,
        model=OpenAIResponsesModel(model=model, openai_client=client),
        tools=TOOLS,
    )


async def answer(agent: Agent, question: str, *, max_turns: int = 4) -> str:
    # Tracing would export every run to OpenAI's servers; a local endpoint has none.
    result = await Runner.run(agent, question, max_turns=max_turns, run_config=RunConfig(tracing_disabled=True))
    return str(result.final_output)
