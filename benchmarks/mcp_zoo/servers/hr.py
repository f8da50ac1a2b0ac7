"""People directory MCP server: employees, managers, time off (a zoo server written here).

Employee ids (E-1xxx) come from `find_employee` (by name) or the paginated `list_employees`;
`get_employee` returns a nested record (location, manager, contact, leave balance);
`get_time_off` lists leave requests with dates, filtered by an enum status and a year;
`direct_reports` walks the org chart. A name that matches nobody is an empty result, not an error;
an unknown id is an error result (`{"error": ...}`). Invented, seeded data; no clock.

    python hr.py        # serve over stdio
"""

from __future__ import annotations

import random
from datetime import date, timedelta
from typing import Annotated, Literal

from fastmcp import FastMCP
from pydantic import Field

mcp = FastMCP("people", instructions="The people directory of Lumen & Co.: who works where, who reports to whom, "
              "and time off.")

Department = Literal["Engineering", "Sales", "Finance", "Support", "People Ops"]
LeaveStatus = Literal["approved", "pending", "rejected"]

# name, title, department, office, manager name (None: the CEO)
STAFF = [
    ("Helena Vogt", "Chief Executive Officer", "People Ops", "Berlin", None),
    ("Ravi Shankar", "VP Engineering", "Engineering", "Berlin", "Helena Vogt"),
    ("Claire Dupont", "VP Sales", "Sales", "Paris", "Helena Vogt"),
    ("Noah Williams", "Finance Director", "Finance", "London", "Helena Vogt"),
    ("Aisha Bello", "Head of Support", "Support", "Lisbon", "Helena Vogt"),
    ("Jonas Weber", "Staff Engineer", "Engineering", "Berlin", "Ravi Shankar"),
    ("Mina Kang", "Senior Engineer", "Engineering", "Berlin", "Ravi Shankar"),
    ("Pedro Alves", "Engineer", "Engineering", "Lisbon", "Ravi Shankar"),
    ("Laura Bianchi", "Engineer", "Engineering", "Remote", "Jonas Weber"),
    ("Tariq Hassan", "Engineering Manager", "Engineering", "London", "Ravi Shankar"),
    ("Emily Clarke", "Engineer", "Engineering", "London", "Tariq Hassan"),
    ("Kwame Mensah", "Engineer", "Engineering", "Remote", "Tariq Hassan"),
    ("Sophie Martin", "Account Executive", "Sales", "Paris", "Claire Dupont"),
    ("Lucas Moreau", "Account Executive", "Sales", "Paris", "Claire Dupont"),
    ("Anna Kowalska", "Sales Engineer", "Sales", "Berlin", "Claire Dupont"),
    ("Ben Carter", "Accountant", "Finance", "London", "Noah Williams"),
    ("Priyanka Das", "Financial Analyst", "Finance", "London", "Noah Williams"),
    ("Diego Fernandez", "Support Engineer", "Support", "Lisbon", "Aisha Bello"),
    ("Hana Suzuki", "Support Engineer", "Support", "Remote", "Aisha Bello"),
    ("Omar Farouk", "Support Specialist", "Support", "Lisbon", "Aisha Bello"),
    ("Grace Liu", "People Partner", "People Ops", "Berlin", "Helena Vogt"),
    ("Sam Rivera", "Recruiter", "People Ops", "Remote", "Grace Liu"),
    ("Anna Berg", "Engineer", "Engineering", "Berlin", "Jonas Weber"),
]
COUNTRY = {"Berlin": "Germany", "Paris": "France", "London": "United Kingdom", "Lisbon": "Portugal", "Remote": None}


def _build() -> tuple[dict[str, dict], dict[str, list[dict]]]:
    rng = random.Random(77)
    ids = rng.sample(range(1100, 1999), len(STAFF))
    by_name = {name: f"E-{i}" for (name, *_), i in zip(STAFF, ids)}
    people, leave = {}, {}
    for (name, title, dept, office, manager), eid in zip(STAFF, by_name.values()):
        first, last = name.lower().split(" ", 1)
        start = date(2016, 1, 4) + timedelta(days=rng.randrange(0, 8 * 365))
        people[eid] = {
            "employee_id": eid, "name": name, "title": title, "department": dept,
            "start_date": start.isoformat(),
            "location": {"office": office, "country": COUNTRY[office]},
            "manager": None if manager is None else {"employee_id": by_name[manager], "name": manager},
            "contact": {"email": f"{first}.{last.replace(' ', '')}@lumen.co", "phone_ext": str(2000 + rng.randrange(999))},
            "leave_balance": {"annual_days_left": rng.randrange(0, 26), "sick_days_taken": rng.randrange(0, 9)},
        }
        requests = []
        for year in (2024, 2025):
            for _ in range(rng.randrange(1, 4)):
                begin = date(year, 1, 1) + timedelta(days=rng.randrange(0, 350))
                while begin.weekday() > 4:
                    begin += timedelta(days=1)
                days = rng.choice([1, 2, 3, 5, 5, 10])
                end = begin + timedelta(days=days - 1 + 2 * ((begin.weekday() + days - 1) // 5))
                requests.append({"request_id": f"LR-{rng.randrange(10000, 99999)}", "type": rng.choice(["vacation", "vacation", "sick", "parental", "unpaid"]),
                                 "start": begin.isoformat(), "end": end.isoformat(), "working_days": days,
                                 "status": rng.choice(["approved", "approved", "approved", "pending", "rejected"])})
        leave[eid] = sorted(requests, key=lambda r: r["start"])
    return people, leave


PEOPLE, LEAVE = _build()


def _summary(p: dict) -> dict:
    return {"employee_id": p["employee_id"], "name": p["name"], "title": p["title"], "department": p["department"]}


@mcp.tool
def find_employee(name: Annotated[str, Field(description="Full or partial name, e.g. 'Weber' or 'Mina'.")]) -> dict:
    """Look up employees by name. Returns every match (employee_id, name, title, department); an empty list
    when nobody matches."""
    words = name.casefold().split()
    return {"matches": [_summary(p) for p in PEOPLE.values() if words and all(w in p["name"].casefold() for w in words)]}


@mcp.tool
def list_employees(
    department: Annotated[Department | None, Field(description="Only this department.")] = None,
    page: Annotated[int, Field(description="Page number, from 1.", ge=1)] = 1,
    page_size: Annotated[int, Field(description="Employees per page (1-20).", ge=1, le=20)] = 10,
) -> dict:
    """List employees alphabetically by name, one page at a time. `next_page` is null on the last page."""
    staff = sorted((p for p in PEOPLE.values() if department in (None, p["department"])), key=lambda p: p["name"])
    start = (page - 1) * page_size
    more = start + page_size < len(staff)
    return {"total": len(staff), "page": page, "next_page": page + 1 if more else None,
            "employees": [_summary(p) for p in staff[start:start + page_size]]}


@mcp.tool
def get_employee(employee_id: Annotated[str, Field(description="Employee id (E-1234).")]) -> dict:
    """Full profile of an employee: title, department, start date, office and country, manager, work email
    and phone extension, and leave balance."""
    person = PEOPLE.get(employee_id.strip().upper())
    if person is None:
        return {"error": f"No employee with id {employee_id!r}. Find ids with find_employee or list_employees."}
    return person


@mcp.tool
def get_time_off(
    employee_id: Annotated[str, Field(description="Employee id (E-1234).")],
    year: Annotated[int, Field(description="Calendar year of the leave's start.")] = 2025,
    status: Annotated[LeaveStatus | None, Field(description="Only requests with this status.")] = None,
) -> dict:
    """An employee's time-off requests in a year: type, first and last day, working days and status."""
    key = employee_id.strip().upper()
    if key not in PEOPLE:
        return {"error": f"No employee with id {employee_id!r}."}
    found = [r for r in LEAVE[key] if r["start"].startswith(str(year)) and status in (None, r["status"])]
    return {"employee_id": key, "year": year, "requests": found,
            "total_working_days": sum(r["working_days"] for r in found)}


@mcp.tool
def direct_reports(employee_id: Annotated[str, Field(description="The manager's employee id.")]) -> dict:
    """The people who report directly to a manager."""
    key = employee_id.strip().upper()
    if key not in PEOPLE:
        return {"error": f"No employee with id {employee_id!r}."}
    team = [_summary(p) for p in PEOPLE.values() if p["manager"] and p["manager"]["employee_id"] == key]
    return {"manager": PEOPLE[key]["name"], "count": len(team), "reports": team}


if __name__ == "__main__":
    mcp.run(show_banner=False)
