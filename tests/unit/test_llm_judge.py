"""The llm_judge over real HTTP: a fake OpenAI-compatible judge server (FastAPI + uvicorn on
127.0.0.1) speaks `/v1/chat/completions` and answers JSON computed from the request, so the real
judge, the real `openai` SDK and real sockets are exercised. Other routes of the same server answer
garbage, fail once, fail with HTTP 500, or never answer in time."""

from __future__ import annotations

import asyncio
import re
import threading
import time

import pytest
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from ajet.config.schema import JudgeConfig
from ajet.errors import JudgeError
from ajet.judge import build_judge
from ajet.judge.llm_judge import _parse_ranking, _parse_score
from ajet.workflow import Task, WorkflowOutput


def _grade(section: str) -> float:
    """The fake judge's rule: 1.0 for a final answer naming Paris; out-of-range values on request."""
    final = section.split("[final answer]")[-1]
    if "OVER" in final:
        return 7.0
    if "UNDER" in final:
        return -3.0
    return 1.0 if "paris" in final.lower() else 0.25


def _completion(model: str, text: str) -> dict:
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


def make_app(log: list[dict]) -> FastAPI:
    app = FastAPI()
    flaky_seen: set[str] = set()

    @app.post("/{kind}/v1/chat/completions")
    async def chat(kind: str, request: Request):
        body = await request.json()
        log.append({"kind": kind, "body": body, "auth": request.headers.get("authorization")})
        system, user = body["messages"][0]["content"], body["messages"][1]["content"]
        model = body["model"]
        if kind == "slow":
            await asyncio.sleep(3)
        if kind == "error":
            return JSONResponse({"error": {"message": "boom", "type": "server_error"}}, status_code=500)
        if kind == "garbage" or (kind == "flaky" and model not in flaky_seen):
            flaky_seen.add(model)
            return _completion(model, "I think the agent did fine, maybe a seven out of ten?")
        if "You compare" in system:
            sections = re.split(r"^## Trajectory (\d+)$", user, flags=re.M)[1:]
            scores = {int(n): _grade(text) for n, text in zip(sections[::2], sections[1::2])}
            # Listed in reverse order, in a fence, after prose: the judge must sort by trajectory id.
            items = ", ".join(
                f'{{"trajectory": {i}, "score": {s}, "reason": "t{i}"}}' for i, s in sorted(scores.items(), reverse=True)
            )
            return _completion(model, f"Here is my ranking.\n```json\n[{items}]\n```\nDone.")
        score = _grade(user)
        return _completion(model, f'Sure. {{"score": {score}, "reason": "graded {score}"}} Hope that helps.')

    return app


@pytest.fixture(scope="module")
def judge_server():
    log: list[dict] = []
    config = uvicorn.Config(make_app(log), host="127.0.0.1", port=0, log_level="warning", lifespan="off",
                            timeout_graceful_shutdown=1)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline, "fake judge server did not start"
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    yield f"http://127.0.0.1:{port}", log
    server.should_exit = True
    thread.join(timeout=10)


_BUILT: list = []


@pytest.fixture(autouse=True)
async def close_judges():
    """Judges hold an HTTP client; close them on the test's own event loop."""
    yield
    while _BUILT:
        await _BUILT.pop().aclose()


def built(judge):
    _BUILT.append(judge)
    return judge


def llm(base: str, kind: str, **args):
    args = {"base_url": f"{base}/{kind}/v1", "model": f"judge-{kind}", "api_key": "sk-test", **args}
    return built(build_judge(JudgeConfig(type="llm_judge", args=args)))


TASK = Task(task_id="t", query="What is the capital of France?", answer="Paris")


def episode(answer: str) -> WorkflowOutput:
    return WorkflowOutput(
        answer=answer,
        messages=[
            {"role": "system", "content": "You are helpful."},
            {"role": "user", "content": TASK.query},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "search", "arguments": '{"q": "France"}'}}]},
            {"role": "tool", "tool_call_id": "c1", "name": "search", "content": "France: capital Paris"},
            {"role": "assistant", "content": answer},
        ],
    )


async def test_score_mode_over_http(judge_server):
    base, log = judge_server
    judge = llm(base, "good")
    assert judge.scores_groups is False
    good = await judge.score(TASK, episode("It is Paris."))
    assert good.total == 1.0 and good.parts == {"llm_score": 1.0} and good.feedback == "graded 1.0"
    bad = await judge.score(TASK, episode("It is Lyon."))
    assert bad.total == 0.25
    request = [r for r in log if r["body"]["model"] == "judge-good"][-1]
    assert request["auth"] == "Bearer sk-test"
    assert request["body"]["temperature"] == 0.0
    user = request["body"]["messages"][1]["content"]
    assert "## Task\nWhat is the capital of France?" in user
    assert "## Reference answer\nParis" in user
    assert '[assistant calls] search({"q": "France"})' in user
    assert "[tool search] France: capital Paris" in user
    assert "You are helpful." not in user  # the agent's system prompt is left out
    assert "A trajectory that achieves the user's goal" in request["body"]["messages"][0]["content"]


async def test_out_of_range_scores_are_clipped(judge_server):
    base, _ = judge_server
    judge = llm(base, "good", show_reference=False)
    assert (await judge.score(TASK, episode("OVER"))).total == 1.0  # 7 -> 1
    assert (await judge.score(TASK, episode("UNDER"))).total == 0.0  # -3 -> 0


async def test_rank_mode_scores_a_group_in_one_request(judge_server):
    base, log = judge_server
    judge = llm(base, "good", mode="rank", rubric="Prefer correct answers.")
    assert judge.scores_groups is True
    before = len(log)
    rewards = await judge.score_group(TASK, [episode("Lyon"), episode("Paris"), episode("Marseille")])
    assert [r.total for r in rewards] == [0.25, 1.0, 0.25]
    assert [r.feedback for r in rewards] == ["t1", "t2", "t3"]
    assert len(log) == before + 1
    system = log[-1]["body"]["messages"][0]["content"]
    assert "You compare 3 trajectories" in system and "Prefer correct answers." in system


async def test_composite_with_a_ranking_part_scores_groups(judge_server):
    base, _ = judge_server
    composite = built(build_judge(JudgeConfig(type="composite", args={"parts": [
        {"name": "ruler", "judge": {"type": "llm_judge", "args": {
            "base_url": f"{base}/good/v1", "model": "judge-good", "mode": "rank"}}, "weight": 0.5},
        {"name": "em", "judge": {"type": "exact_match", "args": {"mode": "contains"}}, "weight": 0.5},
    ]})))
    assert composite.scores_groups is True
    rewards = await composite.score_group(TASK, [episode("Lyon"), episode("Paris")])
    assert [r.total for r in rewards] == [0.125, 1.0]  # 0.5*0.25 + 0.5*0 and 0.5*1 + 0.5*1


async def test_unparseable_reply_retries_then_raises(judge_server):
    base, log = judge_server
    judge = llm(base, "garbage", max_retries=2)
    before = len(log)
    with pytest.raises(JudgeError) as info:
        await judge.score(TASK, episode("Paris"))
    assert len(log) == before + 3  # 1 try + 2 retries
    message = str(info.value)
    assert "llm_judge (judge-garbage at" in message and "gave no usable reply in 3 attempt(s)" in message
    assert 'no JSON object with a numeric "score" in the reply' in message


async def test_a_bad_reply_then_a_good_one_succeeds(judge_server):
    base, log = judge_server
    before = len(log)
    reward = await llm(base, "flaky", max_retries=1).score(TASK, episode("Paris"))
    assert reward.total == 1.0 and len(log) == before + 2


async def test_http_error_raises_judge_error(judge_server):
    base, _ = judge_server
    with pytest.raises(JudgeError, match="InternalServerError"):
        await llm(base, "error", max_retries=0).score(TASK, episode("Paris"))


async def test_slow_server_times_out(judge_server):
    base, _ = judge_server
    start = time.monotonic()
    with pytest.raises(JudgeError, match=r"no reply within timeout_s=0.3"):
        await llm(base, "slow", timeout_s=0.3, max_retries=1).score(TASK, episode("Paris"))
    assert time.monotonic() - start < 2.5  # two 0.3 s attempts, not the server's 3 s


async def test_unreachable_endpoint_raises_judge_error():
    judge = built(build_judge(JudgeConfig(type="llm_judge", args={
        "base_url": "http://127.0.0.1:9/v1", "model": "m", "max_retries": 0, "timeout_s": 2})))
    with pytest.raises(JudgeError, match="APIConnectionError"):
        await judge.score(TASK, episode("Paris"))


@pytest.mark.parametrize(
    "text, expected",
    [
        ('{"score": 0.4, "reason": "ok"}', (0.4, "ok")),
        ('```json\n{"score": "0.9"}\n```', (0.9, "")),
        ('Trajectory [1] was good. {"score": 1.5, "reason": "great"}', (1.0, "great")),
        ("0.3", (0.3, "")),
    ],
)
def test_parse_score(text, expected):
    assert _parse_score(text) == expected


def test_parse_score_rejects_replies_without_a_score():
    for text in ("great job", '{"reason": "no score"}', '{"score": "high"}', '{"score": NaN}'):
        with pytest.raises(ValueError):
            _parse_score(text)


def test_parse_ranking():
    assert _parse_ranking("[0.1, 0.9]", 2) == [(0.1, ""), (0.9, "")]
    assert _parse_ranking('{"scores": [{"score": 2}, {"score": -1}]}', 2) == [(1.0, ""), (0.0, "")]
    with pytest.raises(ValueError, match="no JSON list of 3 scores"):
        _parse_ranking("[0.1, 0.9]", 3)
