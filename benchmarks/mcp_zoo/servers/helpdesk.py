"""Support desk MCP server: search and read customer support tickets (a zoo server written here).

Ticket ids are found only through `search_tickets` (paginated, 5 a page); a ticket is a nested
object (requester, assignee, comments); `status` and `priority` are enums; `list_agents` takes a
team. Unknown ids are MCP errors (raised), as many public servers report them. The data are
invented and seeded, and nothing depends on the clock: SLA figures are computed as of a fixed
moment, 2025-06-02 12:00 UTC.

    python helpdesk.py        # serve over stdio
"""

from __future__ import annotations

import random
from datetime import datetime, timedelta
from typing import Annotated, Literal

from fastmcp import FastMCP
from fastmcp.exceptions import ToolError
from pydantic import Field

mcp = FastMCP("helpdesk", instructions="Customer support tickets for Northwind Cloud: search tickets, read one "
              "with its conversation, check its SLA, see who is on each team.")

AS_OF = datetime(2025, 6, 2, 12, 0)
PAGE_SIZE = 5
Status = Literal["open", "pending", "solved", "closed"]
Priority = Literal["low", "normal", "high", "urgent"]
Team = Literal["billing", "technical", "accounts"]
FIRST_RESPONSE_HOURS = {"low": 48, "normal": 24, "high": 8, "urgent": 2}

AGENTS = {  # name -> team
    "Sofia Marquez": "billing", "Kenji Watanabe": "billing",
    "Rahul Mehta": "technical", "Lena Fischer": "technical", "Marcus Bell": "technical",
    "Ines Duarte": "accounts", "Tom Haverford": "accounts",
}
REQUESTERS = [  # name, email, organization
    ("Olivia Park", "olivia.park@brightlane.io", "Brightlane"),
    ("Samuel Adeyemi", "sam@kestrel-labs.com", "Kestrel Labs"),
    ("Chloe Dubois", "chloe.dubois@maisonverte.fr", "Maison Verte"),
    ("Arjun Nair", "arjun@quillstack.dev", "Quillstack"),
    ("Greta Holm", "greta.holm@nordvik.no", "Nordvik Shipping"),
    ("Daniel Cohen", "dcohen@pinecrest.edu", "Pinecrest College"),
    ("Yuki Tanaka", "yuki@sakura-design.jp", "Sakura Design"),
    ("Mateo Rossi", "mateo.rossi@cucina.it", "Cucina Rossi"),
]
SUBJECTS = [  # subject, team, tags
    ("Invoice charged twice for May", "billing", ["invoice", "refund"]),
    ("Cannot reset my password", "accounts", ["login"]),
    ("API returns 502 on /v2/orders", "technical", ["api", "outage"]),
    ("Need to add a second admin", "accounts", ["users"]),
    ("Webhook deliveries delayed by an hour", "technical", ["webhooks"]),
    ("Change billing email address", "billing", ["invoice"]),
    ("SSO login loops back to the start page", "accounts", ["login", "sso"]),
    ("Export to CSV is missing the tax column", "technical", ["export"]),
    ("Upgrade from Starter to Team plan", "billing", ["plan"]),
    ("Storage usage shows 0 GB", "technical", ["storage"]),
    ("Refund for unused seats", "billing", ["refund"]),
    ("Two-factor codes not arriving by SMS", "accounts", ["login", "2fa"]),
]
COMMENT_LINES = {
    "billing": ["I've reversed the duplicate charge; it shows in 3-5 business days.",
                "Could you send the invoice number?", "The plan change takes effect on your next cycle."],
    "accounts": ["I've sent a new reset link.", "Please confirm the admin's email address.",
                 "Your identity provider's redirect URL needs updating."],
    "technical": ["We reproduced it and opened an engineering issue.", "Could you share a request id?",
                  "A fix was deployed at 09:40 UTC; please try again."],
}


def _build() -> dict[str, dict]:
    rng = random.Random(4242)
    tickets: dict[str, dict] = {}
    statuses = ["open", "pending", "solved", "closed"]
    for n in range(36):
        subject, team, tags = SUBJECTS[n % len(SUBJECTS)]
        name, email, org = REQUESTERS[rng.randrange(len(REQUESTERS))]
        created = datetime(2025, 5, 1, 8) + timedelta(hours=rng.randrange(0, 31 * 24))
        if created > AS_OF - timedelta(hours=3):
            created = AS_OF - timedelta(hours=3 + n)
        status = statuses[rng.randrange(4)] if created < AS_OF - timedelta(days=4) else rng.choice(["open", "pending"])
        priority = rng.choice(["low", "normal", "normal", "high", "urgent"])
        team_agents = [a for a, t in AGENTS.items() if t == team]
        assignee = None if status == "open" and rng.random() < 0.4 else rng.choice(team_agents)
        comments = [{"author": name, "created_at": created.isoformat(timespec="minutes"), "public": True,
                     "body": f"{subject}. Can you help?"}]
        if assignee:
            answered = created + timedelta(hours=rng.randrange(1, 30))
            comments.append({"author": assignee, "created_at": answered.isoformat(timespec="minutes"), "public": True,
                             "body": rng.choice(COMMENT_LINES[team])})
            if rng.random() < 0.5:
                comments.append({"author": assignee, "created_at": (answered + timedelta(minutes=20)).isoformat(timespec="minutes"),
                                 "public": False, "body": "Internal note: checked the logs, nothing unusual."})
        ticket_id = f"T-{48100 + rng.randrange(10, 99) * 10 + n % 10}"
        tickets[ticket_id] = {
            "ticket_id": ticket_id, "subject": subject, "status": status, "priority": priority,
            "created_at": created.isoformat(timespec="minutes"),
            "requester": {"name": name, "email": email, "organization": org},
            "assignee": None if assignee is None else {"name": assignee, "team": team},
            "tags": tags, "comments": comments,
        }
    return dict(sorted(tickets.items(), key=lambda kv: kv[1]["created_at"], reverse=True))


TICKETS = _build()


def _ticket(ticket_id: str) -> dict:
    key = ticket_id.strip().upper()
    if key not in TICKETS:
        raise ToolError(f"Ticket {ticket_id!r} not found. Ticket ids look like T-48xxx; use search_tickets to find one.")
    return TICKETS[key]


@mcp.tool
def search_tickets(
    query: Annotated[str, Field(description="Words to match in the subject, the requester's name or organization. "
                                "Empty matches every ticket.")] = "",
    status: Annotated[Status | None, Field(description="Only tickets with this status.")] = None,
    priority: Annotated[Priority | None, Field(description="Only tickets with this priority.")] = None,
    page: Annotated[int, Field(description="Page of results, starting at 1.", ge=1)] = 1,
) -> dict:
    """Search support tickets, newest first. Returns a page of ticket summaries (ticket_id, subject, status,
    priority, requester) with the total count; ask for the next page while `has_more` is true."""
    words = query.casefold().split()
    found = []
    for t in TICKETS.values():
        text = f"{t['subject']} {t['requester']['name']} {t['requester']['organization']}".casefold()
        if all(w in text for w in words) and status in (None, t["status"]) and priority in (None, t["priority"]):
            found.append({"ticket_id": t["ticket_id"], "subject": t["subject"], "status": t["status"],
                          "priority": t["priority"], "requester": t["requester"]["name"]})
    start = (page - 1) * PAGE_SIZE
    return {"total": len(found), "page": page, "has_more": start + PAGE_SIZE < len(found),
            "tickets": found[start:start + PAGE_SIZE]}


@mcp.tool
def get_ticket(ticket_id: Annotated[str, Field(description="The ticket id, e.g. from search_tickets.")]) -> dict:
    """Get one ticket with its requester, assignee, tags and full comment thread (public replies and
    internal notes)."""
    return _ticket(ticket_id)


@mcp.tool
def get_sla_status(ticket_id: Annotated[str, Field(description="The ticket id.")]) -> dict:
    """First-response SLA of a ticket: the target in hours for its priority, when the first agent reply was due,
    whether it came in time, and how long it took (hours)."""
    t = _ticket(ticket_id)
    created = datetime.fromisoformat(t["created_at"])
    target = FIRST_RESPONSE_HOURS[t["priority"]]
    due = created + timedelta(hours=target)
    replies = [c for c in t["comments"] if c["author"] != t["requester"]["name"] and c["public"]]
    first = datetime.fromisoformat(replies[0]["created_at"]) if replies else None
    waited = (first or AS_OF) - created
    return {"ticket_id": t["ticket_id"], "priority": t["priority"], "target_hours": target,
            "first_response_due": due.isoformat(timespec="minutes"),
            "first_response_at": first.isoformat(timespec="minutes") if first else None,
            "hours_to_first_response": round(waited.total_seconds() / 3600, 1) if first else None,
            "breached": (first or AS_OF) > due}


@mcp.tool
def list_agents(team: Annotated[Team, Field(description="The support team.")]) -> dict:
    """Agents on a support team, with how many open or pending tickets each is assigned."""
    agents = []
    for name, agent_team in AGENTS.items():
        if agent_team == team:
            load = sum(1 for t in TICKETS.values() if t["assignee"] and t["assignee"]["name"] == name
                       and t["status"] in ("open", "pending"))
            agents.append({"name": name, "active_tickets": load})
    return {"team": team, "agents": agents}


if __name__ == "__main__":
    mcp.run(show_banner=False)
