"""Chaos: a short `ajet eval` and a 3-step GRPO run on the tiny model while everything that can
misbehave does, and what survives.

In a set share of episodes the workflow raises, hangs, calls sys.exit, swallows its cancellation,
cancels itself or rewrites the Task it was given (query, answer, nested metadata: it must fool
neither the judge nor episodes.jsonl); the judge returns NaN for another share and a finite but huge
1e308 / -1e308 for another (judge failures, no other group loses its update); while the GRPO run
trains, a second `ajet` run on the same folder is started (it must be refused, exit 2, and the
first run's steps stay [1, 2, ...]); two kinds of episode call an MCP tool that returns 5 MB of text
or an image and send the result on to the model (cut to the limit, or a placeholder: the episode goes
on); every healthy episode first fires a barrage
of malformed requests at the gateway with its own key (the eight shapes that once gave 500s,
poisonous sampling parameters, deep JSON, NaN); and a client thread in this process fires malformed
requests at the gateway's port throughout (no key, bad keys, garbage bodies, wrong routes and
methods, a body that never finishes). Each run is an `ajet` subprocess, as a user runs it.

Then `ajet serve --enable-lora` is sent five kinds of broken LoRA adapter (wrong shape, truncated
file, missing tensors, wrong rank, no config): each must be refused (400; 404 without a config, as
vLLM answers) and leave the base
model's greedy output as it was, and a good adapter must then load under the same name.

Then three more phases (issue 41):
- the code sandbox: every attack of tests/unit/sandbox_attacks.py (the audit hook switched off through
  gc, then writes outside the folder, a socket to a host port, fork and exec as root, the trainer's
  /proc/<pid>/environ, the task files with their answers, TIOCSTI, ...) run by `ajet.sandbox.run_python`;
  `sandbox_escapes` counts those that got out;
- `ajet view` on run folders made to break it (tests/unit/view_run.py: one line of `[` x 100,000, lines
  nested 990 deep, token ids that are strings or Infinity, sample rows of the wrong types, a FIFO, a link
  to /dev/zero, a link out of the folder, a YAML alias bomb as config.yaml): every route is requested;
  `viewer_500s` counts answers with status 500 and requests that got no answer within 30 s;
- `ajet generate explore` then `tasks --from-calls` on three bad MCP servers: a tool with a 1 MB
  description, 503 tools with generate.explore.max_calls=400, tools whose result changes between two
  identical calls (a clock, a random price); `generator_hangs` counts commands still running after
  GENERATE_LIMIT_S (killed then), and the line says how many tools got a call and how many tasks took a
  changing value as their `final` answer.

    python benchmarks/chaos.py [--steps 3] [--keep DIR] [--only sandbox,viewer,generator]

A run is completed when its command exits 0 with its report (eval.json; metrics.jsonl with steps
1..n exactly), no rewritten task leaked, every odd tool result was handled, and (GRPO) the second run
on its folder was refused; the adapter phase counts as a third run. Lost episodes: expected episodes (tasks x group size, per step) without their line in the
run's episodes file. Server 500s: answers with status 500 seen by either client.
Last line: `chaos_runs_completed=<k>/<n> lost_episodes=<m> server_500s=<s> sandbox_escapes=<e>
viewer_500s=<v> generator_hangs=<g>` (one line).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
KINDS = ["normal"] * 6 + ["raise", "hang", "exit", "swallow", "cancel", "judge_nan", "judge_huge", "mutate",
                          "tool_huge", "tool_image"]
# An MCP server whose tools return a 5 MB text and an image (the tool kinds call it before answering).
ODD_SERVER = ROOT / "tests" / "unit" / "mcp_servers" / "odd_results_server.py"
ODD_TOOLS = {"tool_huge": "huge_report", "tool_image": "product_photo"}
FORGED = 99.0  # the judge's reward for a task whose metadata the workflow rewrote: seen only if it leaked

WORKFLOW = '''
"""A workflow and a judge that misbehave on purpose, by task kind."""

import asyncio
import json
import sys

import httpx

from ajet import Judge, Workflow, WorkflowOutput

MALFORMED = [
    b'{"messages": ' + b"[" * 50_000 + b"]" * 50_000 + b"}",
    b'{"messages": [{"role": "user", "content": [{"type": "text", "text": 5}]}]}',
    b'{"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "tool_calls": 5}]}',
    b'{"messages": [{"role": "assistant", "tool_calls": [{"function": "f"}]}]}',
    b'{"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function", "function": null}]}',
    b'{"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function", "function": "f"}]}',
    b'{"messages": [{"role": "user", "content": "x"}], "seed": 18446744073709551616}',
    b'{"messages": [{"role": "user", "content": "x"}], "temperature": 1e-300}',
    b'{"messages": [{"role": "user", "content": "x"}], "temperature": NaN}',
    b'{"messages": [{"role": "user", "content": "\\\\ud800"}]}',
    b'{"messages": "not a list"}',
    b"\\xff\\xfe not json",
]


class Chaos(Workflow):
    async def execute(self, task, tuner):
        kind = task.metadata["kind"]
        if kind == "raise":
            raise RuntimeError("tool server down")
        if kind == "hang":
            await asyncio.Event().wait()
        if kind == "exit":
            sys.exit(1)
        if kind == "cancel":
            raise asyncio.CancelledError()
        if kind == "swallow":
            try:
                await asyncio.sleep(600)
            except asyncio.CancelledError:
                pass
            await asyncio.sleep(600)
        if kind == "mutate":  # rewrite the task: later repeats, the judge and the log must not see it
            task.query, task.answer = "changed", "forged"
            task.metadata["kind"] = "forged"
            task.metadata.setdefault("deep", {"n": 0})["n"] += 1
        messages = [{"role": "user", "content": task.query}]
        tool_metrics = {}
        if kind.startswith("tool_"):  # a 5 MB or an image result goes back to the model, as the MCP agent does
            from ajet.mcp_client import call_tool, open_client

            name = task.metadata["tool"]
            async with open_client(task.metadata["server"]) as mcp:
                outcome = await call_tool(mcp, name, {})
            messages += [{"role": "assistant", "content": "", "tool_calls": [
                             {"id": "c1", "type": "function", "function": {"name": name, "arguments": "{}"}}]},
                         {"role": "tool", "tool_call_id": "c1", "content": outcome.content}]
            tool_metrics = {"tool_truncated": float(outcome.truncated), "tool_not_shown": float(outcome.not_shown),
                            "tool_chars": float(len(outcome.content))}
        statuses = []
        async with httpx.AsyncClient(timeout=60) as http:
            for body in MALFORMED:
                r = await http.post(f"{tuner.base_url}/chat/completions", content=body,
                                    headers={"Authorization": f"Bearer {tuner.api_key}"})
                statuses.append(r.status_code)
        client = tuner.openai_client()
        r = await client.chat.completions.create(model=tuner.model, messages=messages)
        return WorkflowOutput(answer=r.choices[0].message.content,
                              metrics={"malformed_sent": len(statuses), "malformed_500": statuses.count(500),
                                       **tool_metrics})


class NanJudge(Judge):
    def __init__(self):
        super().__init__()
        self.calls = 0

    async def score(self, task, output):
        kind = task.metadata["kind"]
        if kind == "judge_huge":
            self.calls += 1
            return 1e308 if self.calls % 2 else -1e308
        if kind == "forged":
            return 99.0  # FORGED: reached only if the workflow's rewrite leaked to the judge
        return float("nan") if kind == "judge_nan" else len(output.answer or "") / 20
'''


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _project(folder: Path) -> Path:
    (folder / "chaos_flow.py").write_text(WORKFLOW)
    rows = [{"query": f"Tell me about item {i}.", "kind": kind,
             **({"server": str(ODD_SERVER), "tool": ODD_TOOLS[kind]} if kind in ODD_TOOLS else {})}
            for i, kind in enumerate(KINDS)]
    (folder / "tasks.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (folder / "chaos.yaml").write_text(textwrap.dedent(f"""
        ajet:
          project: chaos
          model: {{path: tiny-random}}
          workflow: chaos_flow.py:Chaos
          task_reader: {{type: jsonl, train: tasks.jsonl, val: tasks.jsonl}}
          judge: {{type: chaos_flow.py:NanJudge}}
          algorithm: grpo
          rollout: {{group_size: 2, batch_tasks: {len(KINDS)}, max_tokens_per_turn: 8, max_turns: 2,
                    episode_timeout_s: 3, retries: 1}}
          trainer: {{save_every: 1, lr: 0.001}}
    """))
    return folder / "chaos.yaml"


class Heckler(threading.Thread):
    """Fires malformed requests at a port until stopped; counts the answers by status."""

    def __init__(self, port: int) -> None:
        super().__init__(daemon=True)
        self.port = port
        self.base = f"http://127.0.0.1:{port}"
        self.stop = threading.Event()
        self.statuses: dict[int, int] = {}
        self.rng = random.Random(0)

    def run(self) -> None:
        with httpx.Client(base_url=self.base, timeout=30) as http:
            while not self.stop.is_set():
                try:
                    self._one(http)
                except (httpx.HTTPError, OSError):  # the server is not up yet, or between stages
                    time.sleep(0.2)
                time.sleep(0.05)

    def _one(self, http: httpx.Client) -> None:
        pick = self.rng.randrange(7)
        keys = ["", "Bearer ", "Bearer ajet-forged", "Basic abc", "Bearer " + "x" * 5000]
        headers = {"Authorization": self.rng.choice(keys)}
        if pick == 0:
            r = http.post("/v1/chat/completions", content=os.urandom(self.rng.randrange(1, 400)), headers=headers)
        elif pick == 1:
            body = {"messages": [{"role": "user", "content": "x"}]}
            r = http.post("/v1/chat/completions", json=body, headers=headers)
        elif pick == 2:
            r = http.get(self.rng.choice(["/v1/nothing", "/", "/v1/chat/completions", "/docs"]))
        elif pick == 3:
            r = http.request(self.rng.choice(["PUT", "DELETE", "PATCH"]), "/v1/models")
        elif pick == 4:
            r = http.get("/v1/models")
        elif pick == 5:
            r = http.post("/v1/completions", content=b"[" * 20_000, headers=headers)
        else:
            self._stalled()
            return
        self.statuses[r.status_code] = self.statuses.get(r.status_code, 0) + 1

    def _stalled(self) -> None:
        """Declare 1000 body bytes, send 10, hang up."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=5) as s:
            s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{\"messag")
            time.sleep(0.2)


def _ajet(args: list[str], port: int, log: Path, intrude: list[str] | None = None,
          lock: Path | None = None) -> tuple[int, float, dict[int, int], tuple[int, str] | None]:
    """Run one `ajet` command while the heckler fires; with `intrude`, start that second command on the
    same folder once the first holds `lock`, and return its exit code and output too."""
    heckler = Heckler(port)
    heckler.start()
    started = time.perf_counter()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    intruder = None
    with log.open("w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "ajet.cli", *args, f"gateway.port={port}"], cwd=ROOT,
                                stdout=out, stderr=subprocess.STDOUT, env=env)
        if intrude is not None and lock is not None:
            while proc.poll() is None and not (lock.is_file() and f'"pid": {proc.pid}' in lock.read_text()):
                time.sleep(0.05)
            second = subprocess.run([sys.executable, "-m", "ajet.cli", *intrude], cwd=ROOT, capture_output=True,
                                    text=True, env=env)
            intruder = (second.returncode, second.stdout + second.stderr)
        proc.wait()
    heckler.stop.set()
    heckler.join(30)
    return proc.returncode, time.perf_counter() - started, heckler.statuses, intruder


def _bad_adapters(folder: Path) -> tuple[bool, dict[int, int], str]:
    """`ajet serve --enable-lora`: five kinds of broken adapter must each be refused (400; 404 for a folder
    without adapter_config.json, as vLLM answers) and leave the base
    model's greedy output as it was; a good adapter then loads under the same name."""
    sys.path.insert(0, str(ROOT))
    from ajet.models import resolve_model_path
    from tests.e2e.serve_process import ajet_serve
    from tests.unit import bad_adapters

    tiny = resolve_model_path("tiny-random")
    breakers = [bad_adapters.wrong_shape, bad_adapters.truncated, bad_adapters.missing_tensors,
                bad_adapters.wrong_rank, bad_adapters.no_config]
    body = {"model": "tiny", "prompt": [1, 2, 3, 4, 5], "max_tokens": 6, "temperature": 0}
    refused = unchanged = 0
    statuses: dict[int, int] = {}
    with ajet_serve("tiny-random", folder / "serve.log", "--enable-lora") as url:
        def greedy() -> str:
            return httpx.post(f"{url}/completions", json=body, timeout=120).json()["choices"][0]["text"]

        def load(path: Path) -> int:
            r = httpx.post(f"{url}/load_lora_adapter", json={"lora_name": "chaos", "lora_path": str(path)}, timeout=120)
            statuses[r.status_code] = statuses.get(r.status_code, 0) + 1
            return r.status_code

        base = greedy()
        for n, breaker in enumerate(breakers):
            adapter = bad_adapters.save_adapter(tiny, folder / f"adapter-{n}", seed=n)
            breaker(adapter)
            refused += load(adapter) in (400, 404)  # 404: no adapter config at the path, as vLLM answers
            unchanged += greedy() == base
        good = load(bad_adapters.save_adapter(tiny, folder / "adapter-good", seed=99)) == 200
    ok = refused == unchanged == len(breakers) and good
    return ok, statuses, (f"bad adapters: {refused}/{len(breakers)} refused (400, or 404 without a config) · base output unchanged after "
                          f"{unchanged}/{len(breakers)} · a good adapter then loads under the same name: {good}")


def _sandbox_escapes(folder: Path) -> tuple[int, str]:
    """Every attack of tests/unit/sandbox_attacks.py through run_python; (escapes, a line)."""
    sys.path.insert(0, str(ROOT))
    from ajet.sandbox import bwrap
    from tests.unit.sandbox_attacks import attacks, run_attacks

    why = bwrap.unavailable()
    if why is not None:  # run_python refuses to run at all: nothing can escape, and the line says why
        return 0, f"sandbox: run_python refuses to run here ({why}); no attack ran"
    outside = folder / "sandbox-outside"
    outside.mkdir(parents=True, exist_ok=True)
    escaped = run_attacks(outside)
    total = len(attacks(outside, 0))
    return len(escaped), f"sandbox: {total - len(escaped)}/{total} attacks held with the audit hook off" + (
        f" · ESCAPED: {', '.join(escaped)}" if escaped else "")


def _viewer_bad_files(folder: Path) -> tuple[int, str]:
    """`ajet view` on the hostile run folders; every route requested: (500s and unanswered, a line)."""
    sys.path.insert(0, str(ROOT))
    from tests.unit.view_run import ajet_view, build_hostile_folders

    base = folder / "viewer"
    base.mkdir(parents=True, exist_ok=True)
    runs = build_hostile_folders(base)
    statuses: dict[str, int] = {}
    routes = ["runs", "runs/0/metrics", "runs/1/metrics"]
    routes += [f"runs/{r}/episodes?file={f}" for r in (0, 1) for f in ("episodes", "val_episodes", "eval_episodes")]
    routes += [f"runs/0/episodes/{n}{tail}" for n in range(1, 10) for tail in ("", "/tokens")]
    routes += [f"runs/0/compare?a=1&b={n}" for n in range(1, 10)]
    with ajet_view([runs["bad"], runs["special"]], base / "view.log") as url:
        for route in routes:
            try:
                status = str(httpx.get(url + "api/" + route, timeout=30).status_code)
            except httpx.HTTPError as exc:
                status = type(exc).__name__  # no answer: as bad as a 500, counted with them
            statuses[status] = statuses.get(status, 0) + 1
    bad = sum(n for status, n in statuses.items() if not status.isdigit() or status.startswith("5"))
    return bad, f"viewer: {len(routes)} requests on hostile run folders · answers {dict(sorted(statuses.items()))}"


GENERATE_LIMIT_S = 180  # the 1 MB description ran past 15 minutes before the fix
GENERATOR_SERVERS = {
    "huge_description": '''
from fastmcp import FastMCP

mcp = FastMCP("huge-description")


@mcp.tool(description="Look up a value for a code. " + "ab" * 500_000)  # 1 MB, no space in it
def lookup(code: str = "A1") -> dict:
    return {"price": 12.5, "code": code}
''',
    "many_tools": '''
from fastmcp import FastMCP

mcp = FastMCP("many-tools")


def _tool(i):
    def tool(n: int = 1) -> dict:
        return {"value": i * n}

    tool.__name__, tool.__doc__ = f"item_{i:03d}", f"The value of item {i}, times n."
    return tool


for _i in range(503):
    mcp.tool(_tool(_i))
''',
    "changing": '''
import random
import time

from fastmcp import FastMCP

mcp = FastMCP("changing")


@mcp.tool
def current_time() -> dict:
    """The current time of day."""
    return {"time": time.strftime("%H:%M:%S") + f".{time.time_ns() % 10**6:06d}"}


@mcp.tool
def quote(item: str = "apple") -> dict:
    """Today's price quote for an item."""
    return {"item": item, "price": round(random.uniform(1, 1000), 2)}
''',
}


def _generator_bad_servers(folder: Path) -> tuple[int, str]:
    """explore, then tasks --from-calls, on each bad server, each command under GENERATE_LIMIT_S:
    (commands that hung, a line per server)."""
    hangs, lines = 0, []
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for name, source in GENERATOR_SERVERS.items():
        where = folder / "generator" / name
        where.mkdir(parents=True, exist_ok=True)
        (where / "server.py").write_text(source)
        (where / "gen.yaml").write_text(textwrap.dedent("""
            defaults:
              - workflow: mcp_agent
            ajet:
              project: chaos-generate
              model: {path: tiny-random}
              workflow_args: {server: server.py}
              generate:
                teacher: self
                explore: {max_calls: 400}
                tasks: {phrasing: template, round_trip: false}
        """))
        steps = [["explore", "--out", "calls.jsonl"], ["tasks", "--from-calls", "calls.jsonl", "-n", "10", "--out", "tasks.jsonl"]]
        said, listed = [], "?"
        for step in steps:
            started = time.perf_counter()
            try:
                done = subprocess.run([sys.executable, "-m", "ajet.cli", "generate", step[0], "--conf", "gen.yaml",
                                       "--fresh", *step[1:]], cwd=where, env=env, capture_output=True, text=True,
                                      timeout=GENERATE_LIMIT_S)
            except subprocess.TimeoutExpired:
                hangs += 1
                said.append(f"{step[0]}: HUNG (killed after {GENERATE_LIMIT_S} s)")
                break
            said.append(f"{step[0]}: exit {done.returncode} in {time.perf_counter() - started:.0f} s")
            if step[0] == "explore" and done.stdout.strip():
                try:  # its last line is the summary: {"tools": N, "kept": ..., "no_working_call": {...}}
                    listed = json.loads(done.stdout.strip().splitlines()[-1]).get("tools", "?")
                except ValueError:
                    pass
            if done.returncode != 0:
                said[-1] += f" ({(done.stderr.strip().splitlines() or [''])[-1][:160]})"
                break
        calls, tasks = _episodes(where / "calls.jsonl"), _episodes(where / "tasks.jsonl")
        tried = {c.get("tool") or c.get("name") for c in calls}
        said.append(f"tools with a kept call {len(tried - {None})}/{listed}")
        if name == "changing":
            finals = sum(1 for t in tasks if isinstance(t.get("answer"), dict) and "final" in t["answer"])
            said.append(f"tasks whose final answer is a value that changes between calls {finals}/{len(tasks)}")
        lines.append(f"generator/{name}: " + " · ".join(said))
    return hangs, "\n".join(lines)


def _episodes(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--keep", metavar="DIR", help="keep the runs in DIR (default: a temporary folder)")
    parser.add_argument("--only", metavar="A,B", help="run only these phases of: runs, adapters, sandbox, viewer, "
                        "generator (default: all)")
    args = parser.parse_args()
    folder = Path(args.keep or tempfile.mkdtemp(prefix="ajet-chaos-"))
    folder.mkdir(parents=True, exist_ok=True)
    phases = set(args.only.split(",")) if args.only else {"runs", "adapters", "sandbox", "viewer", "generator"}
    conf = _project(folder)
    completed, lost, server_500s = 0, 0, 0
    runs = [
        ("eval", ["eval", "--conf", str(conf), f"output_dir={folder / 'eval'}"], folder / "eval",
         "eval_episodes.jsonl", len(KINDS)),
        ("grpo", ["--conf", str(conf), f"trainer.steps={args.steps}", f"output_dir={folder / 'grpo'}"],
         folder / "grpo", "episodes.jsonl", args.steps * len(KINDS) * 2),
    ]
    for name, argv, out, episodes_file, expected in runs if "runs" in phases else []:
        # while GRPO trains, a second run on its folder: refused at once, the first run unharmed
        intrude = [*argv, f"gateway.port={_free_port()}"] if name == "grpo" else None
        rc, seconds, statuses, intruder = _ajet(argv, _free_port(), folder / f"{name}.log", intrude,
                                                 out / ".ajet.lock")
        episodes = _episodes(out / episodes_file)
        steps = [row.get("step") for row in _episodes(out / "metrics.jsonl")]
        report_ok = (out / "eval.json").is_file() if name == "eval" else steps == list(range(1, args.steps + 1))
        refused = intruder is None or (intruder[0] == 2 and "is in use by another live run" in intruder[1])
        # a rewritten task that reached the judge (reward 99) or the log (query "changed") leaked
        leaks = sum(1 for e in episodes if e.get("reward") == FORGED or e.get("task", {}).get("query") == "changed"
                    or e.get("task", {}).get("metadata", {}).get("kind") == "forged")
        # a 5 MB or image tool result: the episode goes on, with the result cut or a placeholder
        tools_ok = sum(1 for e in episodes if e.get("task", {}).get("metadata", {}).get("kind") in ODD_TOOLS
                       and not e.get("error") and (e.get("metrics", {}).get("tool_truncated")
                                                   or e.get("metrics", {}).get("tool_not_shown")))
        tools_expected = sum(1 for e in episodes if e.get("task", {}).get("metadata", {}).get("kind") in ODD_TOOLS)
        completed += rc == 0 and report_ok and refused and leaks == 0 and tools_ok == tools_expected
        missing = max(expected - len(episodes), 0)
        lost += missing
        inner = [e.get("metrics", {}) for e in episodes]
        inner_sent = int(sum(m.get("malformed_sent", 0) for m in inner))
        inner_500 = int(sum(m.get("malformed_500", 0) for m in inner))
        server_500s += statuses.get(500, 0) + inner_500
        errors: dict[str, int] = {}
        for e in episodes:
            kind = (e.get("error") or e.get("judge_error") or "ok").split(":")[0]
            errors[kind] = errors.get(kind, 0) + 1
        concurrent = "" if intruder is None else f" · second run on its folder: exit {intruder[0]}" + (
            " (refused)" if refused else f" (NOT refused: {intruder[1][-300:]!r})")
        print(f"{name}: exit {rc} in {seconds:.0f} s · episodes {len(episodes)}/{expected} · outcomes {errors} · "
              f"task leaks {leaks} · odd tool results handled {tools_ok}/{tools_expected} · malformed with keys {inner_sent} (500s: {inner_500}) · heckler "
              f"{dict(sorted(statuses.items()))}{concurrent}")
        if rc != 0:
            print((folder / f"{name}.log").read_text()[-2000:])
    if "adapters" in phases:
        adapters_ok, adapter_statuses, line = _bad_adapters(folder)
        print(line)
        completed += adapters_ok
        server_500s += adapter_statuses.get(500, 0)
    expected_runs = len(runs) * ("runs" in phases) + ("adapters" in phases)
    bad = {"sandbox": 0, "viewer": 0, "generator": 0}  # escapes, 500s (and no answers), hung commands
    for phase, run_phase in (("sandbox", _sandbox_escapes), ("viewer", _viewer_bad_files),
                             ("generator", _generator_bad_servers)):
        if phase in phases:
            bad[phase], line = run_phase(folder)
            print(line, flush=True)
    print(f"runs in {folder}")
    print(f"chaos_runs_completed={completed}/{expected_runs} lost_episodes={lost} server_500s={server_500s} "
          f"sandbox_escapes={bad['sandbox']} viewer_500s={bad['viewer']} generator_hangs={bad['generator']}")


if __name__ == "__main__":
    main()
