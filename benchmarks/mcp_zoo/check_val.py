"""Check every hand-written val reference of the zoo by really calling its server.

    python benchmarks/mcp_zoo/check_val.py [--servers git,helpdesk]

For each question: the row has the shape the judges read (`answer: {calls, final}`,
`metadata.category`, `metadata.num_calls` = the number of calls), every gold call runs through
`ajet.mcp_client` (the agent's own client: stdio for a published server, in memory for
one written here) without an error, and the final value is in the last call's result: a number
written in it (within 1e-4 of the final), else the final's text (case-insensitive). The fixtures
are rebuilt first, so the git server starts from its pristine repository. A published server whose
venv is missing (setup.py not run) is skipped and named. Last line: `verified=<k>/<n> servers=<s>
skipped=<names>`; exit 1 when a reference fails.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import zoo_fixtures  # noqa: E402
from zoo import FIXTURES, PUBLISHED, SERVERS, read_val, server_of, yaml_path  # noqa: E402

from ajet.judge.numbers import numbers_in, parse_number  # noqa: E402
from ajet.mcp_client import call_tool, open_client  # noqa: E402

REL_TOL = 1e-4


@dataclass
class Report:
    name: str
    checked: int = 0
    failures: list[str] = field(default_factory=list)
    skipped: str | None = None


def row_problem(row: dict[str, Any]) -> str | None:
    """Why a val row does not have the judges' shape, or None."""
    answer, meta = row.get("answer"), row.get("metadata")
    if not isinstance(row.get("task_id"), str) or not isinstance(row.get("query"), str) or not row["query"].strip():
        return "task_id and query must be strings"
    if not isinstance(answer, dict) or not isinstance(answer.get("calls"), list) or not answer["calls"]:
        return "answer.calls must be a non-empty list"
    if "final" not in answer or answer["final"] in (None, ""):
        return "answer.final is missing"
    for call in answer["calls"]:
        if not isinstance(call, dict) or not isinstance(call.get("name"), str) or not isinstance(call.get("arguments"), dict):
            return f"call {call!r} is not {{'name': str, 'arguments': dict}}"
    if not isinstance(meta, dict) or not meta.get("category") or meta.get("num_calls") != len(answer["calls"]):
        return "metadata needs category and num_calls equal to the number of calls"
    return None


def states(content: str, final: Any) -> bool:
    """Whether a result's text holds the final value: a number within REL_TOL, else the text."""
    if isinstance(final, list):
        return any(states(content, option) for option in final)
    number = parse_number(final)
    if number is not None:
        return any(abs(found - number) <= REL_TOL * abs(number) + 1e-12 for found in numbers_in(content))
    return str(final).strip().casefold() in content.casefold()


async def check_server(name: str) -> Report:
    report = Report(name)
    published = PUBLISHED.get(name)
    if published is not None and not published.executable(name).exists():
        report.skipped = f"{published.requirement} is not installed (run benchmarks/mcp_zoo/setup.py)"
        return report
    if published is not None and published.fixtures:
        zoo_fixtures.build(FIXTURES, list(published.fixtures))
    rows = read_val(name)
    async with open_client(server_of(name), yaml_path(name).parent) as client:
        for row in rows:
            report.checked += 1
            problem = row_problem(row)
            outcome = None
            for call in ([] if problem else row["answer"]["calls"]):
                outcome = await call_tool(client, call["name"], call["arguments"], timeout_s=60)
                if outcome.error is not None:
                    problem = f"{call['name']}({call['arguments']}) failed: {outcome.error[:200]}"
                    break
            if problem is None and not states(outcome.content, row["answer"]["final"]):
                problem = f"final {row['answer']['final']!r} is not in the result: {outcome.content[:300]!r}"
            if problem is not None:
                report.failures.append(f"{row.get('task_id')}: {problem}")
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--servers", default=",".join(SERVERS))
    args = parser.parse_args(argv)
    names = [n for n in args.servers.split(",") if n]
    unknown = [n for n in names if n not in SERVERS]
    if unknown:
        parser.error(f"unknown zoo server(s): {', '.join(unknown)} (known: {', '.join(SERVERS)})")
    reports = [asyncio.run(check_server(name)) for name in names]
    for r in reports:
        if r.skipped:
            print(f"{r.name:14s} skipped: {r.skipped}")
            continue
        print(f"{r.name:14s} {r.checked - len(r.failures)}/{r.checked} references verified")
        for failure in r.failures:
            print(f"    {failure}")
    ran = [r for r in reports if not r.skipped]
    ok = sum(r.checked - len(r.failures) for r in ran)
    print(f"verified={ok}/{sum(r.checked for r in ran)} servers={len(ran)} "
          f"skipped={','.join(r.name for r in reports if r.skipped) or 'none'}")
    return 1 if any(r.failures for r in ran) else 0


if __name__ == "__main__":
    sys.exit(main())
