"""docs/training.md's "What RL adds, measured" against benchmarks/results/rl_gain.jsonl, which
`python benchmarks/rl_gain.py --summary` prints: the table is what the results file says, and what the
summary prints is in the section."""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import rl_gain  # noqa: E402

# | task | measure | held-out | SFT | SFT + RL (seeds) | gain, points [95% CI] | RL settings |
ROW = re.compile(r"^\| (?P<task>[^|]+) \| [^|]+ \| (?P<n>\d+) \| (?P<sft>\d\.\d{3})(?: \([^)]*\))? \| "
                 r"(?P<rl>\d\.\d{3} / \d\.\d{3})(?: \([^)]*\))? \| \**(?P<gain>[+-]\d+\.\d \[[+-]?\d+\.\d, [+-]?\d+\.\d\])")


def _section() -> str:
    text = (ROOT / "docs" / "training.md").read_text()
    start = text.index("## What RL adds, measured")
    return text[start:text.index("\n## ", start + 1)]


def _figures(row: dict) -> tuple[int, str, str, str]:
    """A results row as the summary prints it: tasks, SFT, the seeds, the gain and its interval."""
    return (row["tasks"], f"{row['sft']:.3f}", " / ".join(f"{v:.3f}" for v in row["rl"]),
            f"{row['gain_points']:+.1f} [{row['ci_low']:+.1f}, {row['ci_high']:+.1f}]")


def _table() -> list[tuple[str, tuple[int, str, str, str]]]:
    rows = [m for m in map(ROW.match, _section().splitlines()) if m]
    return [(m["task"], (int(m["n"]), m["sft"], m["rl"], m["gain"])) for m in rows]


def test_every_row_of_the_table_is_a_row_of_the_results_file():
    results = {_figures(row) for row in rl_gain.read_rows(rl_gain.RESULTS)}
    table = _table()
    assert len(table) >= 20  # the table was found and read, not skipped
    assert [task for task, figures in table if figures not in results] == []


def test_the_bold_rows_are_the_rows_the_summary_counts():
    counted = {task: row for (task, variant), row in
               rl_gain.latest_results(rl_gain.read_rows(rl_gain.RESULTS)).items() if not variant}
    bold = {task.strip("*"): figures for task, figures in _table() if task.startswith("**")}
    assert bold == {task: _figures(counted[task]) for task in bold}
    # every task whose counted interval is above 0 is one of the bold rows
    assert {task for task, row in counted.items() if row["significant"]} <= set(bold)


def test_the_summary_s_rows_and_last_line_are_in_the_section(capsys):
    section = _section()
    latest = rl_gain.latest_results(rl_gain.read_rows(rl_gain.RESULTS))
    assert [key for key, row in latest.items() if _figures(row)[3] not in section] == []
    mean, with_gain, tasks = rl_gain.summary(rl_gain.RESULTS)
    capsys.readouterr()
    assert f"rl_gain_points_mean={mean:.1f} tasks_with_gain={with_gain}/{tasks}" in section
