"""The framework tutorials (tutorial/example_frameworks): each agent, unmodified, through ajet's gateway.

Per framework (its real package, real HTTP on 127.0.0.1, the tiny random model writing the gold turns
under a regex, so every token and logprob is the model's own): the first attempt of the first call
fails (503), so the framework's client retries it; then the agent calls two tools in one turn
(parallel calls) and answers. Checked: the recorded tokens and logprobs are the engine's, the failed
attempt left nothing behind, the calls merged into the samples the framework's history allows (one;
smolagents rewrites its history: one per call), and each sample's loss mask covers exactly the model's
tokens. One framework's own client timeout is run too (slower: it waits for the timeout). And
make_data.py's tasks reproduce the shipped train/val files.
"""

from __future__ import annotations

import ast
import asyncio
import json
from pathlib import Path

import pytest

from ajet import Task, Tuner
from ajet.engine.base import SamplingParams
from ajet.jsonl import write_jsonl_files
from ajet.plugins import load_object
from ajet.tracker.merge import build_samples
from tests.unit.gw_helpers import GuidedScript, open_episode, running_gateway

FOLDER = Path(__file__).resolve().parents[2] / "tutorial" / "example_frameworks"
FrameworkWorkflow = load_object(f"{FOLDER / 'adapters.py'}:FrameworkWorkflow")  # puts the folder on sys.path
ADAPTER_FRAMEWORKS = load_object(f"{FOLDER / 'adapters.py'}:FRAMEWORKS")
# By file path, not `import make_data`: every tutorial has a make_data.py, and sys.modules keeps the first one.
tasks = load_object(f"{FOLDER / 'make_data.py'}:tasks")
gold_turns = load_object(f"{FOLDER / 'make_data.py'}:gold_turns")

# framework -> (the package it needs, the modules its agent file must import, one sample per episode?)
FRAMEWORKS = {
    "openai_agents": ("agents", {"agents", "openai"}, True),
    "langgraph": ("langgraph", {"langgraph.prebuilt", "langchain_openai"}, True),
    "smolagents": ("smolagents", {"smolagents"}, False),
    "pydantic_ai": ("pydantic_ai", {"pydantic_ai", "pydantic_ai.models.openai"}, True),
    "ag2": ("ag2", {"ag2", "ag2.config"}, True),
}
# The timeout test's client timeout: a call of the tiny model takes well under a second on a quiet machine;
# on a loaded one a call may outlast it too, and the client retries it (up to RETRIES times).
TIMEOUT_S, RETRIES = 20.0, 4


def test_this_file_covers_every_framework_of_the_adapter():
    assert list(FRAMEWORKS) == list(ADAPTER_FRAMEWORKS)


def test_make_data_tasks_reproduce_the_shipped_splits(tmp_path):
    # the SFT files need every framework run through the gateway (minutes); the splits are cheap
    train, val = tasks()
    write_jsonl_files(tmp_path, {"train": train, "val": val})
    for name in ("train", "val"):
        assert (tmp_path / f"{name}.jsonl").read_bytes() == (FOLDER / f"{name}.jsonl").read_bytes(), name


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_each_agent_file_imports_its_framework_and_nothing_of_ajet(framework):
    tree = ast.parse((FOLDER / f"{framework}_agent.py").read_text())
    modules = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    modules |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert not any(m.split(".")[0] == "ajet" for m in modules)
    assert FRAMEWORKS[framework][1] <= modules


@pytest.fixture(scope="module")
def tiny_engine(tiny_model_path):
    from ajet.engine.hf import HFEngine

    engine = HFEngine.from_pretrained(tiny_model_path, device="cpu")
    warm = GuidedScript(engine, ["warm up the regex matcher"])  # its first build takes seconds
    asyncio.run(warm.generate(engine.tokenizer("hi")["input_ids"], SamplingParams()))
    return engine


@pytest.mark.parametrize("framework", FRAMEWORKS)
async def test_framework_agent_through_the_gateway_is_token_exact(framework, tiny_engine):
    await run_and_check(framework, tiny_engine, fail={0})


async def test_a_framework_timeout_leaves_no_sample_behind(tiny_engine):
    await run_and_check("openai_agents", tiny_engine, stall={0}, timeout_s=TIMEOUT_S)


async def run_and_check(framework, tiny_engine, *, timeout_s: float = 600.0, **faults) -> None:
    package, _, merges = FRAMEWORKS[framework]
    pytest.importorskip(package, reason=f"pip install -e '.[frameworks]' ({package})")
    task = next(t for t in tasks()[0] if t["metadata"]["category"] == "price_and_stock")
    script = gold_turns(task, framework)
    engine = GuidedScript(tiny_engine, script, **faults)
    async with running_gateway(engine, tiny_engine.tokenizer) as (gateway, url):
        session, issue = open_episode(gateway, max_tokens=256)
        workflow = FrameworkWorkflow(framework=framework, timeout_s=timeout_s, max_retries=RETRIES)
        out = await workflow.execute(Task(task_id=task["task_id"], query=task["query"], answer=task["answer"]),
                                     Tuner(url, "policy", issue))
    price, stock = task["answer"]["numbers"]
    assert f"{price}" in out.answer and f"{stock}" in out.answer, out
    calls = session.tracker.calls
    # the failed (or timed-out, cancelled) attempt was retried by the framework and recorded nothing
    assert engine.attempts >= len(script) + 1 and len(calls) == len(engine.generations) == len(script)
    for call, (prompt, generation) in zip(calls, engine.generations):
        assert call.prompt_ids == prompt
        assert call.completion_ids == generation.token_ids and call.completion_logprobs == generation.logprobs
    samples, stats = build_samples(calls, reward=1.0, group_id="g", episode_id="e", task_id=task["task_id"])
    assert len(samples) == (1 if merges else len(calls)), stats.to_dict()
    for sample in samples:
        trained = [i for i, m in enumerate(sample.loss_mask) if m]
        own = [c for c in calls if c.index in sample.meta["calls"]]
        assert [sample.input_ids[i] for i in trained] == [t for c in own for t in c.completion_ids]
        assert [sample.old_logprobs[i] for i in trained] == [lp for c in own for lp in c.completion_logprobs]
    # the parallel calls came back as one turn of two calls, in the order the model wrote them (smolagents
    # writes them into its history sorted by id: the gateway's ids sort in the order written)
    turn = json.dumps([m for m in calls[1].messages if m["role"] == "assistant"][-1])
    assert "get_price" in turn and turn.index("get_price") < turn.index("get_stock")
