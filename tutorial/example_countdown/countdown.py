"""The countdown game: reach a target from given numbers with + - * /.

Two rules: `use_all=True`, each number used exactly once; `use_all=False` (Countdown's own rule, the
tutorial's), each number at most once and at least two of them, so a target may take one operation
(`3 + 7`) or two (`(3 + 7) * 5`).

Pure Python, no ajet and no AgentScope: the verifier the judge uses, the answer extraction, the
solver `make_data.py` builds demonstrations with, and the written search (`search_trace`) of the
`search` demonstrations. Arithmetic is exact (`fractions.Fraction`),
so `6 / 4 * 2` is 3, not 2.9999.
"""

from __future__ import annotations

import ast
import itertools
import operator
import re
from collections import Counter
from collections.abc import Iterator
from fractions import Fraction

MAX_EXPRESSION_CHARS = 120
_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
_OPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/"}
_SEARCH_OPS = {"+": operator.add, "*": operator.mul, "-": operator.sub}  # search_trace's order


class InvalidExpression(ValueError):
    """The text is not an arithmetic expression of integers with + - * / and parentheses."""


def extract_answer(text: str | None) -> str | None:
    """The last `<answer>...</answer>` in `text`, stripped; None when there is none."""
    found = _ANSWER.findall(text or "")
    return found[-1].strip() if found else None


def parse(expression: str) -> tuple[Fraction, list[int]]:
    """(value, the integer literals in order) of `expression`; raise InvalidExpression otherwise."""
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise InvalidExpression(f"longer than {MAX_EXPRESSION_CHARS} characters")
    text = expression.replace("×", "*").replace("÷", "/")
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError:
        raise InvalidExpression(f"not an expression: {expression!r}") from None
    numbers: list[int] = []
    return _value(tree.body, numbers), numbers


def _value(node: ast.AST, numbers: list[int]) -> Fraction:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        numbers.append(node.value)
        return Fraction(node.value)
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        left, right = _value(node.left, numbers), _value(node.right, numbers)
        if isinstance(node.op, ast.Add):
            return left + right
        if isinstance(node.op, ast.Sub):
            return left - right
        if isinstance(node.op, ast.Mult):
            return left * right
        if right == 0:
            raise InvalidExpression("division by zero")
        return left / right
    raise InvalidExpression(f"only integers, + - * / and parentheses are allowed, not {ast.dump(node)[:40]}")


def uses_allowed(used: list[int], numbers: list[int], use_all: bool = True) -> bool:
    """Whether the literals `used` follow the rule: all of `numbers` once each (use_all), else a sub-multiset
    of them with at least two."""
    if use_all:
        return Counter(used) == Counter(numbers)
    return len(used) >= 2 and not Counter(used) - Counter(numbers)


def verify(expression: str | None, numbers: list[int], target: int, use_all: bool = True) -> tuple[bool, str]:
    """(solved, why): `expression` uses `numbers` by the rule (see `uses_allowed`) and equals `target`."""
    if expression is None:
        return False, "no <answer>...</answer>"
    try:
        value, used = parse(expression)
    except InvalidExpression as exc:
        return False, f"invalid: {exc}"
    if not uses_allowed(used, numbers, use_all):
        rule = "each of {} once" if use_all else "at least two of {}, each at most once"
        return False, f"uses {sorted(used)}, not {rule.format(sorted(numbers))}"
    if value != target:
        return False, f"equals {value}, not {target}"
    return True, "solved"


def solve(numbers: list[int], target: int, use_all: bool = True) -> str | None:
    """An expression equal to `target` by the rule, or None: of all `numbers` (use_all), else of the fewest
    of them (two before three). Exhaustive: fine for <= 4."""
    sizes = [len(numbers)] if use_all else range(2, len(numbers) + 1)
    for size in sizes:
        for picked in itertools.combinations(range(len(numbers)), size):
            for expression, value in expressions(tuple(numbers[i] for i in picked)):
                if value == target:
                    return expression
    return None


def expressions(numbers: tuple[int, ...]) -> Iterator[tuple[str, Fraction]]:
    """Every (expression, value) combining all of `numbers`, the given order and left-nested forms first."""
    if len(numbers) == 1:
        yield str(numbers[0]), Fraction(numbers[0])
        return
    seen = set()
    for order in itertools.permutations(range(len(numbers))):
        for split in range(len(numbers) - 1, 0, -1):  # left-nested first: (a + b) + c
            left = tuple(numbers[i] for i in order[:split])
            right = tuple(numbers[i] for i in order[split:])
            if (left, right) in seen:
                continue
            seen.add((left, right))
            for (le, lv), (re_, rv) in itertools.product(list(expressions(left)), list(expressions(right))):
                ls = le if len(left) == 1 else f"({le})"
                rs = re_ if len(right) == 1 else f"({re_})"
                yield f"{ls} + {rs}", lv + rv
                yield f"{ls} - {rs}", lv - rv
                yield f"{ls} * {rs}", lv * rv
                if rv != 0:
                    yield f"{ls} / {rs}", lv / rv


def search_trace(numbers: list[int], target: int) -> tuple[str, str | None]:
    """(the worked search, its answer or None) for three numbers under Countdown's rule: a procedure
    simple enough for a small model to learn and carry out, written compactly (`5+8=13`).

    For each pair in order (first and second, first and third, second and third) and each of + * -
    (the larger number first), one line: the pair's result, then that result combined with the
    remaining number by + * - (`13+1=14, 13*1=13, 13-1=12`). The search stops at the first value equal
    to the target. Every + - * target of two or three numbers is found, since
    `z - (x - y) = (y - x) + z` and `x - (y + z)` is the pair sum subtracted.
    """
    if len(numbers) != 3:
        raise ValueError(f"search_trace takes three numbers, not {len(numbers)}")
    lines: list[str] = []
    for i, j, k in ((0, 1, 2), (0, 2, 1), (1, 2, 0)):
        x, y, z = numbers[i], numbers[j], numbers[k]
        for op, apply in _SEARCH_OPS.items():
            a, b = (max(x, y), min(x, y)) if op == "-" else (x, y)
            pair, value = f"{a}{op}{b}", apply(a, b)
            steps = [f"{pair}={value}"]
            answer = pair if value == target else None
            for op2, apply2 in _SEARCH_OPS.items() if answer is None else ():
                if op2 == "-" and value < z:
                    step, result, candidate = f"{z}-{value}", z - value, f"{z}-({pair})"
                else:
                    step, result, candidate = f"{value}{op2}{z}", apply2(value, z), f"({pair}){op2}{z}"
                steps.append(f"{step}={result}")
                if result == target:
                    answer = candidate
                    break
            lines.append(", ".join(steps))
            if answer is not None:
                return "\n".join(lines), answer
    return "\n".join(lines), None
