"""The tutorial's local tool set: a small shop's prices, stock and currency rates, as plain Python
functions. Every framework tutorial here wraps these same three functions in its own tool type, so
the five agents differ only in how their framework talks to the model.

The data are fixed (no clock, no network): tasks carry exact expected numbers. A wrong argument is
answered, not raised: `{"error": "..."}` naming the valid values goes back to the model as the tool's
result (some frameworks, LangGraph's ToolNode among them, let a tool's exception end the run).
"""

from __future__ import annotations

# Item -> (price in USD, units in stock).
ITEMS: dict[str, tuple[float, int]] = {
    "hammer": (12.5, 40),
    "screwdriver": (6.75, 85),
    "wrench": (14.2, 23),
    "drill": (89.0, 7),
    "saw": (24.3, 16),
    "tape measure": (9.4, 52),
    "ladder": (129.0, 4),
    "paint brush": (4.6, 120),
    "flashlight": (18.9, 31),
    "glue gun": (21.5, 12),
    "level": (16.8, 27),
    "toolbox": (39.5, 9),
    "shovel": (27.9, 18),
    "rake": (19.6, 22),
    "sander": (64.0, 6),
    "clamp": (8.3, 64),
    "chisel": (11.7, 35),
    "pliers": (10.2, 47),
    "stapler": (15.4, 29),
    "crowbar": (22.8, 14),
}

# Currency -> units of it for one USD.
RATES: dict[str, float] = {"EUR": 0.92, "GBP": 0.79, "JPY": 151.0, "CAD": 1.37}


def _item(name: str) -> str | None:
    """The item's key: case and spacing ignored, a plural 's' too; None when the shop has no such item."""
    key = " ".join(str(name).lower().split())
    return next((c for c in (key, key.removesuffix("s")) if c in ITEMS), None)


def _unknown(what: str, value: object, known: object) -> dict:
    return {"error": f"unknown {what} {value!r}; known: {', '.join(known)}"}


def get_price(item: str) -> dict:
    """Price of one item in the shop, in USD."""
    name = _item(item)
    return {"item": name, "price_usd": ITEMS[name][0]} if name else _unknown("item", item, ITEMS)


def get_stock(item: str) -> dict:
    """How many units of an item the shop has in stock."""
    name = _item(item)
    return {"item": name, "in_stock": ITEMS[name][1]} if name else _unknown("item", item, ITEMS)


def convert_currency(amount_usd: float, currency: str) -> dict:
    """Convert an amount in USD to EUR, GBP, JPY or CAD."""
    code = str(currency).upper().strip()
    if code not in RATES:
        return _unknown("currency", currency, RATES)
    try:
        amount = round(float(amount_usd) * RATES[code], 2)
    except (TypeError, ValueError):
        return {"error": f"amount_usd must be a number, got {amount_usd!r}"}
    return {"amount_usd": amount_usd, "currency": code, "amount": amount}


TOOLS = [get_price, get_stock, convert_currency]
