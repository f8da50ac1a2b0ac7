"""The MCP server zoo's registry: which servers there are, where they live, how each is reached.

Every server has a folder `benchmarks/mcp_zoo/<name>/` with `<name>.yaml` (the config a user
writes: workflow, server, system prompt, val set, judge) and `val.jsonl` (hand-written questions
with reference calls and answers). The server itself is either written here
(`benchmarks/mcp_zoo/servers/<name>.py`, reached in memory) or a published package installed by
`setup.py` into its own venv under `~/.cache/ajet/mcp_zoo/venvs/<name>` and run through its own
console command over stdio, as its users run it. `split.json` says which servers are held out.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

ZOO = Path(__file__).resolve().parent
VENVS = Path("~/.cache/ajet/mcp_zoo/venvs").expanduser()
# The fixtures sit at a fixed path, not under the home folder: the git server's reference calls
# name the repository by its absolute path (the server's own errors spell it that way), so the path
# must be the same on every machine.
FIXTURES = Path("/tmp/ajet-mcp-zoo")


@dataclass(frozen=True)
class Published:
    """A published MCP server package, pinned. `pins`: the versions of its dependencies as of its
    release, where today's versions break it (old `mcp` 1.x servers under `mcp` 2 or pydantic 2.14).
    `python`: the lowest Python it installs on."""

    package: str
    version: str
    console: str
    pins: tuple[str, ...] = ()
    python: tuple[int, int] = (3, 11)
    fixtures: tuple[str, ...] = field(default=())

    @property
    def requirement(self) -> str:
        return f"{self.package}=={self.version}"

    def venv(self, name: str) -> Path:
        return VENVS / name

    def executable(self, name: str) -> Path:
        return self.venv(name) / "bin" / self.console


# Old `mcp` 1.x servers: the mcp and pydantic of their day (mcp 1.15.0 came out with pydantic 2.11).
MCP1 = ("mcp==1.15.0", "pydantic==2.11.9")

PUBLISHED: dict[str, Published] = {
    "git": Published("mcp-server-git", "2026.10.19", "mcp-server-git", fixtures=("garden-planner",)),
    "time": Published("mcp-server-time", "2026.10.19", "mcp-server-time"),
    "cooking_units": Published("mcp-units", "0.3.3", "mcp-units", pins=MCP1),
    "gnu_units": Published("mcp-gnu-units", "0.1.1", "mcp-gnu-units"),
    "birds": Published("mcp-sqlite", "0.3.2", "mcp-sqlite", pins=MCP1, python=(3, 12), fixtures=("birds",)),
    "calculator": Published("mcp-server-calculator", "0.2.1", "mcp-server-calculator", pins=MCP1),
}

WRITTEN = ("helpdesk", "rooms", "trails", "hr", "weather")

SERVERS = (*PUBLISHED, *WRITTEN)


def yaml_path(name: str) -> Path:
    return ZOO / name / f"{name}.yaml"


def val_path(name: str) -> Path:
    return ZOO / name / "val.jsonl"


def read_val(name: str) -> list[dict]:
    return [json.loads(line) for line in val_path(name).read_text().splitlines() if line.strip()]


def split() -> dict[str, list[str]]:
    """{"heldout": [...], "dev": [...]} from split.json."""
    data = json.loads((ZOO / "split.json").read_text())
    return {"heldout": list(data["heldout"]), "dev": list(data["dev"])}


def server_of(name: str) -> str:
    """The `workflow_args.server` of a server's YAML, interpolations (`${oc.env:HOME}`) resolved."""
    from ajet.config.loader import load_config

    cfg = load_config(str(yaml_path(name)), [])
    return cfg.workflow_args["server"]


def system_prompt_of(name: str) -> str:
    from ajet.config.loader import load_config

    return load_config(str(yaml_path(name)), []).workflow_args["system_prompt"]
