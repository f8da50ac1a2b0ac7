"""The shop agent, written with PydanticAI only: nothing here knows ajet.

`build_agent(base_url, api_key, model)` is a PydanticAI `Agent` on `OpenAIChatModel` with an
`OpenAIProvider` pointed at an OpenAI-compatible server (PydanticAI's documented way);
`answer(agent, question)` runs it and returns the text output.
"""

from __future__ import annotations

from openai import AsyncOpenAI
from pydantic_ai import Agent, UsageLimits
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

import shop_tools

INSTRUCTIONS = ("You are a shop assistant. Look up prices, stock and currency conversions with the tools, "
                "then answer in one short sentence that states the numbers.")


def build_agent(base_url: str, api_key: str, model: str, *, timeout: float = 600.0, max_retries: int = 0) -> Agent:
    client = AsyncOpenAI(base_url=base_url, api_key=api_key, timeout=timeout, max_retries=max_retries)
    # The plain functions as tools: their names, signatures and docstrings are the tool specs.
    return Agent(OpenAIChatModel(model, provider=OpenAIProvider(openai_client=client)),
                 instructions=INSTRUCTIONS, tools=shop_tools.TOOLS)


async def answer(agent: Agent, question: str, *, max_turns: int = 4) -> str:
    result = await agent.run(question, usage_limits=UsageLimits(request_limit=max_turns))
    return str(result.output)
