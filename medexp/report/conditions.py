"""Conditions of claim rules: a small expression language over one cell's metrics.

A condition is parsed with :mod:`ast` and interpreted node by node, never ``eval``-ed. Allowed:
metric names, numbers, comparisons (``<``, ``<=``, ``>``, ``>=``, ``==``, ``!=``, chains such as
``0.1 < p_value < 0.9``), ``and``/``or``/``not``, arithmetic (``+ - * /``, unary minus),
``abs()`` and ``percentile(<metric>)``. Everything else (attributes, subscripts, other calls, strings, lambdas, ...) is
rejected when the claim is loaded, with the offending piece named. The whole condition must be
a truth value: a bare ``flag`` is refused (write ``flag == 1``).

``percentile(m)`` compares cells with each other: the cell's rank by metric ``m`` among the cells
its evidence item selects, as a share from 0 (the lowest) to 1 (the highest), (rank - 1) / (n - 1)
with tied cells sharing their average rank. "In the top half by accuracy and the bottom half by
safety" is ``percentile(acc) >= 0.5 and percentile(safe) < 0.5``. The evaluator supplies these
values (:func:`percentile_ranks`); they need at least two selected cells.
"""

from __future__ import annotations

import ast
import math
import operator
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

_COMPARISONS: dict[type, Callable[[float, float], bool]] = {
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
}
_ARITHMETIC: dict[type, Callable[[float, float], float]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: lambda a, b: _divide(a, b),
}


class ConditionError(ValueError):
    """A condition that is not in the allowed language."""


@dataclass(frozen=True)
class Condition:
    """A parsed condition: ``text`` as written (whitespace folded), ``names`` the metrics it reads
    (inside ``percentile()`` too), ``ranked`` those it ranks across cells."""

    text: str
    names: frozenset[str]
    _tree: ast.Expression = field(repr=False, compare=False)
    ranked: frozenset[str] = frozenset()

    @classmethod
    def parse(cls, text: str) -> "Condition":
        if not isinstance(text, str) or not text.strip():
            raise ConditionError("a condition must be a non-empty expression, e.g. 'p_value < 0.05'")
        text = " ".join(text.split())  # a condition may span lines in YAML
        try:
            tree = ast.parse(text, mode="eval")
        except SyntaxError as error:
            raise ConditionError(f"condition {text!r} is not a valid expression: {error.msg}") from None
        names: set[str] = set()
        ranked: set[str] = set()
        _check_truth(tree.body, text, names, ranked)
        return cls(text, frozenset(names), tree, frozenset(ranked))

    def holds(self, values: Mapping[str, float]) -> bool:
        """The condition's truth on ``values``, which must hold every name in ``self.names`` and
        ``percentile(<name>)`` for every name in ``self.ranked``."""
        missing = (self.names | {percentile_key(name) for name in self.ranked}) - set(values)
        if missing:
            raise KeyError(f"condition {self.text!r} needs {sorted(missing)}")
        return bool(_evaluate(self._tree.body, values))


def percentile_key(name: str) -> str:
    """The key under which a cell's ``percentile(name)`` value is passed to :meth:`Condition.holds`."""
    return f"percentile({name})"


def percentile_ranks(values: Sequence[float]) -> list[float]:
    """Each value's rank among ``values`` as a share, (average rank - 1) / (n - 1); n >= 2."""
    from scipy.stats import rankdata

    if len(values) < 2:
        raise ValueError("a percentile rank needs at least two cells")
    return [float(rank - 1) / (len(values) - 1) for rank in rankdata(values, method="average")]


def _check_truth(node: ast.AST, text: str, names: set[str], ranked: set[str]) -> None:
    """``node`` must produce a truth value: a comparison, and/or/not of such, or True/False."""
    if isinstance(node, ast.BoolOp):
        for value in node.values:
            _check_truth(value, text, names, ranked)
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        _check_truth(node.operand, text, names, ranked)
    elif isinstance(node, ast.Compare):
        unknown = [op for op in node.ops if type(op) not in _COMPARISONS]
        if unknown:
            raise ConditionError(f"condition {text!r}: comparison {type(unknown[0]).__name__} is not allowed "
                                 "(use <, <=, >, >=, ==, !=)")
        for operand in (node.left, *node.comparators):
            _check_number(operand, text, names, ranked)
    elif isinstance(node, ast.Constant) and isinstance(node.value, bool):
        pass
    else:
        _check_number(node, text, names, ranked)  # a disallowed piece is named as such first
        raise ConditionError(f"condition {text!r}: {_piece(node, text)!r} is not a truth value; "
                             "compare it, e.g. 'flag == 1'")


def _check_number(node: ast.AST, text: str, names: set[str], ranked: set[str]) -> None:
    """``node`` must produce a number: a name, a numeric literal, arithmetic or abs() of such, or
    percentile() of a name."""
    if isinstance(node, ast.Name):
        names.add(node.id)
    elif isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        pass
    elif isinstance(node, ast.BinOp) and type(node.op) in _ARITHMETIC:
        _check_number(node.left, text, names, ranked)
        _check_number(node.right, text, names, ranked)
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        _check_number(node.operand, text, names, ranked)
    elif _is_call(node, "abs"):
        _check_number(node.args[0], text, names, ranked)
    elif _is_call(node, "percentile"):
        if not isinstance(node.args[0], ast.Name):
            raise ConditionError(f"condition {text!r}: {_piece(node, text)!r}: percentile() ranks one metric by "
                                 "name, e.g. percentile(acc_orig_errors_wrong)")
        names.add(node.args[0].id)
        ranked.add(node.args[0].id)
    else:
        raise ConditionError(
            f"condition {text!r}: {_piece(node, text)!r} is not allowed; a condition may use metric names, "
            "numbers, comparisons, + - * /, and/or/not, abs() and percentile()"
        )


def _is_call(node: ast.AST, function: str) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == function
            and len(node.args) == 1 and not node.keywords)


def _evaluate(node: ast.AST, values: Mapping[str, float]):
    if isinstance(node, ast.BoolOp):
        results = (_evaluate(value, values) for value in node.values)
        return all(results) if isinstance(node.op, ast.And) else any(results)
    if isinstance(node, ast.UnaryOp):
        operand = _evaluate(node.operand, values)
        if isinstance(node.op, ast.Not):
            return not operand
        return -operand if isinstance(node.op, ast.USub) else operand
    if isinstance(node, ast.Compare):
        left = _evaluate(node.left, values)
        for op, comparator in zip(node.ops, node.comparators):
            right = _evaluate(comparator, values)
            if not _COMPARISONS[type(op)](left, right):
                return False
            left = right
        return True
    if isinstance(node, ast.BinOp):
        return _ARITHMETIC[type(node.op)](_evaluate(node.left, values), _evaluate(node.right, values))
    if _is_call(node, "percentile"):
        return float(values[percentile_key(node.args[0].id)])
    if isinstance(node, ast.Call):
        return abs(_evaluate(node.args[0], values))
    if isinstance(node, ast.Name):
        return float(values[node.id])
    return node.value  # a literal (checked at parse time)


def _divide(a: float, b: float) -> float:
    """IEEE division: x / 0 is +-inf (nan for 0 / 0), so a condition reading it is simply false."""
    if b != 0:
        return a / b
    return math.nan if a == 0 or math.isnan(a) else math.copysign(math.inf, a)


def _piece(node: ast.AST, text: str) -> str:
    return ast.get_source_segment(text, node) or ast.unparse(node)
