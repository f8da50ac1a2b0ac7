"""The math tutorial's tool and prompt, shared by the agent and the data script.

The one tool is a calculator that evaluates arithmetic safely (an `ast` walk, no eval). Only
numbers, + - * / // % **, unary signs and parentheses are allowed; anything else (names, calls,
attributes, strings) is refused with a message the agent can read and act on.
"""

from __future__ import annotations

import ast
import json
import operator
from typing import Any

SYSTEM_PROMPT = (
    "You solve arithmetic word problems. Use the calculator tool for the arithmetic, "
    "then give the final answer as \\boxed{N}."
)

MAX_LENGTH = 200
MAX_EXPONENT = 64
MAX_MAGNITUDE = 1e100

CALCULATOR_SPEC: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "calculator",
        "description": "Evaluate an arithmetic expression with + - * / // % ** and parentheses; returns the number.",
        "parameters": {
            "type": "object",
            "properties": {"expression": {"type": "string", "description": "For example '12 * (3 + 4)'."}},
            "required": ["expression"],
        },
    },
}

_BINARY = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY = {ast.UAdd: operator.pos, ast.USub: operator.neg}


class CalculatorError(ValueError):
    """The expression is not plain arithmetic, or its value cannot be computed."""


def evaluate(expression: str) -> int | float:
    """The value of `expression`; integral results come back as int (so '7 * 6' gives 42, not 42.0)."""
    if not isinstance(expression, str) or not expression.strip():
        raise CalculatorError("expression must be a non-empty string such as '12 * (3 + 4)'")
    if len(expression) > MAX_LENGTH:
        raise CalculatorError(f"expression has {len(expression)} characters; the limit is {MAX_LENGTH}")
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError:
        raise CalculatorError(f"not an arithmetic expression: {expression!r}") from None
    value = _eval(tree.body)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _eval(node: ast.AST) -> int | float:
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_eval(node.operand))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _eval(node.left), _eval(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > MAX_EXPONENT:
            raise CalculatorError(f"exponent {right} is too large; the limit is {MAX_EXPONENT}")
        try:
            value = _BINARY[type(node.op)](left, right)
        except ZeroDivisionError:
            raise CalculatorError("division by zero") from None
        except OverflowError:
            raise CalculatorError("the result is too large") from None
        if isinstance(value, complex):
            raise CalculatorError("the result is not a real number")
        if abs(value) > MAX_MAGNITUDE:
            raise CalculatorError(f"the result exceeds {MAX_MAGNITUDE:g}")
        return value
    raise CalculatorError(f"only numbers, + - * / // % ** and parentheses are allowed, not {ast.unparse(node)!r}")


def run_calculator(arguments: str | dict | None) -> tuple[str, dict[str, Any]]:
    """Run one calculator call. Returns the tool message's content and the call's record
    {'name', 'arguments' (a dict when they parse), 'result' | 'error'}. Never raises."""
    record: dict[str, Any] = {"name": "calculator", "arguments": arguments}
    try:
        args = json.loads(arguments) if isinstance(arguments, str) else (arguments or {})
    except json.JSONDecodeError as exc:
        record["error"] = f"arguments are not valid JSON ({exc.msg}): {str(arguments)[:200]}"
        return f"Error: {record['error']}", record
    if isinstance(args, dict):
        record["arguments"] = args
    if not isinstance(args, dict) or "expression" not in args:
        record["error"] = 'arguments must be a JSON object like {"expression": "12 * 7"}'
        return f"Error: {record['error']}", record
    try:
        record["result"] = evaluate(args["expression"])
    except CalculatorError as exc:
        record["error"] = str(exc)
        return f"Error: {exc}", record
    return str(record["result"]), record
