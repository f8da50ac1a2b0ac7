"""FrozenLake, deterministic: walk from S to G on a grid of frozen tiles (F) without falling into a
hole (H). Pure Python, no ajet: the environment, the action parser, and the shortest-path solver
`make_data.py` builds demonstrations with.

    lake = Lake(["SFFF", "FHFH", "FFFH", "HFFG"])
    observation = lake.observation()
    step = lake.step(parse_action("<action>down</action>"))   # Step(observation, reward, done, event)

Moves: up, down, left, right. A move off the grid leaves the player in place. Reward: 1.0 on
reaching G, 0 otherwise; the episode ends on G or H.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass

MOVES = {"up": (-1, 0), "down": (1, 0), "left": (0, -1), "right": (0, 1)}
TILE_NAMES = {"S": "start", "F": "frozen", "H": "hole", "G": "goal"}
_TAGGED = re.compile(r"<action>\s*([a-zA-Z]+)\s*</action>")
_WORD = re.compile(r"\b(up|down|left|right)\b", re.IGNORECASE)


class InvalidLake(ValueError):
    """A map that is not a rectangle of S/F/H/G with one S and one G."""


def parse_action(text: str | None) -> str | None:
    """The move in a reply: `<action>X</action>` when present (X must be a move), else the first move
    word in the text; None when there is none (an invalid action)."""
    text = text or ""
    tagged = _TAGGED.findall(text)
    if tagged:
        word = tagged[-1].lower()
        return word if word in MOVES else None
    found = _WORD.search(text)
    return found.group(1).lower() if found else None


@dataclass(frozen=True)
class Step:
    """What one action gives back."""

    observation: str
    reward: float
    done: bool
    event: str  # "moved", "bumped" (off the grid), "invalid", "goal", "hole"


class Lake:
    """One episode on one map."""

    def __init__(self, rows: list[str]) -> None:
        if not rows or any(len(r) != len(rows[0]) for r in rows) or any(set(r) - set(TILE_NAMES) for r in rows):
            raise InvalidLake(f"a map is equal-length rows of S, F, H, G; got {rows!r}")
        text = "".join(rows)
        if text.count("S") != 1 or text.count("G") != 1:
            raise InvalidLake(f"a map has exactly one S and one G; got {rows!r}")
        self.rows = list(rows)
        self.position = find(rows, "S")
        self.goal = find(rows, "G")
        self.done = False

    def tile(self, row: int, col: int) -> str | None:
        """The tile at (row, col), None off the grid."""
        if 0 <= row < len(self.rows) and 0 <= col < len(self.rows[0]):
            return self.rows[row][col]
        return None

    def observation(self) -> str:
        """The grid with the player as P, where the player and the goal are, and the four neighbours."""
        r, c = self.position
        grid = "\n".join("".join("P" if (i, j) == (r, c) else t for j, t in enumerate(row))
                         for i, row in enumerate(self.rows))
        around = ", ".join(f"{m}: {TILE_NAMES.get(self.tile(r + dr, c + dc) or '', 'wall')}"
                           for m, (dr, dc) in MOVES.items())
        return (f"{grid}\nYou are at row {r + 1}, column {c + 1}. The goal is at row {self.goal[0] + 1}, "
                f"column {self.goal[1] + 1}. {around}.")

    def step(self, action: str | None) -> Step:
        """Apply one move (None or an unknown word is an invalid action: nothing moves)."""
        if self.done:
            raise RuntimeError("the episode is over")
        if action not in MOVES:
            return Step("Invalid action. Reply with one of up, down, left, right, as <action>down</action>.\n"
                        + self.observation(), 0.0, False, "invalid")
        dr, dc = MOVES[action]
        r, c = self.position[0] + dr, self.position[1] + dc
        tile = self.tile(r, c)
        if tile is None:
            return Step("You hit the edge and stay in place.\n" + self.observation(), 0.0, False, "bumped")
        self.position = (r, c)
        if tile == "H":
            self.done = True
            return Step("You fell into a hole. The episode is over.", 0.0, True, "hole")
        if tile == "G":
            self.done = True
            return Step("You reached the goal!", 1.0, True, "goal")
        return Step(self.observation(), 0.0, False, "moved")


def find(rows: list[str], tile: str) -> tuple[int, int]:
    """(row, col) of the first `tile`."""
    for i, row in enumerate(rows):
        if tile in row:
            return i, row.index(tile)
    raise InvalidLake(f"no {tile!r} in {rows!r}")


def shortest_path(rows: list[str]) -> list[str] | None:
    """The moves of a shortest safe path from S to G (ties broken in the order down, right, up,
    left), or None when G cannot be reached."""
    order = ["down", "right", "up", "left"]
    start, goal = find(rows, "S"), find(rows, "G")
    previous: dict[tuple[int, int], tuple[tuple[int, int], str] | None] = {start: None}
    queue = deque([start])
    while queue:
        here = queue.popleft()
        if here == goal:
            moves: list[str] = []
            while previous[here] is not None:
                here, move = previous[here]  # type: ignore[misc]
                moves.append(move)
            return moves[::-1]
        for move in order:
            dr, dc = MOVES[move]
            there = (here[0] + dr, here[1] + dc)
            if there in previous or not (0 <= there[0] < len(rows) and 0 <= there[1] < len(rows[0])):
                continue
            if rows[there[0]][there[1]] == "H":
                continue
            previous[there] = (here, move)
            queue.append(there)
    return None
