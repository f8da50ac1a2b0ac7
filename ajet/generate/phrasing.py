"""Words for call-first data: the user question a gold call answers, and the final sentence that states
its value. The writer model phrases both; every phrasing is checked, and a template stands in when
the writer fails, so a task never depends on a small model writing well.

A question is acceptable when it names every value the user must give (`mention`), and none the user
cannot know: the answer itself and the values a chain passes from one call to the next (`hidden`).
Tool names never appear (no user types `get_gas_price`).
"""

from __future__ import annotations

import random
import re
from typing import Any

from ajet.generate.result_data import COUNT
from ajet.judge.numbers import parse_number
from ajet.judge.tool_reference import states_value

QUESTION_REGEX = r"(What|How|Which|Where|Can you|Could you|Please) [^\n{}\[\]<>?]{12,140}\?"  # a bare question, one line
SENTENCE_REGEX = r"[A-Z][^\n{}\[\]<>]{8,200}\."   # one sentence that ends the episode
_WORD = re.compile(r"[A-Za-z\u00c0-\uffff]+")


def words(key: Any) -> str:
    """`price_usd_per_mmbtu` -> 'price usd per mmbtu'; `percentFull` -> 'percent full'."""
    text = re.sub(r"(?<=[a-z])(?=[A-Z])", " ", str(key))
    return " ".join(text.replace("_", " ").replace("-", " ").split()).lower()


_SINCE, _UNTIL = {"since", "after", "start", "from", "begin"}, {"until", "before", "end", "to"}


def singular(noun: str) -> str:
    """A plural noun's singular as the simple rule makes it ('daily highs' -> 'daily high', 'weeks' ->
    'week'); a word ending in 'ss' ('address') is no plural."""
    return noun[:-1] if noun.endswith("s") and not noun.endswith("ss") else noun


def time_bound(name: str) -> str | None:
    """'since' or 'until' for an argument that bounds a span of time (start_timestamp, since, end_date,
    until), None for any other (from_unit, start_room)."""
    parts = set(words(name).split(" "))
    if not parts & (_SINCE | _UNTIL) or not (parts & {"since", "until", "after", "before"}
                                             or parts & {"date", "day", "time", "timestamp", "datetime"}):
        return None
    return "since" if parts & _SINCE else "until"


def field_name(path: list[Any]) -> str:
    """The words of a result path's last key, with its parent key when it sits in an object of the
    result ('available oakwood' for ["available", "Oakwood"], 'fine usd' for ["loans", 0, "fine_usd"])."""
    keys = [p for p in path if isinstance(p, str)]
    if not keys:
        return "result"
    if path[-1] == COUNT:  # ["bookings", "#"]: the list's length
        return f"number of {words(path[-2])}" if len(path) >= 2 else "number of results"
    if len(path) >= 2 and isinstance(path[-2], str):
        return f"{words(path[-2])} {words(path[-1])}"
    if words(keys[-1]) in _BARE_KEYS and len(keys) >= 2:  # ["orders", 0, "id"]: the order id, not "the id"
        parent = words(keys[-2]).split(" ")[-1]
        parent = parent[:-3] + "y" if parent.endswith("ies") else parent[:-1] if parent.endswith("s") else parent
        return f"{parent} {words(keys[-1])}"
    return words(keys[-1])


# keys that say nothing without the record they belong to
_BARE_KEYS = {"id", "name", "code", "key", "number", "value", "type", "status", "date", "title", "label", "total"}


def first_clause(description: str | None) -> str:
    """A tool description's first clause, as a topic for a templated question."""
    text = (description or "").strip().split("\n")[0]
    text = re.split(r"(?<=[.;:])\s", text)[0].rstrip(".;:")
    return text[:120]


def show(value: Any) -> str:
    """A value as a user writes it (2.0 -> '2', True -> 'yes')."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


NUMBER_WORDS = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five", 6: "six", 7: "seven", 8: "eight",
                9: "nine", 10: "ten"}
TIME_OF_DAY = re.compile(r"(?:[01]?\d|2[0-3]):[0-5]\d")  # '14:00', '9:30'
# The key under which a record named by its place in time order is given ('the first booking'):
# ajet.generate.candidates labels the record, and the value is said as it is, never after its key.
POSITION = "position"


def in_minutes(name: str) -> bool:
    """Whether argument `name` is a length of time in minutes (`duration_minutes`, `minutes`)."""
    return bool(set(words(name).split(" ")) & {"minutes", "minute", "mins"})


def hours_in_words(minutes: int) -> list[str]:
    """How people say a whole number of hours given in minutes: 60 -> 'an hour', 120 -> 'two hours'."""
    hours = minutes // 60
    if minutes <= 0 or minutes % 60:
        return []
    if hours == 1:
        return ["an hour", "one hour", "1 hour"]
    return [f"{hours} hours"] + ([f"{NUMBER_WORDS[hours]} hours"] if hours in NUMBER_WORDS else [])


def mentions(value: Any, text: str) -> bool:
    """Whether `text` names `value`: the number (any formatting, or a small count as a word: 'two
    weeks') or the text, case-insensitively; a boolean as the template writes it ('yes' / 'no')."""
    if isinstance(value, bool):
        return show(value) in text.casefold()
    if isinstance(value, int) and value in NUMBER_WORDS and re.search(rf"(?<![\w-]){NUMBER_WORDS[value]}\b", text, re.IGNORECASE):
        return True
    return states_value(text, value, 1e-9)


MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December"]


_MONTH_DAY = rf"(?:{'|'.join(MONTHS)}) \d{{1,2}}"
DAY_IN_WORDS = re.compile(rf"({_MONTH_DAY}), (\d{{4}})")  # 'March 2, 2024', as glosses.day_words writes a day


def said(name: str, value: Any, question: str) -> bool:
    """Whether `question` gives argument `name`'s value: a boolean by its phrase ('including tax'), a
    month number by its name ('in March'), minutes in hours ('two hours'), anything else as `mentions`
    reads it."""
    if isinstance(value, bool):
        return flag_phrase(name, value) in question.casefold()
    if isinstance(value, str) and re.fullmatch(r"[\d\s.+\-*/]*\d[\d\s.]*[+\-*/][\d\s.+\-*/]*", value):
        # an expression said in words ('12 times 7'): its numbers, in order
        numbers = re.findall(r"\d+(?:\.\d+)?", value)
        found = re.findall(r"\d+(?:\.\d+)?", question)
        if mentions(value, question) or (numbers and _in_order(numbers, found)):
            return True
    if words(name).split(" ")[-1] == "month" and isinstance(value, int) and 1 <= value <= 12 \
            and re.search(rf"\b{MONTHS[value - 1]}\b", question, re.IGNORECASE):
        return True
    if in_minutes(name) and isinstance(value, int) and any(
            re.search(rf"(?<![\w-]){form}\b", question, re.IGNORECASE) for form in hours_in_words(value)):
        return True  # a length in minutes said in hours ('for two hours' for 120)
    day = DAY_IN_WORDS.fullmatch(value) if isinstance(value, str) else None
    if day and re.search(rf"\b{day.group(1)} and {_MONTH_DAY}, {day.group(2)}\b", question):
        return True  # the first day of a span whose year is said once ('between March 2 and March 10, 2024')
    return mentions(value, question)


def _in_order(wanted: list[str], found: list[str]) -> bool:
    it = iter(found)
    return all(any(w == f for f in it) for w in wanted)


_REQUEST_LABELS = ("lookup:", "the user wants:")  # the labels of question_prompt's lines


def question_problem(question: str, mention: dict[str, Any], hidden: list[Any], tool_names: list[str]) -> str | None:
    """Why `question` cannot stand for the calls (a drop reason), or None when it can."""
    if len(_WORD.findall(question)) < 4:
        return "too_short"
    lowered = question.casefold()
    if any(name.casefold() in lowered for name in tool_names if "_" in name or len(name) > 12):
        return "names_a_tool"
    # a writer that copies its request back ("Lookup: ... (time = 16:45, ...)") wrote no question
    if any(label in lowered for label in _REQUEST_LABELS) or any(
            re.search(rf"\b{re.escape(key.removeprefix('then '))}\s*=", question) for key in mention):
        return "echoes_the_request"
    missing = [key for key, value in mention.items() if not said(key.removeprefix("then "), value, question)]
    if missing:
        return "misses_a_value"
    if any(_informative(value) and mentions(value, question) for value in hidden):
        return "gives_away_a_value"
    return None


def _informative(value: Any) -> bool:
    # small integers (1, 2, a year's digit) show up in ordinary questions by chance: only longer
    # values count as given away
    number = parse_number(value) if not isinstance(value, bool) else None
    if number is not None:
        return not (float(number).is_integer() and abs(number) < 10)
    return isinstance(value, str) and len(value.strip()) >= 2


_FLAG_VERBS = {"include", "includes", "including", "with", "show", "use", "is", "has", "enable", "enabled", "only",
               "want", "wants"}


def flag_phrase(name: str, value: bool) -> str:
    """A boolean argument as users say it: `include_tax=True` -> 'including tax', False -> 'excluding
    tax'; `vegetarian=True` -> 'with vegetarian', False -> 'without vegetarian'. Never a bare 'yes'."""
    parts = words(name).split(" ")
    including = parts[0] in ("include", "includes", "including")
    while len(parts) > 1 and parts[0] in _FLAG_VERBS:
        parts = parts[1:]
    thing = " ".join(parts)
    if including:
        return f"including {thing}" if value else f"excluding {thing}"
    return f"with {thing}" if value else f"without {thing}"


def say(name: str, value: Any) -> str:
    """A given value as it appears in a question: a boolean as its phrase, anything else as `show` writes it."""
    return flag_phrase(name, value) if isinstance(value, bool) else show(value)


def plain_question(field: str, mention: dict[str, Any], rng: random.Random) -> str:
    """A plain question that always passes `question_problem`: the field asked for and every value to
    mention (with its argument's words when there are several). The last resort of the templates; it
    never pastes a tool's description (no user writes one)."""
    if len(mention) == 1:
        name, value = next(iter(mention.items()))
        given = say(name, value)
    else:
        given = ", ".join(say(k, v) if isinstance(v, bool) or k == POSITION else f"{words(k)} {show(v)}"
                          for k, v in mention.items())
    forms = [f"What is the {field} for {given}?", f"Tell me the {field} for {given}.",
             f"Can you tell me the {field} for {given}?", f"For {given}, what is the {field}?"]
    return rng.choice(forms)


# One worked example in a domain no server here has: a small writer copies the shape of the
# answer from it (a bare question), where a description alone made it echo the prompt back.
_EXAMPLE = ("Lookup: Weather forecast for a town (town = Lyon, day = Friday)\nThe user wants: the rain chance\n"
            "Question: Will it rain in Lyon on Friday, and how likely is it?")


def question_prompt(steps: list[dict[str, Any]], field: str, mention: dict[str, Any]) -> str:
    """The writer's request: the lookups (tool description, arguments), what the answer is about, and
    the values the question must give, after one worked example."""
    lines = []
    for step in steps:
        args = ", ".join(f"{k} = {show(v)}" for k, v in step["arguments"].items()) or "no arguments"
        lines.append(f"Lookup: {first_clause(step.get('description')) or words(step['tool'])} ({args})")
    chain = " (the lookups run in order; the user only knows the first one's values)" if len(steps) > 1 else ""
    given = ", ".join(say(k, v) for k, v in mention.items())
    return (f"Write the question a user asks. It must contain: {given}.\n\nExample:\n{_EXAMPLE}\n\n"
            + "\n".join(lines) + f"\nThe user wants: the {field}{chain}\nQuestion:")


def sentence_prompt(question: str, content: str, field: str, value: Any) -> str:
    return (f"Question: {question}\nLooked up: {content[:600]}\n\nWrite one short sentence that answers the "
            f"question and states the {field}, {show(value)}.")


def template_sentence(field: str, value: Any, mention: dict[str, Any]) -> str:
    given = ", ".join(say(k, v) for k, v in mention.items())
    return f"The {field} for {given} is {show(value)}." if given else f"The {field} is {show(value)}."


def refusal_sentence(field: str, value: Any, refusal: str) -> str:
    """The answer when the server refused the id the user gave: the id and the server's own words."""
    reason = " ".join(refusal.split())[:200].rstrip(".")
    return f"I could not get the {field} for {show(value)}: the server answered \"{reason}\"."
