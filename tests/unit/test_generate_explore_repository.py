"""`ajet generate explore` on servers shaped like a repository's.

- Tools that change state: those that say they only read (MCP `readOnlyHint`) are explored before
  those that write, so every reading in the bank shows the state the agent will meet, not the one the
  explorer's own checkout left. The same server without annotations is the control: there a checkout
  runs first and the readings show its branch.
- Hex digests: a commit id the log returned is also called abbreviated ('5ec3757'), as users say it,
  and kept only where the server answers the short form."""

from __future__ import annotations

import hashlib
import textwrap
from pathlib import Path

import pytest

from ajet.config.loader import load_config
from ajet.generate.explore import explore_server
from ajet.jsonl import read_rows

SERVER = '''
from fastmcp import FastMCP

mcp = FastMCP("notebook")
STATE = {{"branch": "main", "staged": ["notes.md"]}}
BRANCHES = ["main", "feature/soil", "fix/frost"]


@mcp.tool(annotations={writes})
def switch_branch(branch_name: str) -> str:
    """Switch to a branch; a new name makes a new branch."""
    STATE["branch"] = branch_name
    if branch_name not in BRANCHES:
        BRANCHES.append(branch_name)
    return f"Switched to {{branch_name}}"


@mcp.tool(annotations={writes})
def unstage_all() -> str:
    """Unstage every staged file."""
    STATE["staged"] = []
    return "Unstaged all files"


@mcp.tool(annotations={reads})
def status() -> dict:
    """The current branch and the staged files."""
    return {{"branch": STATE["branch"], "staged": list(STATE["staged"]), "branches": len(BRANCHES)}}


if __name__ == "__main__":
    mcp.run(show_banner=False)
'''


def explore_yaml(tmp_path: Path, annotated: bool) -> Path:
    hints = ({"writes": '{"readOnlyHint": False}', "reads": '{"readOnlyHint": True}'} if annotated
             else {"writes": "None", "reads": "None"})
    server = tmp_path / "notebook_server.py"
    server.write_text(textwrap.dedent(SERVER.format(**hints)))
    conf = tmp_path / "explore.yaml"
    conf.write_text(f"defaults:\n  - workflow: mcp_agent\najet:\n  workflow_args:\n    server: {server}\n")
    return conf


@pytest.mark.parametrize("annotated", [True, False])
async def test_readers_are_explored_before_writers_when_the_server_says_which(tmp_path, annotated):
    out = tmp_path / "calls.jsonl"
    report = await explore_server(load_config(explore_yaml(tmp_path, annotated)), out)
    kept = read_rows(out)
    readings = [row["result"] for row in kept if row["tool"] == "status"]
    assert readings and {"switch_branch", "unstage_all"} <= set(report.per_tool)
    original = {"branch": "main", "staged": ["notes.md"], "branches": 3}
    if annotated:
        assert all(reading == original for reading in readings)
        # the writers still got their share of the calls, after every reading
        first_write = min(i for i, row in enumerate(kept) if row["tool"] != "status")
        assert max(i for i, row in enumerate(kept) if row["tool"] == "status") < first_write
    else:  # the control: the server's own listing order, a checkout before the first reading
        assert any(reading != original for reading in readings)


LOG_SERVER = '''
from fastmcp import FastMCP

mcp = FastMCP("history")
COMMITS = {{hashlib.sha1(m.encode()).hexdigest(): m for m in ("Add plant list", "Fix frost dates", "Release 0.3.0")}}


@mcp.tool
def log() -> list[dict]:
    """The commits, newest first."""
    return [{{"commit": c, "message": m}} for c, m in COMMITS.items()]


@mcp.tool
def show(revision: str) -> dict:
    """Show one commit."""
    found = [c for c in COMMITS if c.startswith(revision) and len(revision) >= {shortest}]
    if len(found) != 1:
        raise ValueError(f"unknown revision {{revision!r}}")
    return {{"commit": found[0], "message": COMMITS[found[0]]}}


if __name__ == "__main__":
    mcp.run(show_banner=False)
'''


@pytest.mark.parametrize("short_forms", [True, False])
async def test_commit_ids_are_also_called_abbreviated_where_the_server_takes_them(tmp_path, short_forms):
    server = tmp_path / "history_server.py"
    server.write_text("import hashlib\n" + textwrap.dedent(LOG_SERVER.format(shortest=4 if short_forms else 40)))
    conf = tmp_path / "explore.yaml"
    conf.write_text(f"defaults:\n  - workflow: mcp_agent\najet:\n  workflow_args:\n    server: {server}\n")
    out = tmp_path / "calls.jsonl"
    await explore_server(load_config(conf), out)
    shows = [row for row in read_rows(out) if row["tool"] == "show"]
    whole = {row["arguments"]["revision"] for row in shows if len(row["arguments"]["revision"]) == 40}
    short = {row["arguments"]["revision"]: row["result"] for row in shows if len(row["arguments"]["revision"]) < 40}
    assert len(whole) == 3
    if short_forms:  # every other known id, sorted: two of three, each answered as the whole id is
        assert sorted(short) == [c[:7] for c in sorted(whole)[::2]]
        assert all(result["commit"].startswith(revision) for revision, result in short.items())
    else:
        assert short == {}
