"""A small world of three apps (contacts, calendar, payments) behind five Python tools.

`World()` is one user's phone at the start of an episode: a fresh deep copy of `INITIAL`, so what an
episode changes persists across its own tool calls and never leaks into another episode (each
episode builds its own `World`; concurrent episodes share nothing). `World.call(name, arguments)`
runs one tool call from the model and never raises: unknown tools, arguments that are not a JSON
object, wrong or missing arguments, and the apps' own refusals (an unknown contact, not enough
money) come back as `Error: ...` text for the model to read, counted in `World.errors`; a result
the apps cannot turn into JSON (an invalid observation) is counted in `World.invalid_observations`.

Tasks are checked on the final state: `changes(World().state, world.state)` lists what an episode
did as comparable facts, and the judge compares them with the task's expected facts.
"""

from __future__ import annotations

import copy
import json
from typing import Any

# Here rather than in agent.py: make_data.py needs it, and `agent` is a module name other tutorials use too.
SYSTEM_PROMPT = ("You are an assistant with access to the user's contacts, calendar and payments apps. "
                 "Do what the user asks by calling the tools, then say briefly what you did.")

INITIAL: dict[str, Any] = {
    "contacts": [
        {"id": "c01", "name": "Alice Chen", "email": "alice.chen@example.com"},
        {"id": "c02", "name": "Bob Diaz", "email": "bob.diaz@example.com"},
        {"id": "c03", "name": "Carla Gomez", "email": "carla.gomez@example.com"},
        {"id": "c04", "name": "David Kim", "email": "david.kim@example.com"},
        {"id": "c05", "name": "Emma Novak", "email": "emma.novak@example.com"},
        {"id": "c06", "name": "Farid Haddad", "email": "farid.haddad@example.com"},
        {"id": "c07", "name": "Grace Okafor", "email": "grace.okafor@example.com"},
        {"id": "c08", "name": "Hugo Martin", "email": "hugo.martin@example.com"},
    ],
    "events": [
        {"id": "e01", "title": "Dentist", "date": "2026-03-02", "time": "09:00", "attendee": None},
        {"id": "e02", "title": "Team lunch", "date": "2026-03-02", "time": "12:30", "attendee": None},
        {"id": "e03", "title": "Gym", "date": "2026-03-03", "time": "18:00", "attendee": None},
        {"id": "e04", "title": "Piano lesson", "date": "2026-03-04", "time": "17:00", "attendee": None},
        {"id": "e05", "title": "Car service", "date": "2026-03-05", "time": "08:30", "attendee": None},
        {"id": "e06", "title": "Book club", "date": "2026-03-05", "time": "19:00", "attendee": None},
        {"id": "e07", "title": "Haircut", "date": "2026-03-06", "time": "11:00", "attendee": None},
    ],
    "payments": [],
    "balance": 500.0,
    "next_event": 8,  # ids are never reused, so a cancelled event and a new one never look alike
}


def _spec(name: str, description: str, properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "description": description, "parameters": {
        "type": "object", "properties": properties, "required": list(properties)}}}


TOOLS: list[dict[str, Any]] = [
    _spec("search_contacts", "Contacts app: find contacts whose name contains the text. Returns id, name, email.",
          {"name": {"type": "string"}}),
    _spec("send_money", "Payments app: send an amount in dollars to a contact id.",
          {"contact_id": {"type": "string"}, "amount": {"type": "number"}, "note": {"type": "string"}}),
    _spec("list_events", "Calendar app: the events of a date (YYYY-MM-DD).", {"date": {"type": "string"}}),
    _spec("create_event", "Calendar app: add an event with a contact id.",
          {"title": {"type": "string"}, "date": {"type": "string"}, "time": {"type": "string"},
           "contact_id": {"type": "string"}}),
    _spec("cancel_event", "Calendar app: delete an event by its id.", {"event_id": {"type": "string"}}),
]


class AppError(Exception):
    """An app refused the call; the message goes back to the model."""


class World:
    """The apps' state for one episode, and the tools that read and change it."""

    def __init__(self, state: dict[str, Any] | None = None) -> None:
        self.state = copy.deepcopy(INITIAL if state is None else state)
        self.errors = 0
        self.invalid_observations = 0

    # ------------------------------------------------------------------ tools
    def search_contacts(self, name: str) -> list[dict[str, Any]]:
        text = str(name).strip().lower()
        if not text:
            raise AppError("name is empty")
        return [dict(c) for c in self.state["contacts"] if text in c["name"].lower()]

    def send_money(self, contact_id: str, amount: float, note: str) -> dict[str, Any]:
        if not any(c["id"] == contact_id for c in self.state["contacts"]):
            raise AppError(f"no contact with id {contact_id!r}; find it with search_contacts")
        if isinstance(amount, bool) or not isinstance(amount, (int, float)) or not 0 < amount <= self.state["balance"]:
            raise AppError(f"amount must be a number between 0 and the balance {self.state['balance']:g}")
        payment = {"id": f"p{len(self.state['payments']) + 1:02d}", "to": contact_id, "amount": float(amount),
                   "note": str(note)}
        self.state["payments"].append(payment)
        self.state["balance"] = round(self.state["balance"] - float(amount), 2)
        return {"payment_id": payment["id"], "balance": self.state["balance"]}

    def list_events(self, date: str) -> list[dict[str, Any]]:
        return [dict(e) for e in self.state["events"] if e["date"] == str(date)]

    def create_event(self, title: str, date: str, time: str, contact_id: str) -> dict[str, Any]:
        if not any(c["id"] == contact_id for c in self.state["contacts"]):
            raise AppError(f"no contact with id {contact_id!r}; find it with search_contacts")
        number, self.state["next_event"] = self.state["next_event"], self.state["next_event"] + 1
        event = {"id": f"e{number:02d}", "title": str(title), "date": str(date), "time": str(time),
                 "attendee": contact_id}
        self.state["events"].append(event)
        return {"event_id": event["id"]}

    def cancel_event(self, event_id: str) -> dict[str, Any]:
        before = len(self.state["events"])
        self.state["events"] = [e for e in self.state["events"] if e["id"] != event_id]
        if len(self.state["events"]) == before:
            raise AppError(f"no event with id {event_id!r}; find it with list_events")
        return {"cancelled": event_id}

    # ------------------------------------------------------------------ dispatch
    def call(self, name: str, arguments: Any) -> tuple[str, dict[str, Any]]:
        """Run one tool call: (the tool message's content, the call's record). Never raises."""
        record: dict[str, Any] = {"name": name, "arguments": arguments}
        try:
            args = json.loads(arguments) if isinstance(arguments, str) else arguments
            if not isinstance(args, dict):
                raise AppError("arguments must be a JSON object")
            record["arguments"] = args
            if name not in TOOL_NAMES:
                raise AppError(f"unknown tool {name!r}; the tools are {', '.join(TOOL_NAMES)}")
            result = getattr(self, name)(**args)
        except (AppError, TypeError, ValueError) as exc:  # TypeError: missing or unexpected arguments
            self.errors += 1
            record["error"] = str(exc)
            return f"Error: {exc}", record
        try:
            content = json.dumps(result, ensure_ascii=False)
        except (TypeError, ValueError) as exc:
            self.invalid_observations += 1
            record["error"] = f"invalid observation: {exc}"
            return "Error: the app returned an invalid result", record
        record["result"] = result
        return content, record


TOOL_NAMES = tuple(t["function"]["name"] for t in TOOLS)


def _norm(value: Any) -> Any:
    return value.strip().lower() if isinstance(value, str) else value


def changes(before: dict[str, Any], after: dict[str, Any]) -> list[list[Any]]:
    """What happened between two states, as sorted facts: payments made (to, amount, note), events
    added (title, date, time, attendee) and events removed (id). Text is compared case-blind."""
    facts: list[list[Any]] = []
    paid = {p["id"] for p in before["payments"]}
    for p in after["payments"]:
        if p["id"] not in paid:
            facts.append(["paid", p["to"], round(float(p["amount"]), 2), _norm(p["note"])])
    old = {e["id"]: e for e in before["events"]}
    new = {e["id"]: e for e in after["events"]}
    for event_id, e in new.items():
        if event_id not in old:
            facts.append(["event", _norm(e["title"]), e["date"], e["time"], e["attendee"]])
    for event_id in old:
        if event_id not in new:
            facts.append(["cancelled", event_id])
    return sorted(facts, key=json.dumps)
