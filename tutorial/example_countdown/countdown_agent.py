"""The countdown agent, written with AgentScope only: nothing here knows about ajet.

`build_agent(base_url, api_key, model)` is how any AgentScope user points an agent at an
OpenAI-compatible server (vLLM, OpenAI, or ajet's gateway while it is being trained).
`solve(agent, query)` asks it once and returns its text. The agent answers in plain text with
`<answer>expression</answer>` (style `answer`), or works the puzzle out in writing first (style
`search`); it has no tools.
"""

from __future__ import annotations

from agentscope.agent import Agent, InjectionConfig, ReActConfig
from agentscope.credential import OpenAICredential
from agentscope.message import Msg, UserMsg
from agentscope.model import OpenAIChatModel

SYSTEM_PROMPT = (
    "You solve countdown puzzles. Combine two or three of the given numbers with + - * / and parentheses "
    "so that the expression equals the target, using each number at most once. Reply with the expression "
    "only, inside <answer></answer>, for example <answer>(1 + 2) * 3</answer>."
)
# The `search` style: the agent works the puzzle out in writing first (countdown.search_trace's form).
SEARCH_PROMPT = (
    "You solve countdown puzzles. Combine two or three of the given numbers with + - * and parentheses "
    "so that the expression equals the target, using each number at most once. Work it out first: for "
    "each pair of numbers, add, multiply and subtract them, one line per result, and combine that result "
    "with the third number by + * -. Stop when a value equals the target, then give its expression inside "
    "<answer></answer>, for example <answer>(1+2)*3</answer>."
)
PROMPTS = {"answer": SYSTEM_PROMPT, "search": SEARCH_PROMPT}


def build_agent(base_url: str, api_key: str, model: str, *, max_tokens: int | None = None,
                stream: bool = False, name: str = "solver", style: str = "answer") -> Agent:
    """An AgentScope `Agent` on `OpenAIChatModel`, talking to the server at `base_url`; `style` picks
    its system prompt (PROMPTS)."""
    if style not in PROMPTS:
        raise ValueError(f"style {style!r}: not one of {', '.join(PROMPTS)}")
    chat_model = OpenAIChatModel(
        credential=OpenAICredential(api_key=api_key, base_url=base_url),
        model=model,
        parameters=OpenAIChatModel.Parameters(max_tokens=max_tokens),
        stream=stream,
        max_retries=0,  # a refused call (turn budget, prompt too long) is final, not transient
        client_kwargs={"max_retries": 0},  # nor does the openai client underneath retry it
    )
    return Agent(
        name=name,
        system_prompt=PROMPTS[style],
        model=chat_model,
        # The runtime-state reminder writes the clock into every prompt; a puzzle needs no clock,
        # and without it the same puzzle always gives the same prompt.
        injection_config=InjectionConfig(inject_runtime_state=False),
        react_config=ReActConfig(max_iters=1),
    )


async def solve(agent: Agent, query: str) -> Msg:
    """The agent's reply to one puzzle."""
    return await agent.reply(UserMsg(name="user", content=query))
