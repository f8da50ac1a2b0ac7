"""The shop agent, written with smolagents only: nothing here knows ajet.

`build_agent(base_url, api_key, model)` is smolagents' `ToolCallingAgent` on `OpenAIServerModel`, the
documented way to reach an OpenAI-compatible server. smolagents is synchronous: `answer(agent, question)`
runs it (call it in a thread from async code).
"""

from __future__ import annotations

from smolagents import OpenAIServerModel, ToolCallingAgent, tool

import shop_tools


@tool
def get_price(item: str) -> dict:
    """Price of one item in the shop, in USD.

    Args:
        item: The item's name, e.g. hammer.
    """
    return shop_tools.get_price(item)


@tool
def get_stock(item: str) -> dict:
    """How many units of an item the shop has in stock.

    Args:
        item: The item's name, e.g. hammer.
    """
    return shop_tools.get_stock(item)


@tool
def convert_currency(amount_usd: float, currency: str) -> dict:
    """Convert an amount in USD to EUR, GBP, JPY or CAD.

    Args:
        amount_usd: The amount in USD.
        currency: EUR, GBP, JPY or CAD.
    """
    return shop_tools.convert_currency(amount_usd, currency)


def build_agent(base_url: str, api_key: str, model: str, *, timeout: float = 600.0, max_retries: int = 0, max_steps: int = 4) -> ToolCallingAgent:
    llm = OpenAIServerModel(model_id=model, api_base=base_url, api_key=api_key,
                            client_kwargs={"timeout": timeout, "max_retries": max_retries})
    return ToolCallingAgent(tools=[get_price, get_stock, convert_currency], model=llm, max_steps=max_steps,
                            verbosity_level=0)


def answer(agent: ToolCallingAgent, question: str) -> str:
    return str(agent.run(question))
