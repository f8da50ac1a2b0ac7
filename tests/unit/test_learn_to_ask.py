"""The learning-to-ask tutorial: its topic rules, the rule-based score (hand-computed), its data, the
judge's LLM path and its fallback, and the doctor agent with both patients. The LLM judge, the doctor's
model and the llm patient are a scripted OpenAI-compatible server over real HTTP on 127.0.0.1."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ajet import Task, Tuner
from ajet.judge import build_judge
from ajet.plugins import load_object

FOLDER = Path(__file__).resolve().parents[2] / "tutorial" / "example_learn_to_ask"
# By file path (each tutorial has its own agent.py and make_data.py); it puts the folder on sys.path too.
DoctorAgent = load_object(f"{FOLDER / 'agent.py'}:DoctorAgent")
build = load_object(f"{FOLDER / 'make_data.py'}:build")
RECHECK = load_object(f"{FOLDER / 'make_data.py'}:RECHECK")
import consult  # noqa: E402

FACTS = {"duration": "It started 3 days ago.", "fever": "No, I have no fever.", "breathing": "Breathing is fine."}
TASK = Task(task_id="c", query="Hello doctor. I'm 40. I've had a bad cough.",
            answer={"facts": FACTS, "advice": "Rest."}, metadata={"complaint": "cough"})


def convo(*doctor: str) -> list[dict]:
    """A consultation where the scripted patient answers each of the doctor's turns but the last."""
    messages = [{"role": "system", "content": consult.SYSTEM_PROMPT}, {"role": "user", "content": TASK.query}]
    for i, text in enumerate(doctor):
        messages.append({"role": "assistant", "content": text})
        if i < len(doctor) - 1:
            messages.append({"role": "user", "content": consult.scripted_answer(text, FACTS)})
    return messages


def test_topics_are_matched_at_word_starts_first_one_wins() -> None:
    assert consult.topic_of("Do you have trouble breathing?") == "breathing"  # not 'eat' inside 'breathing'
    assert consult.topic_of("What did you eat?") == "food"
    assert consult.topic_of("Any allergies or medication?") == "allergies"  # one question at a time
    assert consult.topic_of("Great, anything else?") is None
    assert consult.scripted_answer("Do you have a FEVER?", FACTS) == FACTS["fever"]
    assert consult.scripted_answer("Do you sleep well?", FACTS) == "No, nothing like that."
    assert consult.scripted_answer("Hmm?", FACTS).startswith("I'm not sure")


def test_rule_score_by_hand() -> None:
    full = consult.score_consultation(convo("How long have you had it?", "Do you have a fever?",
                                            "Do you have trouble breathing?", "Advice: rest."), FACTS)
    assert full == {"total": 1.0, "elicited": 1.0, "advised": 1.0, "redundant": 0.0, "questions": 3.0}
    # 2 of 3 facts, a repeated topic (-0.15), advice: 0.8 * 2/3 + 0.2 - 0.15 = 0.5833
    repeat = consult.score_consultation(convo("How long have you had it?", "Since when exactly?",
                                              "Do you have a fever?", "Advice: rest."), FACTS)
    assert repeat["total"] == pytest.approx(0.8 * 2 / 3 + 0.2 - 0.15) and repeat["redundant"] == 1
    # every fact known, then two more questions (-0.30): 0.8 + 0.2 - 0.3 = 0.7
    late = consult.score_consultation(convo("How long?", "Any fever?", "Your breathing?", "Do you sleep well?",
                                            "Anything else?", "Advice: rest."), FACTS)
    assert late["total"] == pytest.approx(0.7) and late["redundant"] == 2
    assert consult.score_consultation(convo("Advice: rest."), FACTS)["total"] == pytest.approx(0.2)
    # never advised, asked one topic: 0.8 / 3
    assert consult.score_consultation(convo("How long?", "Do you smoke?"), FACTS)["total"] == pytest.approx(0.8 / 3)


def test_shipped_data_is_what_the_script_makes_and_demonstrations_score_full(tmp_path: Path) -> None:
    build(tmp_path)
    names = ("train", "val", "heldout", "sft")
    for name in names:
        assert (tmp_path / f"{name}.jsonl").read_bytes() == (FOLDER / f"{name}.jsonl").read_bytes(), name
    rows = {n: [json.loads(line) for line in (FOLDER / f"{n}.jsonl").read_text().splitlines()] for n in names}
    assert [len(rows[n]) for n in names] == [64, 32, 128, 64]
    case = lambda r: r["query"] + json.dumps(r["answer"])  # noqa: E731
    keys = [{case(r) for r in rows[n]} for n in ("train", "val", "heldout")]
    assert sum(map(len, keys)) == len(set().union(*keys)) == 224  # no case twice, in a split or across them
    rechecks = 0
    for case, demo in zip(rows["train"], rows["sft"]):
        assert set(case["answer"]["facts"]) <= set(consult.TOPICS)
        score = consult.score_consultation(demo["messages"], case["answer"]["facts"])
        # every fact asked once and advice given; a re-checking doctor asks one known answer again
        rechecked = demo["messages"][-3]["content"] == RECHECK
        rechecks += rechecked
        assert score["elicited"] == score["advised"] == 1.0, case["task_id"]
        assert (score["total"], score["redundant"]) == ((0.85, 1) if rechecked else (1.0, 0)), case["task_id"]
        # the scripted patient gives exactly the demonstration's answers
        msgs = demo["messages"]
        for question, answer in zip(msgs[2:-1:2], msgs[3::2]):
            assert consult.scripted_answer(question["content"], case["answer"]["facts"]) == answer["content"]
    assert rechecks == 48  # RECHECK_SHARE of 64


async def test_judge_rule_path_from_the_yaml_reference() -> None:
    judge = build_judge({"type": "judge.py:ConsultationJudge"}, FOLDER)
    output = await _episode(["How long have you had it?", "Do you have a fever?", "Advice: rest."])
    reward = await judge.score(TASK, output)
    assert reward.total == pytest.approx(0.8 * 2 / 3 + 0.2) and reward.is_success is False
    assert reward.parts["rule_score"] == reward.total and "llm_score" not in reward.parts


async def test_judge_llm_path_over_http_and_its_fallback(llm) -> None:
    llm.respond = lambda request: {"content": 'Graded. {"score": 0.9, "reason": "asked well"}'}
    judge = build_judge({"type": "judge.py:ConsultationJudge",
                         "args": {"llm": {"base_url": llm.base_url, "model": "grader", "max_retries": 0}}}, FOLDER)
    output = await _episode(["How long have you had it?", "Advice: rest."])
    reward = await judge.score(TASK, output)
    assert reward.total == 0.9 and reward.parts["llm_score"] == 0.9 and reward.parts["llm_fallback"] == 0.0
    assert reward.feedback == "asked well" and reward.parts["rule_score"] == pytest.approx(0.8 / 3 + 0.2)
    sent = llm.requests[-1]
    assert sent["model"] == "grader" and "hidden facts" in sent["messages"][0]["content"]  # the tutorial's rubric
    assert FACTS["duration"] in sent["messages"][1]["content"]  # the hidden record, as the reference
    llm.respond = lambda request: "500"
    fallback = await judge.score(TASK, output)
    assert fallback.total == pytest.approx(0.8 / 3 + 0.2) and fallback.parts["llm_fallback"] == 1.0
    assert "rule-based score used" in fallback.feedback
    await judge.aclose()


async def test_doctor_with_the_llm_patient_over_http(llm) -> None:
    doctor_turns = iter(["How long have you had it?", "Do you have a fever?", "Advice: rest and drink water."])

    def respond(request: dict) -> dict:
        if request["model"] == "patient-model":
            assert "No, I have no fever." in request["messages"][0]["content"]  # the patient knows its record
            return {"content": "It began   three days ago."}
        return {"content": next(doctor_turns)}

    llm.respond = respond
    agent = DoctorAgent(patient="llm", patient_base_url=llm.base_url, patient_model="patient-model")
    tuner = Tuner(llm.base_url, "policy", issue_key=lambda agent: f"key-{agent}", max_turns=6)
    output = await agent.execute(TASK, tuner)
    roles = [m["role"] for m in output.messages]
    assert roles == ["system", "user", "assistant", "user", "assistant", "user", "assistant"]
    assert output.messages[3]["content"] == "It began three days ago."  # one clean line
    assert output.metadata["stop_reason"] == "advised" and output.metadata["topics_asked"] == ["duration", "fever", None]
    assert consult.score_consultation(output.messages, FACTS)["elicited"] == pytest.approx(2 / 3)


async def test_patient_endpoint_failure_ends_the_consultation_and_is_counted(llm) -> None:
    llm.respond = lambda request: "500" if request["model"] == "patient-model" else {"content": "How long?"}
    agent = DoctorAgent(patient="llm", patient_base_url=llm.base_url, patient_model="patient-model")
    output = await agent.execute(TASK, Tuner(llm.base_url, "policy", issue_key=lambda a: "k", max_turns=6))
    assert output.metrics == {"patient_failures": 1.0} and output.metadata["stop_reason"].startswith("patient_failed")


def test_bad_workflow_args_are_refused() -> None:
    with pytest.raises(ValueError, match="use 'scripted' or 'llm'"):
        DoctorAgent(patient="human")
    with pytest.raises(ValueError, match="needs patient_base_url"):
        DoctorAgent(patient="llm")


async def _episode(doctor: list[str]):
    """The scripted-patient agent run against a doctor replaying `doctor` (no model needed)."""
    from ajet import WorkflowOutput

    return WorkflowOutput(answer=doctor[-1], messages=convo(*doctor))
