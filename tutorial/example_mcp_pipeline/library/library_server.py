"""A second MCP server for the pipeline's benchmark: a public library's members, books and loans.

Its ids cannot be guessed: a member id comes from `find_member`, a book id from `search_books`, a
loan id from `get_loans`, and no description names one. Errors are plain results
(`{"error": "..."}`), as many real servers write them, not MCP errors; ajet counts them as errors
all the same (ajet.tool_results). Every answer is deterministic (a fixed day, 2024-03-15; no clock,
no network), so val tasks carry exact expected answers. Members and loans are invented.

    python library_server.py               # serve over stdio (what MCP hosts spawn)
    python library_server.py --http 8766   # serve streamable HTTP at http://127.0.0.1:8766/mcp

In Python, `from library_server import mcp` and connect in memory with `fastmcp.Client(mcp)`.
"""

from __future__ import annotations

import argparse
from datetime import date, timedelta
from typing import Annotated

from fastmcp import FastMCP
from pydantic import Field

mcp = FastMCP("library", instructions="A public library: members, their loans and fines, the book catalog.")

TODAY = date(2024, 3, 15)
BRANCHES = ("Central", "Riverside", "Hillcrest", "Oakwood")
FINE_PER_DAY_USD = 0.25
FINE_CAP_USD = 10.0  # per loan
RENEWAL_FEE_PER_WEEK_USD = 0.5
RENEWAL_WEEKS = (1, 2, 3)

# member id -> (name, home branch)
MEMBERS: dict[str, tuple[str, str]] = {
    "M-2041": ("Ana Ruiz", "Riverside"),
    "M-3187": ("Ben Okafor", "Central"),
    "M-1156": ("Chloe Tanaka", "Hillcrest"),
    "M-4472": ("David Kowalski", "Central"),
    "M-2968": ("Emma Lindqvist", "Oakwood"),
    "M-3705": ("Farid Haddad", "Riverside"),
    "M-1823": ("Grace Mwangi", "Hillcrest"),
    "M-4019": ("Hugo Martin", "Oakwood"),
    "M-2533": ("Isabel Costa", "Central"),
    "M-3390": ("Jamal Reed", "Riverside"),
    "M-1648": ("Keiko Sato", "Oakwood"),
    "M-4815": ("Liam Novak", "Hillcrest"),
    "M-3052": ("Maya Ruiz", "Central"),
}

# book id -> (title, author, year, pages, available copies per branch in BRANCHES order, holds)
BOOKS: dict[str, tuple[str, str, int, int, tuple[int, int, int, int], int]] = {
    "B-1042": ("Dune", "Frank Herbert", 1965, 412, (2, 0, 1, 0), 3),
    "B-1178": ("The Left Hand of Darkness", "Ursula K. Le Guin", 1969, 304, (1, 1, 0, 0), 0),
    "B-2210": ("A Wizard of Earthsea", "Ursula K. Le Guin", 1968, 183, (0, 2, 1, 1), 0),
    "B-1359": ("Kindred", "Octavia E. Butler", 1979, 264, (0, 0, 0, 1), 2),
    "B-2087": ("Parable of the Sower", "Octavia E. Butler", 1993, 345, (1, 0, 0, 0), 1),
    "B-1605": ("Beloved", "Toni Morrison", 1987, 324, (0, 1, 0, 0), 4),
    "B-2734": ("Song of Solomon", "Toni Morrison", 1977, 337, (1, 0, 1, 0), 0),
    "B-1923": ("The Remains of the Day", "Kazuo Ishiguro", 1989, 245, (1, 1, 0, 1), 0),
    "B-2461": ("Never Let Me Go", "Kazuo Ishiguro", 2005, 288, (0, 0, 2, 0), 1),
    "B-1287": ("One Hundred Years of Solitude", "Gabriel Garcia Marquez", 1967, 417, (3, 1, 0, 1), 0),
    "B-2816": ("Things Fall Apart", "Chinua Achebe", 1958, 209, (0, 1, 1, 0), 0),
    "B-1534": ("The Name of the Rose", "Umberto Eco", 1980, 536, (0, 0, 0, 0), 5),
    "B-2392": ("Middlemarch", "George Eliot", 1871, 880, (1, 0, 0, 0), 0),
    "B-1771": ("Pride and Prejudice", "Jane Austen", 1813, 432, (2, 2, 1, 1), 0),
    "B-2649": ("Emma", "Jane Austen", 1815, 474, (1, 0, 0, 1), 0),
    "B-1490": ("The Hobbit", "J. R. R. Tolkien", 1937, 310, (2, 1, 1, 2), 2),
    "B-2955": ("Frankenstein", "Mary Shelley", 1818, 280, (1, 0, 1, 0), 0),
    "B-1816": ("Invisible Man", "Ralph Ellison", 1952, 581, (0, 0, 1, 0), 1),
    "B-2173": ("The Road", "Cormac McCarthy", 2006, 287, (0, 1, 0, 0), 0),
    "B-1068": ("Station Eleven", "Emily St. John Mandel", 2014, 333, (1, 0, 0, 2), 3),
    "B-2527": ("Educated", "Tara Westover", 2018, 334, (0, 2, 0, 1), 6),
    "B-1944": ("Sapiens", "Yuval Noah Harari", 2011, 443, (2, 0, 1, 0), 0),
}

# loan id -> (member id, book id, due date)
LOANS: dict[str, tuple[str, str, date]] = {
    "L-7310": ("M-2041", "B-1042", date(2024, 3, 8)),
    "L-7352": ("M-2041", "B-2461", date(2024, 3, 22)),
    "L-6921": ("M-3187", "B-1534", date(2024, 2, 27)),
    "L-7048": ("M-1156", "B-1359", date(2024, 3, 13)),
    "L-7095": ("M-1156", "B-2087", date(2024, 3, 13)),
    "L-7411": ("M-1156", "B-1068", date(2024, 3, 29)),
    "L-6604": ("M-2968", "B-2392", date(2024, 1, 19)),
    "L-7267": ("M-3705", "B-1287", date(2024, 3, 19)),
    "L-7290": ("M-3705", "B-2816", date(2024, 3, 5)),
    "L-7133": ("M-1823", "B-1605", date(2024, 3, 1)),
    "L-7389": ("M-4019", "B-1490", date(2024, 3, 26)),
    "L-6987": ("M-2533", "B-1771", date(2024, 3, 11)),
    "L-7001": ("M-2533", "B-2649", date(2024, 3, 11)),
    "L-7204": ("M-2533", "B-2955", date(2024, 3, 20)),
    "L-7176": ("M-3390", "B-1816", date(2024, 2, 20)),
    "L-7428": ("M-1648", "B-1923", date(2024, 4, 2)),
    "L-7342": ("M-4815", "B-2173", date(2024, 3, 14)),
    "L-6855": ("M-3052", "B-1944", date(2024, 2, 29)),
}


def _words(text: object) -> list[str]:
    return str(text).replace(".", " ").casefold().split()


def _matches(query: object, *fields: str) -> bool:
    """Every word of the query is part of the fields (case-insensitive, dots ignored: 'J.R.R.')."""
    wanted = _words(query)
    have = " ".join(" ".join(_words(f)) for f in fields)
    return bool(wanted) and all(word in have for word in wanted)


def _id(value: object) -> str:
    return str(value).strip().upper()


def _loan_view(loan_id: str) -> dict:
    _, book_id, due = LOANS[loan_id]
    overdue = max(0, (TODAY - due).days)
    return {
        "loan_id": loan_id,
        "book_id": book_id,
        "title": BOOKS[book_id][0],
        "due": due.isoformat(),
        "days_overdue": overdue,
        "fine_usd": min(FINE_CAP_USD, overdue * FINE_PER_DAY_USD),
    }


# Descriptions are short: every word of them is in every prompt of a 135M model.
@mcp.tool
def find_member(name: Annotated[str, Field(description="full or partial name")]) -> dict:
    """Find library members by name: member_id and home branch."""
    found = [{"member_id": mid, "name": n, "branch": b} for mid, (n, b) in MEMBERS.items() if _matches(name, n)]
    if not found:
        return {"error": f"no member matches {name!r}; give a first or last name"}
    return {"members": found}


@mcp.tool
def get_loans(member_id: Annotated[str, Field(description="from find_member")]) -> dict:
    """A member's current loans: loan_id, title, due date, days overdue, fine in USD."""
    member = _id(member_id)
    if member not in MEMBERS:
        return {"error": f"unknown member id {member_id!r}; look it up with find_member"}
    loans = [_loan_view(lid) for lid, (mid, _, _) in LOANS.items() if mid == member]
    total = round(sum((loan["fine_usd"] for loan in loans), 0.0), 2)
    return {"member_id": member, "name": MEMBERS[member][0], "loans": loans, "total_fine_usd": total}


@mcp.tool
def search_books(query: Annotated[str, Field(description="words of a title or author")]) -> dict:
    """Search the catalog by title or author: book_id, title, author, year."""
    found = [{"book_id": bid, "title": t, "author": a, "year": y}
             for bid, (t, a, y, *_) in BOOKS.items() if _matches(query, t, a)]
    if not found:
        return {"error": f"no book matches {query!r}; search a word of the title or the author's name"}
    return {"books": found}


@mcp.tool
def get_book(book_id: Annotated[str, Field(description="from search_books")]) -> dict:
    """A book's pages, copies available at each branch, and holds waiting."""
    book = _id(book_id)
    if book not in BOOKS:
        return {"error": f"unknown book id {book_id!r}; find ids with search_books"}
    title, author, _, pages, copies, holds = BOOKS[book]
    return {
        "book_id": book,
        "title": title,
        "author": author,
        "pages": pages,
        "available": dict(zip(BRANCHES, copies)),
        "total_available": sum(copies),
        "holds": holds,
    }


@mcp.tool
def renew_quote(
    loan_id: Annotated[str, Field(description="from get_loans")],
    weeks: Annotated[int, Field(description="weeks to extend")],
) -> dict:
    """Price of renewing a loan: new due date, renewal fee, fine and total in USD."""
    loan = _id(loan_id)
    if loan not in LOANS:
        return {"error": f"unknown loan id {loan_id!r}; list a member's loans with get_loans"}
    if weeks not in RENEWAL_WEEKS:
        return {"error": f"weeks must be one of {', '.join(map(str, RENEWAL_WEEKS))}, got {weeks!r}"}
    view = _loan_view(loan)
    # An overdue loan is renewed from today, not from its past due date.
    start = max(LOANS[loan][2], TODAY)
    fee = weeks * RENEWAL_FEE_PER_WEEK_USD
    return {
        "loan_id": loan,
        "title": view["title"],
        "new_due": (start + timedelta(weeks=weeks)).isoformat(),
        "renewal_fee_usd": fee,
        "fine_usd": view["fine_usd"],
        "total_usd": round(fee + view["fine_usd"], 2),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Serve the library MCP tools.")
    parser.add_argument("--http", type=int, metavar="PORT", help="serve streamable HTTP on 127.0.0.1:PORT/mcp")
    args = parser.parse_args(argv)
    if args.http is not None:
        mcp.run(transport="http", host="127.0.0.1", port=args.http, show_banner=False)
    else:
        mcp.run(show_banner=False)


if __name__ == "__main__":
    main()
