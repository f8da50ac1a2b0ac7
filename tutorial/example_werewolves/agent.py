"""`Werewolves`: five agents play one game per episode; one side trains, the other is a frozen model.

Each player is an agent of its own (`tuner.openai_client(agent="seer")`, ...), with its own growing
conversation, so the gateway records each agent's calls on its own timeline and merges them into
one sample per agent (docs/merging.md). Which agents train is the YAML's `trainable_agents`; the
other side's calls never become samples:

- `frozen_model` set (the default here, the embedded SmolLM2): the other side talks to that model,
  loaded once per process behind an in-process OpenAI endpoint (`ajet.serving.local`), so it stays
  the base model while the policy trains and in `ajet eval --model <trained>`;
- `frozen_model: null`: the other side goes through the tuner like the trained one; the gateway
  sends it to the policy without recording it, or to the model the YAML's `agents:` names for it.

The moderator (werewolf_game.py) validates every action; invalid ones and agents that raise are
counted per episode (metadata and metrics), never fatal.

Workflow arguments (YAML `workflow_args`):
    trained_side: "village" (seer, villager1, villager2) or "wolves" (wolf1, wolf2); must match
        the YAML's trainable_agents. The episode's `answer` is the winning side.
    frozen_model: the model the other side plays with (a name `ajet.serving.local` loads), or null.
    frozen_temperature: its sampling temperature (default 0: greedy, so the opponent is the same
        in every evaluation).
    max_tokens: new tokens per action (default 12; `VOTE: P3` is 6).
"""

from __future__ import annotations

import asyncio
import tempfile
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import openai

from ajet import Task, Tuner, Workflow, WorkflowOutput
from werewolf_game import VILLAGE_AGENTS, WOLF_AGENTS, Game, Kind, play

SIDES = {"village": VILLAGE_AGENTS, "wolves": WOLF_AGENTS}


class Werewolves(Workflow):
    """One game per episode; the trained side's agents go through the tuner."""

    def __init__(self, trained_side: str = "village", frozen_model: str | None = "smollm2-135m-instruct",
                 frozen_temperature: float = 0.0, max_tokens: int = 12) -> None:
        if trained_side not in SIDES:
            raise ValueError(f"trained_side must be one of {sorted(SIDES)}, got {trained_side!r}")
        super().__init__(trained_side=trained_side, frozen_model=frozen_model)
        self.trained_side = trained_side
        self.frozen_model = frozen_model
        self.frozen_temperature = float(frozen_temperature)
        self.max_tokens = int(max_tokens)
        # The frozen endpoint lives as long as the event loop that started it (one per run stage).
        self._frozen: tuple[asyncio.AbstractEventLoop, openai.AsyncOpenAI, str] | None = None
        self._frozen_stack: AsyncExitStack | None = None
        self._frozen_lock: tuple[asyncio.AbstractEventLoop, asyncio.Lock] | None = None

    async def execute(self, task: Task, tuner: Tuner) -> WorkflowOutput:
        roles = (task.metadata or {}).get("roles")
        game = Game(dict(roles))  # a malformed task raises here: the rollout counts it failed
        trained = set(SIDES[self.trained_side])
        frozen = await self._frozen_client() if self.frozen_model else None
        clients: dict[str, openai.AsyncOpenAI] = {}
        calls = {"trained": 0, "frozen": 0}

        async def ask(agent: str, kind: Kind, messages: list[dict[str, Any]]) -> str | None:
            args: dict[str, Any] = {"messages": messages, "max_tokens": self.max_tokens}
            if agent in trained or frozen is None:
                client = clients.setdefault(agent, tuner.openai_client(agent=agent))
                args["model"] = tuner.model_for(agent)
            else:
                client, args["model"] = frozen[0], frozen[1]
                args["temperature"] = self.frozen_temperature
            calls["trained" if agent in trained else "frozen"] += 1
            response = await client.chat.completions.create(**args)
            return response.choices[0].message.content

        conversations = await play(game, ask)
        ours = [a for a in game.seat_of if a in trained]
        invalid_trained = sum(game.invalid.get(a, 0) for a in ours)
        invalid_frozen = sum(n for a, n in game.invalid.items() if a not in trained)
        # the seer's accusation accuracy: reported only by games where it knew a wolf when it accused
        seer = {"seer_accuses_seen_wolf": game.seer_hits / game.seer_informed} if game.seer_informed else {}
        return WorkflowOutput(
            answer=game.winner,
            messages=conversations[ours[0]],  # one trained agent's view; all of them are in metadata
            metadata={"roles": game.roles, "agents": game.names, "winner": game.winner,
                      "trained_side": self.trained_side, "days": game.day, "log": game.log,
                      "invalid": game.invalid, "errors": game.errors, "last_error": game.last_error,
                      "actions": game.actions,
                      "trained_actions": sum(game.actions.get(a, 0) for a in ours),
                      "conversations": conversations},
            metrics={"win": float(game.winner == self.trained_side), "days": float(game.day),
                     "invalid_trained": float(invalid_trained), "invalid_frozen": float(invalid_frozen),
                     "agent_errors": float(sum(game.errors.values())),
                     "calls_trained": float(calls["trained"]), "calls_frozen": float(calls["frozen"]),
                     "seer_informed_accusations": float(game.seer_informed), **seer},
        )

    async def _frozen_client(self) -> tuple[openai.AsyncOpenAI, str]:
        loop = asyncio.get_running_loop()
        if self._frozen is not None and self._frozen[0] is loop:
            return self._frozen[1], self._frozen[2]
        if self._frozen_lock is None or self._frozen_lock[0] is not loop:
            self._frozen_lock = (loop, asyncio.Lock())  # a lock belongs to one loop
        async with self._frozen_lock[1]:
            if self._frozen is None or self._frozen[0] is not loop:
                from ajet.serving.local import local_endpoint

                stack = AsyncExitStack()
                work_dir = Path(tempfile.gettempdir()) / "ajet-werewolves-frozen"
                endpoint = await stack.enter_async_context(local_endpoint(self.frozen_model, work_dir))
                client = openai.AsyncOpenAI(base_url=endpoint.base_url, api_key=endpoint.api_key, max_retries=0)
                self._frozen, self._frozen_stack = (loop, client, endpoint.model), stack
        return self._frozen[1], self._frozen[2]
