"""The shop agent, written with AG2 (`ag2` 1.x, `import ag2`) only: nothing here knows ajet.

`build_agent(base_url, api_key, model)` is an AG2 `Agent` with shop_tools' functions as tools, on an
`OpenAIConfig` pointed at an OpenAI-compatible server; it streams the completions (`streaming=True`).
`answer(agent, question)` asks it once and returns the reply's text.
"""

from __future__ import annotations

from ag2 import Agent, tool
from ag2.config import OpenAIConfig

import shop_tools

PROMPT = ("You are a shop assistant. Look up prices, stock and currency conversions with the tools, "
          "then answer in one short sentence that states the numbers.")
# The plain functions as AG2 tools: their names, signatures and docstrings are the tool specs.
TOOLS = [tool(f) for f in shop_tools.TOOLS]


def build_agent(base_url: str, api_key: str, model: str, *, timeout: float = 600.0, max_retries: int = 0) -> Agent:
    config = OpenAIConfig(model=model, base_url=base_url, api_key=api_key, timeout=timeout, max_retries=max_retries,
                          streaming=True)
    return Agent("shop_assistant", prompt=PROMPT, config=config, tools=TOOLS)


async def answer(agent: Agent, question: str) -> str:
    reply = await agent.ask(question)
    return str(reply.body or "")
