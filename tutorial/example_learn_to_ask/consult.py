"""The consultation's rules, shared by the agent, the judge and the data script: the topics a doctor can
ask about (each recognised by keywords in the question), the scripted patient, and the rule-based score.

A question is *about* a topic when it contains one of the topic's keywords; a question touching several
topics counts for the first one it names (one question at a time). A hidden fact counts as elicited when
the doctor asked about its topic, whoever the patient is (scripted or a served model), so the same score
works for both.
"""

from __future__ import annotations

import re
from typing import Any

SYSTEM_PROMPT = (
    "You are a doctor in a consultation. Ask the patient one short question at a time to learn what you need. "
    "When you know enough, stop asking and reply with your advice, starting with 'Advice:'."
)

# topic -> (keywords that mark a question about it, the canonical question the demonstrations ask)
TOPICS: dict[str, tuple[tuple[str, ...], str]] = {
    "duration": (("how long", "when did", "since when", "start"), "How long have you had it?"),
    "fever": (("fever", "temperature"), "Do you have a fever?"),
    "medication": (("medication", "medicine", "taking any", "pills", "drugs"), "Are you taking any medication?"),
    "allergies": (("allerg",), "Do you have any allergies?"),
    "severity": (("how bad", "severe", "scale", "how much does it hurt"), "How severe is it, from 1 to 10?"),
    "breathing": (("breath",), "Do you have trouble breathing?"),
    "vision": (("vision", "see", "eyes", "blurr"), "Has your vision changed?"),
    "food": (("eat", "food", "meal"), "What did you eat recently?"),
    "sleep": (("sleep",), "How are you sleeping?"),
    "travel": (("travel", "trip", "abroad"), "Have you travelled recently?"),
}

# Penalties and weights of the rule-based score (see score_consultation).
ELICIT_WEIGHT, ADVICE_WEIGHT, REDUNDANT_PENALTY = 0.8, 0.2, 0.15


def topic_of(question: str) -> str | None:
    """The topic a question is about: the one whose keyword appears first in it, or None."""
    text = question.lower()
    best: tuple[int, str] | None = None
    for topic, (keywords, _) in TOPICS.items():
        for keyword in keywords:
            found = re.search(r"\b" + re.escape(keyword), text)  # a word start: 'eat' is not in 'breathe'
            if found and (best is None or found.start() < best[0]):
                best = (found.start(), topic)
    return best[1] if best else None


def is_advice(text: str) -> bool:
    """A doctor's turn that ends the consultation: advice, not a question."""
    stripped = text.strip()
    return stripped.lower().startswith("advice") or (bool(stripped) and "?" not in stripped)


def scripted_answer(question: str, facts: dict[str, str]) -> str:
    """The scripted patient: the hidden fact of the question's topic, or a plain no."""
    topic = topic_of(question)
    if topic is None:
        return "I'm not sure what you mean. Could you ask me something specific?"
    return facts.get(topic, "No, nothing like that.")


def doctor_questions(messages: list[dict[str, Any]]) -> list[str]:
    """The doctor's questions in a conversation (assistant turns that are not advice)."""
    return [str(m.get("content") or "") for m in messages
            if m.get("role") == "assistant" and not is_advice(str(m.get("content") or ""))]


def score_consultation(messages: list[dict[str, Any]], facts: dict[str, str]) -> dict[str, float]:
    """The rule-based score of one consultation against its hidden record `facts` (topic -> fact).

    elicited: share of the hidden facts whose topic the doctor asked about.
    redundant: questions asked once every fact was known, or repeating a topic already asked.
    advised: 1 when the doctor ended with advice.
    total = 0.8 * elicited + 0.2 * advised - 0.15 * redundant, clipped to [0, 1].
    """
    asked: set[str] = set()
    redundant = 0
    for question in doctor_questions(messages):
        topic = topic_of(question)
        if asked >= set(facts) or (topic is not None and topic in asked):
            redundant += 1  # the answer was already known
        if topic is not None:
            asked.add(topic)
    elicited = len(asked & set(facts)) / max(len(facts), 1)
    last = next((str(m.get("content") or "") for m in reversed(messages) if m.get("role") == "assistant"), "")
    advised = float(is_advice(last))
    total = ELICIT_WEIGHT * elicited + ADVICE_WEIGHT * advised - REDUNDANT_PENALTY * redundant
    return {"total": min(1.0, max(0.0, total)), "elicited": elicited, "advised": advised,
            "redundant": float(redundant), "questions": float(len(doctor_questions(messages)))}


def clean(text: str) -> str:
    """One line of at most 300 characters (what the patient is shown of a doctor's turn)."""
    return re.sub(r"\s+", " ", text).strip()[:300]
