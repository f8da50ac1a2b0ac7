"""The shop agent, written with LangGraph and LangChain's `ChatOpenAI` only: nothing here knows ajet.

`build_agent(base_url, api_key, model)` is LangGraph's prebuilt ReAct agent on a `ChatOpenAI` pointed at
an OpenAI-compatible server; it streams the completions (`streaming=True`). `answer(agent, question)`
runs the graph and returns the last message's text.
"""

from __future__ import annotations

from langchain_core.messages import HumanMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.prebuilt import create_react_agent

import shop_tools

PROMPT = ("You are a shop assistant. Look up prices, stock and currency conversions with the tools, "
          "then answer in one short sentence that states the numbers.")
# The plain functions as LangChain tools: their names, signatures and docstrings are the tool specs.
TOOLS = [tool(f) for f in shop_tools.TOOLS]


def build_agent(base_url: str, api_key: str, model: str, *, timeout: float = 600.0, max_retries: int = 0):
    llm = ChatOpenAI(model=model, base_url=base_url, api_key=api_key, timeout=timeout, max_retries=max_retries,
                     streaming=True)
    return create_react_agent(llm, TOOLS, prompt=PROMPT)


async def answer(agent, question: str, *, max_turns: int = 4) -> str:
    # Each model call and each tool step is a graph step: max_turns calls need 2 * max_turns steps.
    state = await agent.ainvoke({"messages": [HumanMessage(question)]}, {"recursion_limit": 2 * max_turns + 1})
    return str(state["messages"][-1].content)
