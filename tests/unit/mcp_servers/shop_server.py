"""A small shop MCP server for the `ajet generate explore` tests. Its ids must be discovered (the
customers' ids come from list_customers only, the orders' from get_orders only), its errors come
back as plain results ({"error": ...} and "Error: ..." text, not MCP errors), one tool has an empty
schema, one returns nothing, one a result too large to show, and one never answers in time.

    python shop_server.py        # stdio
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Literal

from fastmcp import FastMCP
from pydantic import Field

mcp = FastMCP("shop")

CUSTOMERS = {"C-17": "Ada Lovelace", "C-42": "Grace Hopper"}
ORDERS = {"C-17": ["O-5", "O-8"], "C-42": ["O-9"]}
ORDER = {"O-5": ("shipped", "A-1001", 12.5), "O-8": ("open", "B-2002", 30.0), "O-9": ("lost", "A-1001", 7.25)}
STOCK = {"A-1001": 17, "B-2002": 0}
CATALOG_CHARS = 20_000


@mcp.tool
def list_customers() -> list[dict]:
    """All customers: id and name."""
    return [{"id": cid, "name": name} for cid, name in CUSTOMERS.items()]


@mcp.tool
def get_orders(customer_id: str) -> dict:
    """The orders of one customer."""
    if customer_id not in ORDERS:
        return {"error": f"unknown customer {customer_id}"}
    return {"customer_id": customer_id,
            "orders": [{"id": oid, "total_usd": ORDER[oid][2]} for oid in ORDERS[customer_id]]}


@mcp.tool
def get_order(order_id: str) -> dict | str:
    """One order: status, SKU and total."""
    if order_id not in ORDER:
        return f"Error: no order {order_id}"
    status, sku, total = ORDER[order_id]
    return {"order_id": order_id, "status": status, "sku": sku, "total_usd": total}


@mcp.tool
def stock_of(sku: Annotated[str, Field(description="e.g. 'A-10'")]) -> dict:
    """Units in stock for a SKU."""
    if sku not in STOCK:
        return {"error": f"unknown sku {sku}; known skus: {', '.join(STOCK)}"}
    return {"sku": sku, "units": STOCK[sku]}


@mcp.tool
def customer_notes(customer_id: str) -> str:
    """Free-text notes about a customer (there are none)."""
    return ""


@mcp.tool
def catalog() -> str:
    """The whole catalog as text (about 20,000 characters)."""
    line = "sku A-1001 blue widget 12.50 USD\n"
    return (line * (CATALOG_CHARS // len(line) + 1))[:CATALOG_CHARS]


@mcp.tool
async def slow_report(region: Literal["north", "south", "east"]) -> dict:
    """A sales report for a region; it takes a minute."""
    await asyncio.sleep(60)
    return {"region": region, "report": "done"}


if __name__ == "__main__":
    mcp.run(show_banner=False)
