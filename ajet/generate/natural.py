"""User questions for call-first tasks in the forms users write, built only from what the server exposes.

A form-like template ("For city a Boston, city b Dallas, what is the difference?") teaches a small
model the form: trained on such questions, SmolLM2-135M sent "How much natural gas did Texas produce
in 2022?" to the price tool and answered "Which is cheaper, Atlanta or Chicago?" with one city's
price. Users name the thing they want in the server's own words ("natural gas price", "gas in
storage"), place each value where it belongs ("in Boston", "of Texas in 2022", "Boston or
Dallas", "2.5 therm to MWh", "for 2 weeks"), and ask in many sentence forms. Every piece here is
read off the server, never written for one:

- what is asked: the answer's key split into a noun and a unit (`price_usd_per_mmbtu` -> 'price',
  'USD per MMBtu'), the unit spelled as the descriptions spell it, the noun with the description's
  own modifiers ('natural gas price' from "Natural gas price in a city");
- where a value goes: the description's placeholder for it ("in a city" -> 'in Boston', "of two
  cities" -> 'Boston and Dallas'), else the argument's shape: a `from_X`/`to_X` pair is a conversion
  ('2.5 therm to MWh'), an `X_a`/`X_b` pair a comparison ('Boston or Dallas'), an id is said with its
  noun ('member M-2041'), a count named by a plural with it ('2 weeks');
- how it is asked: questions, requests, "I need ...", a first-person id ("My member id is M-2041."),
  a person named by a `name` argument ("Ana Ruiz wants to know the fine usd."), 'How much' only
  for an amount and 'How many' for a count, a chain's conversion as a unit wanted ("... in USD per GJ?").

`families` returns the phrasings of one task by family, `pick` draws one by the families' WEIGHTS
among those that pass a check (ajet.generate.call_tasks: `phrasing.question_problem`, every value
given and none the user cannot know).
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Any

from ajet.generate.explore_values import tokens
from ajet.generate.glosses import one_letter_unit, unit_gloss
from ajet.generate.record_names import records_noun
from ajet.generate.result_data import COUNT, structured, value_at
from ajet.generate.phrasing import show, words
from ajet.generate.placement import (ID, MAX_DESCRIPTION, PREPOSITIONS, conversion_of, expression_words,
                                       is_converted, noun_of, pair_of, placeholder, places, words_before)

_STOP = {"and", "or", "a", "an", "the", "of", "in", "for", "at", "to", "by", "with", "on", "from", "per"}
_NAME = re.compile(r"[A-Z][A-Za-z.'-]*(?: [A-Za-z][A-Za-z.'-]*){0,5}")  # 'Ana Ruiz', 'Things Fall Apart'
_EXPRESSION = re.compile(r"[\d\s().+\-*/^%]*\d[\d\s().]*[+\-*/^%][\d\s().+\-*/^%]*")  # '12 * 7', '(3 + 4) * 5'
# words that open a description as a verb ("Search the catalog", "Compare gas prices"): never a modifier
_VERBS = {"search", "find", "get", "list", "compare", "convert", "look", "show", "return", "returns", "fetch"}
_DIFFERENCE = {"difference", "diff", "delta", "gap", "spread"}
_BARE_ANSWERS = {"value", "result", "amount", "total", "count"}


def lexicon(texts: list[str]) -> dict[str, str]:
    """Lowercase word -> its spelling where the texts write it with capitals inside a sentence (usd ->
    USD, mmbtu -> MMBtu, bcf -> Bcf): keys are lowercase (`price_usd_per_mmbtu`), questions are not."""
    found: dict[str, str] = {}
    for text in texts:
        for sentence in re.split(r"[.:;!?\n]\s*", text or ""):
            for i, word in enumerate(re.findall(r"[A-Za-z][A-Za-z0-9']*", sentence)):
                if any(ch.isupper() for ch in word[1:]) or (i > 0 and word[0].isupper()):
                    found.setdefault(word.casefold(), word)
    return found


@dataclass
class Asked:
    """What a question asks for: its noun phrases (plainest first), its unit, and whether it is a count."""

    nouns: list[str]
    unit: str
    count: bool


def _spell(word: str, lex: dict[str, str]) -> str:
    return lex.get(word.casefold(), word)


def _unit_index(tokens: list[str], lex: dict[str, str]) -> int:
    """Where the unit part of a key's words starts (len(tokens) when it has none)."""
    for i, token in enumerate(tokens):
        if i == 0:
            continue
        spelled = lex.get(token)
        if spelled and (sum(ch.isupper() for ch in spelled) >= 2 or (spelled[0].isupper() and len(spelled) <= 4)):
            return i
        if token == "per" and i + 1 < len(tokens):
            return i
        if i == len(tokens) - 1 and (len(token) == 1 or token == "percent"):
            return i
    return len(tokens)


def _description_noun(head: str, description: str, lex: dict[str, str]) -> str | None:
    """The head noun with the modifiers the description puts right before it ('price' -> 'natural gas
    price' in "Natural gas price in a city"); None when it puts none ("Search the catalog by title")."""
    for chunk in re.split(r"[,.:;()=]", (description or "")[:MAX_DESCRIPTION]):
        found = next((m for m in re.finditer(rf"\b{re.escape(head)}\b", chunk, re.IGNORECASE)
                      if words_before(chunk, m.start(), 3)), None)
        if not found:
            continue
        before: list[str] = []
        for word in reversed(words_before(chunk, found.start(), 3)):  # contiguous modifiers only: no article, preposition, verb
            if word.casefold() in _STOP or word.casefold() in _VERBS or "'" in word:
                break
            before.insert(0, word)
        if before:
            return " ".join(lex.get(w.casefold(), w.lower()) for w in [*before, head])
    return None


def asked(path: list[Any], value: Any, description: str, arguments: dict[str, Any], lex: dict[str, str],
          result: Any = None) -> Asked:
    """What a question for the value at `path` asks: `["price_usd_per_mmbtu"]` -> nouns ['price',
    'natural gas price'], unit 'USD per MMBtu'; `["available", "Oakwood"]` -> 'available at Oakwood'
    (or the description's 'copies available at Oakwood' when it says "copies available at each branch");
    `["price_a"]` with argument city_a=Boston -> 'price of Boston'; a list's length by what its records
    are when the call's `result` is given (`["free", COUNT]` of spans of time -> 'number of free slots')."""
    keys = [p for p in path if isinstance(p, str)]
    if not keys:
        return Asked(["result"], "", False)
    if path[-1] == COUNT and len(keys) >= 2:  # the length of a list: "How many bookings ...", "the number of bookings"
        if result is not None and isinstance(path[-2], str):  # the records say what a key that is no noun counts
            records = value_at(structured(result), path[:-1])  # ('free slots', not 'free')
            return Asked([f"number of {records_noun(path[-2], records if isinstance(records, list) else [])}"], "", True)
        return Asked([f"number of {words(keys[-2])}"], "", True)
    if len(path) >= 2 and isinstance(path[-2], str) and isinstance(path[-1], str) \
            and re.fullmatch(r"[a-z][a-z0-9_]*|[a-z]+(?:[A-Z][a-z0-9]*)+", path[-1]):
        # a field of a nested object ({"target": {"day_of_week": ...}}): 'target day of week'
        noun = f"{words(path[-2])} {words(path[-1])}"
        return Asked([noun], "", isinstance(value, int) and noun.endswith("s"))
    if len(path) >= 2 and isinstance(path[-2], str) and isinstance(path[-1], str):
        parent, child = words(path[-2]), path[-1]
        nouns = [f"{parent} at {child}"]
        each = re.search(rf"((?:[A-Za-z]+\s+)?{re.escape(parent)}\s+(?:{PREPOSITIONS})\s+)each\s+[A-Za-z]+",
                         description or "", re.IGNORECASE)
        if each:
            nouns.append(f"{each.group(1).lower()}{child}")
        return Asked(nouns, "", isinstance(value, int))
    tokens = words(keys[-1]).split()
    cut = _unit_index(tokens, lex)
    head_tokens = tokens[:cut] or tokens
    unit = " ".join(one_letter_unit(_spell(t, lex)) if len(t) == 1 else _spell(t, lex) for t in tokens[cut:])
    suffix = re.fullmatch(r"(.+)_([a-z0-9])", keys[-1])
    if suffix:  # price_a beside the argument city_a: the price of that argument's value
        for name, given in arguments.items():
            if name.endswith(f"_{suffix.group(2)}") and isinstance(given, str):
                return Asked([f"{words(suffix.group(1))} of {given}"], unit, False)
    head = " ".join(head_tokens)
    nouns = [head]
    richer = _description_noun(head, description, lex)
    if richer and richer != head and not _another_key(richer, keys[-1], result):
        nouns.append(richer)
    count = isinstance(value, int) and not isinstance(value, bool) and head.endswith("s") and not head.endswith("ss")
    return Asked(nouns, unit, count)


def _another_key(noun: str, key: str, result: Any) -> bool:
    """Whether a noun the description gives is the words of another key of the result: "the number of
    rainy days" names `rainy_days`, never `days` beside it (a month's 31 days asked as its rainy days)."""
    if result is None:
        return False
    pending, seen = [structured(result)], 0
    while pending and seen < 10_000:  # a bounded walk: results can be large
        node = pending.pop()
        seen += 1
        if isinstance(node, dict):
            if any(isinstance(k, str) and k != key and words(k) == noun for k in node):
                return True
            pending += node.values()
        elif isinstance(node, list):
            pending += node
    return False


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def _ask_forms(noun: str, where: str, unit: str, count: bool, amount: bool) -> dict[str, list[str]]:
    """Sentence forms for 'the {noun} {where}' (where: the placed values, 'in Boston'), by family.
    `amount`: the value is an amount (a price, a volume), which users ask with 'How much'; a count
    is asked with 'How many' (`count`), and a whole number without a unit with neither."""
    tail = f" {where}" if where else ""
    ask = [f"What is the {noun}{tail}?", f"What's the {noun}{tail}?", f"Can you look up the {noun}{tail}?"]
    if where and not where.startswith("of "):  # never 'Of the first free slot on May 7, what is the end?'
        ask.append(f"{_cap(where)}, what is the {noun}?")
    if amount:
        ask.append(f"How much is the {noun}{tail}?")
    if count:
        plural = noun.removeprefix("number of ")
        ask += [f"How many {plural} are there{tail}?", f"How many {plural}{tail}?"]
    families = {"ask": ask,
                "request": [f"Tell me the {noun}{tail}.", f"Give me the {noun}{tail}.", f"I need the {noun}{tail}.",
                            f"I'd like to know the {noun}{tail}."],
                "terse": [f"{_cap(noun)}{tail}, please.", f"{_cap(noun)}{tail}?"]}
    if unit:
        families["unit"] = [f"What is the {noun}{tail}, in {unit}?", f"What is the {noun}{tail} in {unit}?",
                            f"Tell me the {noun}{tail} in {unit}."]
        if " per " in unit:  # 'per MMBtu' alone, as a chain that converts says 'per GJ': the unit word decides
            families["unit"] += [f"How much is the {noun}{tail} per {unit.split(' per ')[-1]}?",
                                 f"What is the {noun}{tail} per {unit.split(' per ')[-1]}?"]
    return families


def _conversion_forms(conv: dict[str, str]) -> list[str]:
    amount, source, target = conv["amount"], conv["source"], conv["target"]
    what = f"{amount} {source}"
    forms = [f"Convert {what} to {target}.", f"What is {what} in {target}?", f"{_cap(what)} is how much in {target}?",
             f"Express {what} in {target}.", f"I have {what}. What is that in {target}?",
             f"Convert {what} into {target}, please."]
    if (source == conv["source_arg"] or " " not in source) and re.fullmatch(r"-?[\d.]+", amount or "") \
            and re.fullmatch(r"[A-Za-z][A-Za-z ]{0,20}", target):  # a bare unit: 'how many MWh is 2.5 therm'
        forms += [f"How many {target} is {what}?", f"How many {target} are in {what}?"]
    return forms


def _pair_forms(noun: str, pair: tuple[str, str, str], unit: str, is_difference: bool, topic: str) -> list[str]:
    _, first, second = pair
    if first in noun or second in noun:  # 'price of Boston' out of a comparison: no 'between' around it
        return [f"Compare {first} and {second}: what is the {noun}?", f"{first} or {second}: what is the {noun}?",
                f"Comparing {first} with {second}, what is the {noun}?"]
    forms = [f"What is the {noun} between {first} and {second}?", f"{_cap(noun)} of {first} and {second}?",
             f"Compare {first} and {second}: what is the {noun}?", f"{first} or {second}: what is the {noun}?",
             f"Between {first} and {second}, what is the {noun}?", f"Tell me the {noun} for {first} versus {second}."]
    if is_difference:
        about = f" {topic}" if topic else ""
        # 'the gas price in Boston than in Dallas': the topic's preposition said again before the second
        than = f"than {topic.split()[-1]} {second}" if topic else f"than {second}"
        forms += [f"By how much does{about} {first} exceed {second}?", f"How much higher is{about} {first} {than}?",
                  f"How much more is{about} {first} {than}?", f"What is the difference between {first} and {second}?"]
        if unit:
            forms.append(f"By how many {unit} does {first} exceed {second}?")
    return forms


# People who ask a service about themselves (a member about their loans, a customer about an order)
# and the things a person holds an id of: only these become the asker ("I'm Ana Ruiz.", "My order id
# is O-5."). Any other name or id is a thing the user asks about (a product, a branch, a SKU).
_ASKERS = {"member", "customer", "client", "user", "patient", "guest", "student", "employee", "passenger",
           "subscriber", "account", "person", "people", "contact", "traveler", "traveller", "applicant", "resident"}
_HELD = {"order", "booking", "reservation", "ticket", "card", "loan", "appointment", "policy", "claim", "invoice",
         "subscription", "membership", "application", "case", "shipment", "parcel", "package"}


def _about(name: str, steps: list[dict[str, Any]]) -> set[str]:
    """The words of the tool (name and description) that takes argument `name`."""
    step = next((s for s in steps if name.removeprefix("then ") in s["arguments"]), None) or {}
    return tokens(f"{step.get('tool') or ''} {step.get('description') or ''}")


def _first_person(given: dict[str, Any], steps: list[dict[str, Any]],
                  rng: random.Random) -> tuple[str, dict[str, Any]] | None:
    """A first-person opening for an id the user holds ('My member id is M-2041.') or for the person
    named ('I'm Ana Ruiz.'), and the values left."""
    for name, value in given.items():
        if isinstance(value, str) and ID.fullmatch(value) and not name.startswith("then ") \
                and tokens(name) & (_ASKERS | _HELD):
            lead = rng.choice([f"My {words(name)} is {value}.", f"{_cap(noun_of(name))} {value} here."])
            return lead, {k: v for k, v in given.items() if k != name}
    person = _person(given, steps)
    if person:
        who, rest = person
        return rng.choice([f"I'm {who}.", f"This is {who}."]), rest
    return None


def _person(given: dict[str, Any], steps: list[dict[str, Any]]) -> tuple[str, dict[str, Any]] | None:
    """The person a question names, the value of a `name` argument ('Ana Ruiz') of a tool about people
    who ask (members, customers, patients: `_ASKERS`), and the values left. Only `name` itself: a
    `city_name` or `pipeline_name` holds a place or a thing ('New York'), and a name a tool about
    products or branches takes is a thing too."""
    value = given.get("name")
    if isinstance(value, str) and value.strip() and _about("name", steps) & _ASKERS:
        return value, {k: v for k, v in given.items() if k != "name"}
    return None


# How often each family of forms is picked, relative to the others a question has. A unit and a
# verb weigh more: a single value asked with its own unit ('per MMBtu') is what tells a chain that
# converts ('per GJ') from one that does not, and a noun made from a verb is most often asked with
# the verb; both were too rare at equal odds (ajet.generate.call_tasks.template_question).
WEIGHTS = {"ask": 1.0, "request": 1.0, "terse": 0.5, "unit": 2.0, "verb": 2.0, "first_person": 1.0,
           "possessive": 1.0, "person": 1.0, "pair": 1.0, "conversion": 1.0, "converted": 1.0, "expression": 1.0,
           "expression_words": 2.0}


def families(steps: list[dict[str, Any]], path: list[Any], value: Any, given: dict[str, Any],
             field: str, lex: dict[str, str], rng: random.Random) -> dict[str, list[str]]:
    """Phrasings of the question that `steps` (one call or a chain) answer with `value` (at `path` of
    the last result), giving the values in `given` (Candidate.mention), by family (WEIGHTS). Not checked here."""
    last, first = steps[-1], steps[0]
    last_description = last.get("description") or ""
    numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
    # one call's arguments as the question says them ('Tokyo' for Asia/Tokyo: Candidate.mention)
    as_said = {k: given.get(k, v) for k, v in last["arguments"].items()} if len(steps) == 1 else last["arguments"]
    conv = conversion_of(as_said, last_description)
    if conv and len(steps) > 1 and conv["amount_arg"] in {link["argument"] for link in last.get("inputs_from") or []}:
        return {"converted": _converted_chain(steps, given, conv, lex, rng)}
    if conv and len(steps) == 1 and conv["amount"] and path and path[-1] not in (conv["source_arg"], conv["target_arg"]) \
            and is_converted(path):
        return {"conversion": _conversion_forms(conv)}
    what = asked(path, value, last_description, last["arguments"], lex, last.get("result"))
    gloss = unit_gloss(last, path[-1]) if path and isinstance(path[-1], str) else None
    if gloss:  # `temp_max_f` with units=imperial: 'the temp max, in Fahrenheit', the unit standing for the value
        argument, spellings, noun = gloss
        said = [v for k, v in given.items() if k.removeprefix("then ") == argument]
        unit = said[-1] if said and said[-1] in spellings else rng.choice(spellings)
        given = {k: v for k, v in given.items() if k.removeprefix("then ") != argument}
        what = Asked(asked([*path[:-1], noun.replace(" ", "_")], value, last_description, last["arguments"], lex).nouns,
                     unit, what.count)
    # 'How much is the pages' taught the 135M model that 'How much ...' asks for a count of copies
    amount = numeric and not what.count and (bool(what.unit) or not isinstance(value, int))
    pair = pair_of(as_said) if len(steps) == 1 else None
    found: dict[str, list[str]] = {}
    # a bare answer key ('value', 'result') says what it is through the call's choices: monthly_stats(variable=
    # temperature, stat=max) -> 'the max temperature', not 'the value of temperature for max'
    chosen = {k: v for k, v in given.items() if isinstance(v, str) and (last.get("origin") or {}).get(k) == "schema_enum"
              and k in last["arguments"]}
    if chosen and path and words(str(path[-1])) in _BARE_ANSWERS:
        head = " ".join(show(v) for v in reversed(list(chosen.values())))
        what = Asked([head if words(str(path[-1])) in ("value", "result") else f"{head} {words(str(path[-1]))}"],
                     what.unit, what.count)
        given = {k: v for k, v in given.items() if k not in chosen}

    def add(family: str, forms: list[str]) -> None:
        found.setdefault(family, []).extend(forms)

    for noun in what.nouns:
        if pair and set(given) <= {n for n in first["arguments"]}:
            topic = _pair_topic(first.get("description") or "", pair[0])
            add("pair", _pair_forms(noun, pair, what.unit, words(path[-1]) in _DIFFERENCE if path else False, topic))
            continue
        where = " ".join(places(steps, given, rng))
        for family, forms in _ask_forms(noun, where, what.unit, what.count, amount).items():
            add(family, forms)
        free = [v for v in given.values() if isinstance(v, str) and _NAME.fullmatch(v)]
        if len(given) == 1 and len(free) == 1:  # one name or title: "What is Ana Ruiz's total fine?"
            add("possessive", [f"What is {free[0]}'s {noun}?", f"Tell me {free[0]}'s {noun}."]
                + ([f"How many {noun} does {free[0]} have?"] if what.count else []))
        person = _person(given, steps)
        if person:  # someone named, as users write about a member or customer: "Ana Ruiz wants to know ..."
            who, rest = person
            where_rest = " ".join(places(steps, rest, rng))
            tail = f" {where_rest}" if where_rest else ""
            add("person", [f"{who} wants to know the {noun}{tail}.", f"{who} is asking for the {noun}{tail}.",
                           f"What is {who}'s {noun}{tail}?", f"Can you check {who}'s {noun}{tail}?"])
        opening = _first_person(given, steps, rng)
        if opening:
            lead, rest = opening
            plain = _ask_forms(noun, " ".join(places(steps, rest, rng)), "", what.count, amount)
            add("first_person", [f"{lead} {q}" for q in plain["ask"][:2] + plain["request"][:2]])
    verbs = _verb_forms(what, last_description, given, steps, rng)
    if verbs:
        add("verb", verbs)
    expressions = [v for v in given.values() if isinstance(v, str) and _EXPRESSION.fullmatch(v)
                   and not _CALENDAR_DATE.fullmatch(v)]  # 2025-03-04 is a day, not 2025 minus 3 minus 4
    if len(given) == 1 and expressions:  # a calculation: "What is 12 * 7?", not "the result for 12 * 7"
        said = expression_words(expressions[0], rng)
        found = {"expression": [f"What is {expressions[0]}?", f"Calculate {expressions[0]}.",
                                f"What's {expressions[0]}?", f"Compute {expressions[0]}, please.",
                                f"How much is {expressions[0]}?"]}
        if said:  # as people say it: "What is 12 times 7?" (phrasing.said accepts its numbers in order)
            found["expression_words"] = [f"What is {said}?", f"What's {said}?", f"How much is {said}?",
                                         f"Can you work out {said}?", f"I need {said}."]
    if field and len(steps) > 1 and "of the" in field:  # which of a comparison's values a chain passed on
        which = field.split(" of the ")[-1].split()[0]
        found = {k: [f for f in v if which in f] or v for k, v in found.items()}
    return found


_CALENDAR_DATE = re.compile(r"\d{4}-\d{1,2}-\d{1,2}|\d{1,2}/\d{1,2}/\d{2,4}")


def questions(steps: list[dict[str, Any]], path: list[Any], value: Any, given: dict[str, Any],
              field: str, lex: dict[str, str], rng: random.Random) -> list[str]:
    """Every phrasing `families` gives, in one list."""
    return [q for forms in families(steps, path, value, given, field, lex, rng).values() for q in forms]


def pick(found: dict[str, list[str]], ok: Any, rng: random.Random) -> str | None:
    """One phrasing that passes `ok`: a family drawn by WEIGHTS among those with such a phrasing, then
    one of its phrasings; None when none passes."""
    good = {family: [q for q in dict.fromkeys(forms) if ok(q)] for family, forms in found.items()}
    good = {family: forms for family, forms in good.items() if forms}
    if not good:
        return None
    names = sorted(good)
    family = rng.choices(names, weights=[WEIGHTS.get(n, 1.0) for n in names])[0]
    return rng.choice(good[family])


# a noun made from a verb, and the verb back ('production' -> 'produce'): users ask with the verb
_NOMINALS = (("uction", "uce"), ("umption", "ume"), ("ation", "ate"))


def _verb_forms(what: Asked, description: str, given: dict[str, Any], steps: list[dict[str, Any]],
                rng: random.Random) -> list[str]:
    """'How much natural gas did Texas produce in 2021?' for the noun 'natural gas production' whose
    description places one value after 'of' ("production of a US state"): that value is who does it."""
    richer = what.nouns[-1].split(" ")
    verb = next((richer[-1][:-len(end)] + repl for end, repl in _NOMINALS if richer[-1].endswith(end)), None)
    if verb is None or len(richer) < 2:
        return []
    clause = re.split(r"(?<=[.;:])\s", description.strip())[0]
    agent = next((name for name in given if (placeholder(name, clause) or [""])[0].lower().startswith("of ")), None)
    if agent is None:
        return []
    stuff, who = " ".join(richer[:-1]), show(given[agent])
    rest = " ".join(places(steps, {k: v for k, v in given.items() if k != agent}, rng))
    tail = f" {rest}" if rest else ""
    past = verb + ("d" if verb.endswith("e") else "ed")
    forms = [f"How much {stuff} did {who} {verb}{tail}?", f"How much {stuff} does {who} {verb}{tail}?",
             f"How much {stuff} was {past} in {who}{tail}?"]
    if what.unit:
        forms.append(f"How much {stuff} did {who} {verb}{tail}, in {what.unit}?")
    return forms


def _pair_topic(description: str, stem: str) -> str:
    """What a pair tool compares, as the description says it ('gas prices of two cities' -> 'the gas
    price in'); '' when it does not say."""
    noun = words(stem)
    plural = re.escape(noun[:-1] if noun.endswith("y") else noun) + r"\w*"  # city -> cities
    found = re.search(rf"([A-Za-z ]{{1,80}}?)\s+(?:of|for|in|between)\s+(?:two|both|a pair of)\s+{plural}",
                      description[:MAX_DESCRIPTION], re.IGNORECASE)
    if not found:
        return ""
    topic = found.group(1).split()
    topic = [w for w in topic if w.lower() not in {"compare", "compares", "comparing", "the"}]
    if not topic:
        return ""
    noun = " ".join(topic).lower()
    return f"the {noun[:-1] if noun.endswith('s') and not noun.endswith('ss') else noun} in"


def _converted_chain(steps: list[dict[str, Any]], given: dict[str, Any], conv: dict[str, str],
                     lex: dict[str, str], rng: random.Random) -> list[str]:
    """A chain whose last call converts what the first returned: the first call's question with the
    unit wanted ('What is the natural gas price in Seattle, in USD per GJ?')."""
    last = steps[-1]
    link = next(link for link in last.get("inputs_from") or [] if link["argument"] == conv["amount_arg"])
    passed = next((s for s in steps if s.get("id") == link["call"]), steps[-2])
    what = asked(link["path"], None, passed.get("description") or "", passed["arguments"], lex)
    rest = {k: v for k, v in given.items() if k.removeprefix("then ") != conv["target_arg"]}
    pair = pair_of(passed["arguments"])
    target, bare = conv["target"], conv["target_value"]
    forms: list[str] = []
    for noun in what.nouns:
        if pair and set(rest) <= set(passed["arguments"]):
            _, a, b = pair
            where_forms = ([f"after comparing {a} and {b}"] if a in noun or b in noun
                           else [f"between {a} and {b}", f"of {a} and {b}", f"for {a} or {b}"])
        else:
            where_forms = [" ".join(places(steps[:-1], rest, rng))]
        for where in where_forms:
            tail = f" {where}" if where else ""
            forms += [f"What is the {noun}{tail} in {target}?", f"What is the {noun}{tail}, in {target}?",
                      f"Give me the {noun}{tail}, expressed in {target}.", f"Tell me the {noun}{tail} in {target}.",
                      f"How much is the {noun}{tail} per {bare}?", f"What is the {noun}{tail} per {bare}?",
                      f"Convert the {noun}{tail} to {target}.", f"I need the {noun}{tail} converted to {target}.",
                      f"Take the {noun}{tail} and convert it to {target}."]
    return forms
