"""Built-in judges (exact_match, math_boxed, composite), plugin judges and argument errors.
Every expected number below is worked out by hand in the comment next to it."""

from __future__ import annotations

import textwrap

import pytest

from ajet.config.schema import JudgeConfig
from ajet.errors import ConfigError, JudgeError, PluginError
from ajet.judge import build_judge
from ajet.judge.math_boxed import last_boxed
from ajet.workflow import Task, WorkflowOutput


def judge(type_: str, **args):
    return build_judge(JudgeConfig(type=type_, args=args))


def task(answer, **metadata) -> Task:
    return Task(task_id="t1", query="q", answer=answer, metadata=metadata)


# --- exact_match -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args, answer, reference, expected",
    [
        ({}, "  Paris ", "paris", 1.0),  # strip + ignore_case by default
        ({"ignore_case": False}, "Paris", "paris", 0.0),
        ({"strip": False}, " paris", "paris", 0.0),
        ({}, "The capital is Paris.", "paris", 0.0),  # equals wants the whole answer
        ({"mode": "contains"}, "The capital is Paris.", "paris", 1.0),
        ({}, 42, 42, 1.0),  # non-strings compare as text
        ({}, 42.0, "42", 1.0),  # 42.0 is written "42"
        ({}, "Lyon", ["Paris", "Lyon"], 1.0),  # a list reference accepts any of its items
        # number: 1,234.5 is one number; |1234.5 - 1234| = 0.5 <= 0.01 * 1234 = 12.34
        ({"mode": "number"}, "It costs 1,234.5 dollars", 1234, 1.0),
        # |1234.5 - 1300| = 65.5 > 13; the other number in the text (3) is far too
        ({"mode": "number"}, "3 items cost 1,234.5", 1300, 0.0),
        ({"mode": "number", "rel_tol": 0.0}, "about 12.5", "12.5", 1.0),
        ({"mode": "number", "rel_tol": 0.0}, "about 12.51", "12.5", 0.0),
        ({"mode": "number"}, "the result is -7", -7, 1.0),
        ({"mode": "number"}, "no digits here", 5, 0.0),
        ({"mode": "number"}, "3/4 of it", "3/4", 0.0),  # the text holds 3 and 4, neither is 0.75
    ],
)
async def test_exact_match_cases(args, answer, reference, expected):
    j = judge("exact_match", **args)
    reward = await j.score(task(reference), WorkflowOutput(answer=answer))
    assert reward.total == expected
    assert reward.parts == {"correct": expected}
    assert reward.is_success is None


async def test_exact_match_answer_key_and_fallback_to_last_assistant_message():
    j = judge("exact_match", answer_key="final")
    t = task({"final": "12.5", "calls": []})
    # answer None: the last assistant message's content is the answer
    out = WorkflowOutput(
        messages=[
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": "let me check"},
            {"role": "tool", "content": "12.5"},
            {"role": "assistant", "content": "12.5"},
        ]
    )
    assert (await j.score(t, out)).total == 1.0


async def test_exact_match_reference_errors_name_the_fix():
    with pytest.raises(JudgeError, match=r"has a dict answer \(keys \['calls', 'final'\]\); set judge.args.answer_key"):
        await judge("exact_match").score(task({"final": 1, "calls": []}), WorkflowOutput(answer="1"))
    with pytest.raises(JudgeError, match="answer_key is 'final' but task 't1' has answer 'x'"):
        await judge("exact_match", answer_key="final").score(task("x"), WorkflowOutput(answer="x"))
    with pytest.raises(JudgeError, match="has no reference answer"):
        await judge("exact_match").score(task(None), WorkflowOutput(answer="x"))
    with pytest.raises(JudgeError, match="reference answer 'Paris' is not a number"):
        await judge("exact_match", mode="number").score(task("Paris"), WorkflowOutput(answer="Paris"))


# --- math_boxed ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        ("\\boxed{5}", "5"),
        ("first \\boxed{1} then \\boxed{2}", "2"),
        ("\\boxed{\\frac{a}{b+{c}}}", "\\frac{a}{b+{c}}"),
        ("\\boxed{5} and a broken \\boxed{6", "5"),  # the unbalanced last one is passed over
        ("no box at all", None),
    ],
)
def test_last_boxed(text, expected):
    assert last_boxed(text) == expected


@pytest.mark.parametrize(
    "answer, reference, found, correct",
    [
        ("So the answer is \\boxed{\\frac{3}{4}}.", 0.75, 1.0, 1.0),
        ("\\boxed{3/4}", "0.75", 1.0, 1.0),
        ("\\boxed{-\\dfrac{1}{2}}", -0.5, 1.0, 1.0),
        ("\\boxed{1,000}", 1000, 1.0, 1.0),
        ("\\boxed{2.0}", "2", 1.0, 1.0),
        ("\\boxed{x = 5}", 5, 1.0, 1.0),
        ("\\boxed{50\\%}", "50", 1.0, 1.0),
        ("\\boxed{\\sqrt{2}}", "\\sqrt{2}", 1.0, 1.0),  # not numbers: normalized strings
        ("\\boxed{ \\left( 1, 2 \\right) }", "(1,2)", 1.0, 1.0),
        ("\\boxed{\\text{Paris}}", "paris", 1.0, 1.0),
        ("\\boxed{1} wait, \\boxed{2}", 1, 1.0, 0.0),  # only the last box counts
        ("\\boxed{0.7501}", 0.75, 1.0, 0.0),  # off by 1e-4 > rel_tol 1e-6
        ("the answer is 0.75", 0.75, 0.0, 0.0),  # no box, no credit
    ],
)
async def test_math_boxed_cases(answer, reference, found, correct):
    reward = await judge("math_boxed").score(task(reference), WorkflowOutput(answer=answer))
    assert reward.parts == {"boxed_found": found, "correct": correct}
    assert reward.total == correct


async def test_math_boxed_answer_key():
    reward = await judge("math_boxed", answer_key="value").score(
        task({"value": 12, "unit": "m"}), WorkflowOutput(answer="\\boxed{12}")
    )
    assert reward.total == 1.0


# --- composite (seed 002) -------------------------------------------------------------------------

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_price",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
    }
]
REFERENCE = {"final": "12.5", "calls": [{"name": "get_price", "arguments": {"city": "Paris"}}]}


def composite(clip=None):
    args = {
        "parts": [
            {"name": "answer", "judge": {"type": "exact_match", "args": {"answer_key": "final"}}, "weight": 0.7},
            {"name": "calls", "judge": {"type": "function_call"}, "weight": 0.3},
        ],
        "penalties": {"format_error": -0.1, "redundant_call": -0.2, "wrong_tool": -0.3, "timeout": -0.5,
                      "no_answer": -1.0},
    }
    if clip is not None:
        args["clip"] = clip
    return judge("composite", **args)


async def test_composite_weighted_parts_and_penalties():
    call = {"name": "get_price", "arguments": {"city": "Paris"}, "result": "12.5"}
    out = WorkflowOutput(
        answer="12.5",
        tool_calls=[call, dict(call)],  # the same call twice: redundant_call
        metadata={"ajet": {"tool_call_parse_failures": 1, "tool_calls_parsed": 2, "timed_out": False}},
    )
    reward = await composite(clip=[0, 1]).score(task(REFERENCE, tools=TOOLS), out)
    # function_call: parse_rate 2/3, names 1/max(2,1) = 0.5, param_f1 2*1/(2+1) = 2/3, schema 1, exec 1
    #   total = 0.1*2/3 + 0.3*0.5 + 0.3*2/3 + 0.1*1 + 0.2*1 = 0.716667
    assert reward.parts["calls"] == pytest.approx(0.7166667, abs=1e-6)
    assert reward.parts["calls.func_name_accuracy"] == 0.5
    assert reward.parts["answer"] == 1.0
    # 0.7*1 + 0.3*0.716667 = 0.915; format_error -0.1 and redundant_call -0.2 fire: 0.615
    assert reward.total == pytest.approx(0.615, abs=1e-6)
    assert reward.parts["penalty.format_error"] == -0.1
    assert reward.parts["penalty.redundant_call"] == -0.2
    assert reward.parts["penalty.wrong_tool"] == 0.0
    assert reward.parts["penalty.timeout"] == 0.0
    assert reward.parts["penalty.no_answer"] == 0.0


async def test_composite_timeout_wrong_tool_no_answer_and_clip():
    out = WorkflowOutput(
        answer="  ",
        tool_calls=[{"name": "get_weather", "arguments": {"city": "Paris"}}],
        metadata={"ajet": {"tool_call_parse_failures": 0, "timed_out": True}},
    )
    # function_call: parse 1, names 0, param_f1 0, schema 0 (unknown tool), exec 1: 0.1 + 0.2 = 0.3
    # sum 0.7*0 + 0.3*0.3 = 0.09; timeout -0.5, wrong_tool -0.3, no_answer -1.0: 0.09 - 1.8 = -1.71
    unclipped = await composite().score(task(REFERENCE, tools=TOOLS), out)
    assert unclipped.total == pytest.approx(-1.71, abs=1e-9)
    assert unclipped.parts["penalty.timeout"] == -0.5
    assert unclipped.parts["penalty.wrong_tool"] == -0.3
    assert unclipped.parts["penalty.no_answer"] == -1.0
    assert unclipped.parts["penalty.format_error"] == 0.0
    clipped = await composite(clip=[-1, 1]).score(task(REFERENCE, tools=TOOLS), out)
    assert clipped.total == -1.0


async def test_composite_wrong_tool_needs_expected_calls():
    j = judge(
        "composite",
        parts=[{"name": "a", "judge": {"type": "exact_match"}}],
        penalties={"wrong_tool": -0.3},
    )
    out = WorkflowOutput(answer="x", tool_calls=[{"name": "anything", "arguments": {}}])
    reward = await j.score(task("x"), out)  # the task names no calls: no wrong tool possible
    assert reward.total == 1.0 and reward.parts["penalty.wrong_tool"] == 0.0


@pytest.mark.parametrize(
    "args, message",
    [
        (
            {"parts": [{"name": "a", "judge": {"type": "exact_match"}}], "penalties": {"wrong_tol": -0.3}},
            "judge.args.penalties = {'wrong_tol': -0.3}: unknown penalty 'wrong_tol'; did you mean 'wrong_tool'?",
        ),
        (
            {"parts": [{"name": "a", "judge": {"type": "exact_match"}}], "penalties": {"timeout": 0.5}},
            "penalty 'timeout' is 0.5; penalties are added, write -0.5 to subtract",
        ),
        (
            {"parts": [{"name": "a", "judge": {"type": "exact_match", "args": {"ignore_cse": True}}}]},
            "judge.args.parts[0].judge.args.ignore_cse: unknown argument 'ignore_cse' of judge 'exact_match'; "
            "did you mean 'ignore_case'?",
        ),
        (
            {"parts": [{"name": "a", "judge": {"type": "exact_match"}}, {"name": "a", "judge": {"type": "math_boxed"}}]},
            "part names must be unique; repeated: ['a']",
        ),
        ({"parts": []}, "judge.args.parts = []: List should have at least 1 item"),
        (
            {"parts": [{"name": "a", "judge": {"type": "exact_match"}}], "clip": [1, 0]},
            "clip [1.0, 0.0] has lo > hi",
        ),
    ],
)
def test_composite_bad_args(args, message):
    with pytest.raises(ConfigError) as info:
        judge("composite", **args)
    assert message in str(info.value)


# --- registry: names, args, plugins ------------------------------------------------------------


@pytest.mark.parametrize(
    "type_, args, message",
    [
        (
            "exact_match",
            {"mod": "number"},
            "judge.args.mod: unknown argument 'mod' of judge 'exact_match'; did you mean 'mode'? "
            "(allowed: answer_key, ignore_case, mode, rel_tol, strip)",
        ),
        (
            "exact_match",
            {"mode": "regex"},
            "judge.args.mode = 'regex': Input should be 'equals', 'contains' or 'number' (judge 'exact_match')",
        ),
        ("math_boxed", {"rel_tol": -1}, "judge.args.rel_tol = -1: Input should be greater than or equal to 0"),
        ("llm_judge", {"model": "m"}, "judge.args.base_url: Field required (judge 'llm_judge')"),
        ("exact_matc", {}, "judge.type = 'exact_matc': not a built-in judge"),
    ],
)
def test_bad_judge_args_name_the_key(type_, args, message):
    with pytest.raises(ConfigError) as info:
        judge(type_, **args)
    assert message in str(info.value)
    if type_ == "exact_matc":
        assert "did you mean 'exact_match'?" in str(info.value)


def test_success_threshold_comes_from_config():
    j = build_judge(JudgeConfig(type="exact_match", success_threshold=0.5))
    assert j.success_threshold == 0.5
    assert build_judge({"type": "math_boxed"}).success_threshold == 1.0


PLUGIN = textwrap.dedent(
    """
    import ajet
    from ajet import Judge, Reward

    class LengthJudge(Judge):
        def __init__(self, target: int = 5):
            super().__init__(target=target)
            self.target = target

        async def score(self, task, output):
            hit = float(len(str(output.answer)) == self.target)
            return Reward(total=hit, parts={"length_hit": hit})

    class NotAJudge:
        pass

    def scorer(task, output):
        return 1.0
    """
)


async def test_plugin_judge_from_file(tmp_path):
    (tmp_path / "my_judges.py").write_text(PLUGIN)
    j = build_judge(JudgeConfig(type="my_judges.py:LengthJudge", args={"target": 3}), base_dir=tmp_path)
    assert (await j.score(task("x"), WorkflowOutput(answer="abc"))).parts == {"length_hit": 1.0}
    assert (await j.score(task("x"), WorkflowOutput(answer="abcd"))).total == 0.0


def test_plugin_judge_errors(tmp_path):
    (tmp_path / "my_judges.py").write_text(PLUGIN)
    with pytest.raises(PluginError, match="names a class NotAJudge, not a subclass of ajet.Judge"):
        build_judge(JudgeConfig(type="my_judges.py:NotAJudge"), base_dir=tmp_path)
    with pytest.raises(PluginError, match="names a function, not a subclass of ajet.Judge"):
        build_judge(JudgeConfig(type="my_judges.py:scorer"), base_dir=tmp_path)
    with pytest.raises(PluginError, match="does not exist"):
        build_judge(JudgeConfig(type="missing.py:LengthJudge"), base_dir=tmp_path)
    with pytest.raises(ConfigError, match=r"LengthJudge\(\*\*args\) failed: TypeError: .*unexpected keyword argument 'targt'"):
        build_judge(JudgeConfig(type="my_judges.py:LengthJudge", args={"targt": 3}), base_dir=tmp_path)


async def test_composite_with_plugin_part(tmp_path):
    (tmp_path / "my_judges.py").write_text(PLUGIN)
    j = build_judge(
        JudgeConfig(
            type="composite",
            args={
                "parts": [
                    {"name": "len", "judge": {"type": "my_judges.py:LengthJudge", "args": {"target": 2}}, "weight": 0.5},
                    {"name": "em", "judge": {"type": "exact_match"}, "weight": 0.5},
                ]
            },
        ),
        base_dir=tmp_path,
    )
    reward = await j.score(task("ok"), WorkflowOutput(answer="ok"))
    assert reward.total == 1.0  # 0.5 * 1 + 0.5 * 1
    assert reward.parts == {"len": 1.0, "len.length_hit": 1.0, "em": 1.0, "em.correct": 1.0}


def test_every_judge_yaml_in_the_docs_builds(tmp_path):
    """The docs cannot rot: each ```yaml block of docs/judges.md builds (its plugin file included)."""
    import re
    from pathlib import Path

    import yaml

    doc = (Path(__file__).parents[2] / "docs" / "judges.md").read_text()
    plugin = next(b for b in re.findall(r"```python\n(.*?)```", doc, re.S) if b.startswith("# my_judges.py"))
    (tmp_path / "my_judges.py").write_text(plugin)
    blocks = [yaml.safe_load(b) for b in re.findall(r"```yaml\n(.*?)```", doc, re.S)]
    built = []
    for block in blocks:
        cfg = block.get("ajet", block)["judge"]
        built.append(type(build_judge(cfg, base_dir=tmp_path)).__name__)
    assert built == ["FunctionCallJudge", "CompositeJudge", "LLMJudge", "GroundedJudge", "ToolReferenceJudge", "AgentJudge", "LengthJudge"]


async def test_composite_tool_error_penalty_counts_error_shaped_results():
    # ajet.tool_results: a plain {"error": ...} result is a failed call, like a raised one
    j = judge("composite", parts=[{"name": "a", "judge": {"type": "exact_match"}}], penalties={"tool_error": -0.25})
    ok = {"name": "get_price", "arguments": {"city": "Paris"}, "result": {"price": 12.5}}
    clean = await j.score(task("12.5"), WorkflowOutput(answer="12.5", tool_calls=[ok]))
    assert clean.total == 1.0 and clean.parts["penalty.tool_error"] == 0.0
    for failed in ({"result": {"error": "unknown city"}}, {"result": "Error: no data"}, {"result": ""},
                   {"error": "boom"}):
        out = WorkflowOutput(answer="12.5", tool_calls=[ok, {"name": "get_price", "arguments": {}, **failed}])
        reward = await j.score(task("12.5"), out)
        assert reward.total == 0.75 and reward.parts["penalty.tool_error"] == -0.25  # 1.0 - 0.25


def test_a_workflow_reward_is_a_number_not_text_or_a_bool():
    from pydantic import ValidationError

    assert WorkflowOutput(reward=1).reward == 1.0 and WorkflowOutput(reward=0.5).reward == 0.5
    for bad in ("0.5", True):
        with pytest.raises(ValidationError):
            WorkflowOutput(reward=bad)


async def test_the_judges_read_numbers_with_one_scanner():
    """exact_match and grounded had a `numbers_in` each, and they disagreed: exact_match took the 2 of
    'SmolLM2' as a number, grounded did not; grounded read '1,2345' as 12345. One scanner now."""
    from ajet.judge.numbers import numbers_in, written_numbers

    assert numbers_in("SmolLM2 says 1,234.50, then -3e2 and 1.2.3; not v7") == [1234.5, -300.0, 1.2]
    assert written_numbers("2.50 and 7") == [(2.5, 2), (7.0, 0)]
    task = Task(task_id="m", query="Which model?", answer=2)
    number = build_judge(JudgeConfig(type="exact_match", args={"mode": "number"}))
    assert (await number.score(task, WorkflowOutput(answer="SmolLM2"))).total == 0.0  # no number stated
    grounded = build_judge(JudgeConfig(type="grounded"))
    calls = [{"name": "lookup", "arguments": {}, "result": {"price": 12345}}]
    unsure = await grounded.score(Task(task_id="p", query="Price?"), WorkflowOutput(answer="It costs 1,2345.", tool_calls=calls))
    assert unsure.total == 0.0  # '1,2345' is not a well-formed 12,345
    sure = await grounded.score(Task(task_id="p", query="Price?"), WorkflowOutput(answer="It costs 12,345.", tool_calls=calls))
    assert sure.total == 1.0
