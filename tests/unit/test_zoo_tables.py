"""The zoo's results as the docs give them (benchmarks/mcp_zoo/README.md, docs/mcp_pipeline.md, the MCP
tutorial's README) against benchmarks/results/mcp_zoo.jsonl, which `mcp_zoo.py --summary` reads: each
table's figure per server is that server's newest result of the tutorial's recipe, and the means are the
summary's."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import mcp_zoo  # noqa: E402

from ajet.jsonl import read_rows  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "mcp_zoo.jsonl"
# each page's table of the default recipe: its header, and the column of the trained figure
TABLES = {
    "benchmarks/mcp_zoo/README.md": "| server | split | tools with a kept call | tasks | base | after SFT | minutes |",
    "docs/mcp_pipeline.md": "| server | split | tools with a kept call | base | after SFT |",
    "tutorial/example_mcp_pipeline/README.md": "| server | split | base | after SFT |",
}


def _table(page: str, header: str) -> dict[str, str]:
    """server -> the bold figure of its row in the table under `header`."""
    lines = (ROOT / page).read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    rows = {}
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        server = re.match(r"\| `([a-z_]+)`", line)[1]
        rows[server] = re.search(r"\*\*(\d\.\d{3})\*\*", line)[1]
    return rows


@pytest.fixture(scope="module")
def newest() -> dict[str, dict]:
    return mcp_zoo.newest_of_recipe(read_rows(RESULTS))


@pytest.mark.parametrize("page", TABLES)
def test_each_table_gives_every_server_its_newest_result(page, newest):
    table = _table(page, TABLES[page])
    assert set(table) == set(mcp_zoo.zoo.SERVERS)
    assert table == {server: f"{row['trained_success']:.3f}" for server, row in newest.items()}


def test_the_means_the_pages_quote_are_the_summary_s(newest):
    last = mcp_zoo.summary(RESULTS).splitlines()[-1]
    heldout, dev = re.search(r"heldout_mean_success=(\S+) dev_mean_success=(\S+)", last).groups()
    assert last.startswith("heldout_mean_success=") and len(newest) == len(mcp_zoo.zoo.SERVERS)
    readme = (ROOT / "benchmarks/mcp_zoo/README.md").read_text()
    assert f"`heldout_mean_success={heldout} dev_mean_success={dev} " in readme
    for page in ("docs/mcp_pipeline.md", "tutorial/example_mcp_pipeline/README.md"):
        text = (ROOT / page).read_text()
        assert re.search(rf"[Hh]eld-out mean \**{heldout}\**", text), page
        assert f"dev mean {dev}" in text, page
