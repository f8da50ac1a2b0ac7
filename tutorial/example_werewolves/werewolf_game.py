"""The rules of a short werewolves game, with no model in it: the moderator of the tutorial.

Five players P1..P5: two wolves, one seer, two villagers (the village side is the seer and the
villagers). A game is at most `MAX_ROUNDS` rounds of

    day:   the seer (if alive) accuses one player in public; every living player votes; the player
           with the most votes (a unique maximum) is eliminated and its role is revealed;
    night: the seer checks one player (learns its side, privately); the first living wolf picks a
           victim, who dies.

The seer also checks one player before day 1. The village wins when both wolves are eliminated,
the wolves when they are at least as many as the village's living players or when the village has
not found them within `MAX_ROUNDS` days.

Every action is one line, `VOTE: P3`, `ACCUSE: P3`, `CHECK: P3`, `KILL: P3`, parsed and validated
by `Game.act`: a reply without the keyword, a player who does not exist or is dead, oneself, a
wolf's own partner as a kill: each is counted in `Game.invalid[agent]` and the action is skipped
(an abstained vote, no accusation, no check, no kill). Nothing a model writes can break the game.

Agents are named by role, not seat: `seer`, `villager1`, `villager2`, `wolf1`, `wolf2` (in seat
order), so that a YAML can name a fixed `trainable_agents` list while seats vary from game to game.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from collections.abc import Awaitable, Callable
from typing import Any, Literal

PLAYERS = ("P1", "P2", "P3", "P4", "P5")
ROLES = ("wolf", "wolf", "seer", "villager", "villager")
MAX_ROUNDS = 3
VILLAGE_AGENTS = ("seer", "villager1", "villager2")
WOLF_AGENTS = ("wolf1", "wolf2")
Kind = Literal["VOTE", "ACCUSE", "CHECK", "KILL"]
_ACTION = re.compile(r"\b(VOTE|ACCUSE|CHECK|KILL)\s*:?\s*(P\s*\d+)", re.IGNORECASE)


def deal(seed: int) -> dict[str, str]:
    """Seat -> role for one game (seeded)."""
    roles = list(ROLES)
    random.Random(seed).shuffle(roles)
    return dict(zip(PLAYERS, roles))


def agent_names(roles: dict[str, str]) -> dict[str, str]:
    """Seat -> agent name: `seer`, and `villager1`/`villager2`, `wolf1`/`wolf2` in seat order."""
    counts: dict[str, int] = {}
    names = {}
    for seat in PLAYERS:
        role = roles[seat]
        if role == "seer":
            names[seat] = "seer"
        else:
            counts[role] = counts.get(role, 0) + 1
            names[seat] = f"{role}{counts[role]}"
    return names


def side(role: str) -> str:
    return "wolves" if role == "wolf" else "village"


def parse_action(kind: Kind, text: object) -> str | None:
    """The seat an action line names (`VOTE: P3` -> 'P3'), or None when there is no such line.
    The first line with the expected keyword counts; case and spacing are forgiven."""
    if not isinstance(text, str):
        return None
    for match in _ACTION.finditer(text):
        if match.group(1).upper() == kind:
            return match.group(2).replace(" ", "").upper()
    return None


@dataclass
class Game:
    """One game's state. The workflow asks `prompt_*` what to tell an agent and feeds its reply to `act`."""

    roles: dict[str, str]
    alive: list[str] = field(default_factory=lambda: list(PLAYERS))
    day: int = 0
    winner: str | None = None
    checks: dict[str, str] = field(default_factory=dict)  # seer's findings: seat -> side
    accused: str | None = None  # the seer's accusation of the current day
    invalid: dict[str, int] = field(default_factory=dict)  # agent -> actions that did not count
    errors: dict[str, int] = field(default_factory=dict)  # agent -> asks that raised (no reply at all)
    last_error: dict[str, str] = field(default_factory=dict)  # agent -> what its last failed ask raised
    actions: dict[str, int] = field(default_factory=dict)  # agent -> actions asked
    log: list[str] = field(default_factory=list)  # public events, in order
    seer_informed: int = 0  # accusations asked of the seer while a check had shown it a living wolf
    seer_hits: int = 0  # of those, the ones that named such a wolf

    def __post_init__(self) -> None:
        if sorted(self.roles) != list(PLAYERS) or sorted(self.roles.values()) != sorted(ROLES):
            raise ValueError(f"roles must deal {ROLES} to {PLAYERS}, got {self.roles}")
        self.names = agent_names(self.roles)
        self.seat_of = {name: seat for seat, name in self.names.items()}

    # ------------------------------------------------------------------ queries
    def role_of(self, agent: str) -> str:
        return self.roles[self.seat_of[agent]]

    def living(self, role: str | None = None) -> list[str]:
        return [s for s in self.alive if role is None or self.roles[s] == role]

    def count_side(self, name: str) -> int:
        return sum(side(self.roles[s]) == name for s in self.alive)

    def is_alive(self, agent: str) -> bool:
        return self.seat_of[agent] in self.alive

    # ------------------------------------------------------------------ actions
    def act(self, agent: str, kind: Kind, reply: object) -> str | None:
        """Validate `agent`'s reply to a `kind` question; return the target seat, or None (counted invalid)."""
        self.actions[agent] = self.actions.get(agent, 0) + 1
        seat = self.seat_of[agent]
        target = parse_action(kind, reply)
        ok = target is not None and target in self.alive and target != seat
        if ok and kind == "KILL":
            ok = self.roles[target] != "wolf"
        if not ok:
            self.invalid[agent] = self.invalid.get(agent, 0) + 1
            return None
        return target

    def resolve_check(self, target: str | None) -> None:
        if target is not None:
            self.checks[target] = side(self.roles[target])

    def resolve_accuse(self, target: str | None) -> None:
        seen = [s for s, v in self.checks.items() if v == "wolves" and s in self.alive]
        if seen:  # the seer knows a wolf: does it say so? (an invalid reply is a miss)
            self.seer_informed += 1
            self.seer_hits += target in seen
        self.accused = target
        if target is not None:
            self.log.append(f"Day {self.day}: the seer ({self.seat_of_role('seer')}) accuses {target}.")

    def resolve_votes(self, votes: dict[str, str | None]) -> str | None:
        """Plurality of the valid votes; a tie or no valid vote eliminates nobody. Returns the eliminated seat."""
        tally: dict[str, int] = {}
        for target in votes.values():
            if target is not None:
                tally[target] = tally.get(target, 0) + 1
        cast = ", ".join(f"{v}->{t or 'none'}" for v, t in votes.items())
        top = max(tally.values(), default=0)
        leaders = [t for t, n in tally.items() if n == top]
        out = leaders[0] if top > 0 and len(leaders) == 1 else None
        if out is None:
            self.log.append(f"Day {self.day}: votes {cast}; nobody is eliminated.")
        else:
            self.alive.remove(out)
            self.log.append(f"Day {self.day}: votes {cast}; {out} is eliminated, a {self.roles[out]}.")
        self._check_winner()
        return out

    def resolve_kill(self, target: str | None) -> None:
        if target is None:
            self.log.append(f"Night {self.day}: nobody dies.")
        else:
            self.alive.remove(target)
            self.log.append(f"Night {self.day}: {target} is killed, a {self.roles[target]}.")
        self._check_winner()

    def seat_of_role(self, role: str) -> str:
        return next(s for s in PLAYERS if self.roles[s] == role)

    def _check_winner(self) -> None:
        if not self.living("wolf"):
            self.winner = "village"
        elif self.count_side("wolves") >= self.count_side("village"):
            self.winner = "wolves"

    # ------------------------------------------------------------------ what agents are told
    def system_prompt(self, agent: str) -> str:
        seat, role = self.seat_of[agent], self.role_of(agent)
        text = (f"You are {seat} in a game of werewolves with players P1 to P5: two wolves, one seer, "
                f"two villagers. You are a {role}.")
        if role == "wolf":
            partner = next(s for s in PLAYERS if self.roles[s] == "wolf" and s != seat)
            text += f" Your partner wolf is {partner}. Kill villagers at night; avoid being voted out."
        elif role == "seer":
            text += " Each night you learn one player's side. Accuse the wolves you find; vote them out."
        else:
            text += " Find the wolves and vote them out; the seer's accusation helps."
        return text + " Answer with one line only."

    def prompt(self, agent: str, kind: Kind, news: list[str]) -> str:
        """The user message asking `agent` for a `kind` action, after the public `news` since its last turn."""
        lines = list(news)
        seat = self.seat_of[agent]
        if self.role_of(agent) == "seer" and self.checks:
            lines.append("Your checks: " + ", ".join(f"{s} is {'a wolf' if v == 'wolves' else 'good'}"
                                                    for s, v in self.checks.items()) + ".")
        others = [s for s in self.alive if s != seat and not (kind == "KILL" and self.roles[s] == "wolf")]
        lines.append(f"Alive: {', '.join(self.alive)}.")
        question = {"VOTE": "Vote to eliminate one player", "ACCUSE": "Accuse one player in public",
                    "CHECK": "Choose a player to check", "KILL": "Choose a player to kill"}[kind]
        lines.append(f"{question} ({', '.join(others)}). Reply: {kind}: P<number>")
        return "\n".join(lines)


# ask(agent, kind, messages) -> the reply's text. It may raise: that turn counts in `Game.errors`
# and as an invalid action, and the game goes on.
Ask = Callable[[str, Kind, list[dict[str, Any]]], Awaitable[Any]]


async def play(game: Game, ask: Ask) -> dict[str, list[dict[str, Any]]]:
    """Run `game` to its end; return each agent's conversation (system, then user/assistant turns).

    Each agent keeps its own history, growing turn by turn (so ajet merges an agent's calls into one
    sample); the public events since its last turn open each of its user messages. Simultaneous
    actions (the day's votes, the night's check and kill) are asked concurrently.
    """
    import asyncio

    conversations = {a: [{"role": "system", "content": game.system_prompt(a)}] for a in game.seat_of}
    seen = dict.fromkeys(conversations, 0)

    async def turn(agent: str, kind: Kind) -> str | None:
        messages = conversations[agent]
        start = seen[agent]
        seen[agent] = len(game.log)
        messages.append({"role": "user", "content": game.prompt(agent, kind, game.log[start:])})
        try:
            reply = await ask(agent, kind, messages)
        except Exception as exc:  # noqa: BLE001 - an agent that raises loses its turn, the game goes on
            game.errors[agent] = game.errors.get(agent, 0) + 1
            game.last_error[agent] = f"{type(exc).__name__}: {exc}"[:300]
            messages.pop()
            seen[agent] = start  # it has not heard the news yet
            return game.act(agent, kind, None)
        messages.append({"role": "assistant", "content": reply if isinstance(reply, str) else ""})
        return game.act(agent, kind, reply)

    async def night() -> None:
        jobs = []
        if game.is_alive("seer"):
            jobs.append(turn("seer", "CHECK"))
        wolves = [game.names[s] for s in game.living("wolf")]
        jobs.append(turn(wolves[0], "KILL"))
        results = await asyncio.gather(*jobs)
        if len(jobs) == 2:
            game.resolve_check(results[0])
        game.resolve_kill(results[-1])

    if game.is_alive("seer"):
        game.resolve_check(await turn("seer", "CHECK"))
    while game.winner is None:
        game.day += 1
        game.accused = None
        if game.is_alive("seer"):
            game.resolve_accuse(await turn("seer", "ACCUSE"))
        voters = [game.names[s] for s in game.alive]
        targets = await asyncio.gather(*(turn(v, "VOTE") for v in voters))
        game.resolve_votes({game.seat_of[v]: t for v, t in zip(voters, targets)})
        if game.winner is None and game.day >= MAX_ROUNDS:
            game.winner = "wolves"  # the village did not find them in time
        if game.winner is None:
            await night()
    return conversations


def village_plan(game: Game, agent: str, kind: Kind) -> str:
    """The village's scripted play, used to build the SFT demonstrations: the seer checks the
    lowest-seated player it has not checked, accuses (and votes) a wolf it found, else a player it
    has not cleared; a villager votes the accused, else the lowest-seated other player."""
    seat = game.seat_of[agent]
    others = [s for s in game.alive if s != seat]
    if game.role_of(agent) == "seer":
        if kind == "CHECK":
            unchecked = [s for s in others if s not in game.checks]
            return f"CHECK: {(unchecked or others)[0]}"
        wolves = [s for s in others if game.checks.get(s) == "wolves"]
        suspects = wolves or [s for s in others if s not in game.checks] or others
        return f"{kind}: {suspects[0]}"
    if game.accused in others:
        return f"VOTE: {game.accused}"
    return f"VOTE: {others[0]}"


def random_plan(rng: random.Random) -> Callable[[Game, str, Kind], str]:
    """Any valid target, drawn at random: a stand-in for an opponent with no plan."""
    def plan(game: Game, agent: str, kind: Kind) -> str:
        seat = game.seat_of[agent]
        options = [s for s in game.alive if s != seat and not (kind == "KILL" and game.roles[s] == "wolf")]
        return f"{kind}: {rng.choice(options)}"
    return plan
