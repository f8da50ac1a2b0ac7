"""Numbers written in free text: the one scanner the judges (exact_match, math_boxed, grounded,
tool_reference) and the task generator read, so "which numbers does this answer state" has one answer.

A number is an optional sign, digits (with thousands commas only in groups of three: '1,234,567'),
decimals and an exponent, and does not continue a word or another number: 'v2', 'SmolLM2' and the '.3'
of '1.2.3' are not numbers. (Two copies of `numbers_in` once disagreed on exactly these cases.)
"""

from __future__ import annotations

import math
import re
from typing import Any

_NUMBER = re.compile(r"(?<![\w.])[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)?(?:\.\d+)?(?:[eE][-+]?\d+)?")


def parse_number(value: Any) -> float | None:
    """A number from an int/float or a numeric string ('1,234', '3/4', '-2.50', '1e3'); else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value) if math.isfinite(value) else None
    if not isinstance(value, str):
        return None
    text = value.strip().replace(" ", "")
    if re.fullmatch(r"[-+]?\d{1,3}(,\d{3})+(\.\d+)?", text):
        text = text.replace(",", "")
    fraction = re.fullmatch(r"([-+]?\d+(?:\.\d+)?)/(\d+(?:\.\d+)?)", text)
    if fraction:
        denominator = float(fraction.group(2))
        return float(fraction.group(1)) / denominator if denominator else None
    try:
        number = float(text)
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def written_numbers(text: str) -> list[tuple[float, int]]:
    """(value, decimals written) of every number in `text`, in order: '2.50' is (2.5, 2)."""
    found = []
    for match in _NUMBER.finditer(text):
        token = match.group(0)
        if not any(ch.isdigit() for ch in token):
            continue
        number = parse_number(token)
        if number is not None:
            mantissa = token.lower().split("e")[0]
            found.append((number, len(mantissa.split(".")[1]) if "." in mantissa else 0))
    return found


def numbers_in(text: str) -> list[float]:
    """Every number written in `text`, in order ('1,234.5' is one number)."""
    return [value for value, _ in written_numbers(text)]
