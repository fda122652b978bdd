"""What a CEL expression costs the API server, metered on a document.

cel-go (the API server's CEL) counts a runtime cost for each evaluation and stops one that
goes over its limit; the Python CEL engines have no such counter. This meter evaluates with
cel-python (a pure-Python CEL interpreter) and charges as cel-go's cost tracker does, a little
more where it is unsure: one unit per identifier, field, index, call and operator, one per
macro iteration (with no early stop in ``all``/``exists``, which cel-go has), ten per list
and thirty per map built, strings by length (a tenth of a unit per character, a regular
expression by its length times the text's), ``in`` on a list by the list's size, and a list
concatenation by the size of the result. ``&&``, ``||`` and ``?:`` stop early as in cel-go.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import celpy
from celpy import celtypes
from celpy.evaluation import Evaluator, base_functions

PER_CALL_LIMIT = 1_000_000
"""cel-go's limit for one expression in the API server (``PerCallLimit``)."""
RUNTIME_BUDGET = 10_000_000
"""The API server's budget for one policy's evaluation, variables included
(``RuntimeCELCostBudget``)."""


_ALWAYS = ("ident_arg", "member_dot", "member_index", "member_dot_arg")
"""A call, a field, an index, a method: a unit each."""
_OPERATORS = ("relation", "addition", "multiplication", "unary")
"""With two children, an operator: a unit."""


class Meter:
    units = 0


def _text_cost(value: Any) -> int:
    return math.ceil(0.1 * len(value)) if isinstance(value, str) else 0


class _MeteredEvaluator(Evaluator):  # type: ignore[misc]
    def sub_evaluator(self, ast: Any) -> Evaluator:
        return _MeteredEvaluator(ast, activation=self.activation)

    def evaluate(self, context: Any = None) -> Any:
        if context:
            Meter.units += 1  # one iteration of a macro
        return super().evaluate(context)

    def visit(self, tree: Any) -> Any:
        data = tree.data
        children = tree.children
        if data == "primary":
            kind = getattr(children[0], "data", "")
            Meter.units += {"ident": 1, "list_lit": 10, "map_lit": 30}.get(kind, 0)
        elif data in _ALWAYS or (data in _OPERATORS and len(children) == 2):
            Meter.units += 1
        elif data in ("conditionalor", "conditionaland") and len(children) == 2:
            Meter.units += 1
            return self._short_circuit(tree, data == "conditionalor")
        return super().visit(tree)

    def _short_circuit(self, tree: Any, is_or: bool) -> Any:
        left = self.visit(tree.children[0])
        if isinstance(left, celtypes.BoolType) and bool(left) is is_or:
            return left
        right = self.visit(tree.children[1])
        function = self.activation.resolve_function("_||_" if is_or else "_&&_")
        return function(left, right)


class _MeteredRunner(celpy.InterpretedRunner):  # type: ignore[misc]
    def evaluate(self, context: Any) -> Any:
        return _MeteredEvaluator(ast=self.ast, activation=self.new_activation()).evaluate(context)


def _charged(name: str, cost: Callable[..., int], function: Callable[..., Any]) -> Any:
    def call(*args: Any) -> Any:
        Meter.units += cost(*args)
        return function(*args)

    call.__name__ = name
    return call


def _equality_cost(left: Any, right: Any) -> int:
    if isinstance(left, str) and isinstance(right, str):
        return min(_text_cost(left), _text_cost(right))
    return 0


def _in_cost(item: Any, container: Any) -> int:
    if isinstance(container, list):
        return len(container) * max(1, _text_cost(item))
    return 0


def _add_cost(left: Any, right: Any) -> int:
    if isinstance(left, list) and isinstance(right, list):
        return len(left) + len(right)
    return _text_cost(left) + _text_cost(right) if isinstance(left, str) else 0


def _pattern_cost(text: Any, pattern: Any) -> int:
    return math.ceil(0.1 * (1 + len(str(text)))) * math.ceil(0.25 * len(str(pattern)))


def _search_cost(text: Any, needle: Any = "", *_rest: Any) -> int:
    return max(1, _text_cost(text)) * max(1, _text_cost(needle))


def _strings() -> dict[str, Callable[..., Any]]:
    """Kubernetes' strings extension (cel-python has only the standard library)."""
    s = celtypes.StringType

    def split(text: Any, separator: Any, limit: Any = None) -> Any:
        count = -1 if limit is None or int(limit) < 0 else int(limit) - 1
        parts = [] if count == -1 and limit is not None and int(limit) == 0 else None
        if parts is None:
            parts = str(text).split(str(separator), count) if str(separator) else list(text)
        return celtypes.ListType([s(p) for p in parts])

    def char_at(text: Any, index: Any) -> Any:
        return s(str(text)[int(index)] if int(index) < len(str(text)) else "")

    def index_of(text: Any, needle: Any, offset: Any = 0) -> Any:
        return celtypes.IntType(str(text).find(str(needle), int(offset)))

    def substring(text: Any, start: Any, end: Any = None) -> Any:
        return s(str(text)[int(start) :] if end is None else str(text)[int(start) : int(end)])

    return {
        "split": _charged("split", lambda t, *a: 1 + 2 * _text_cost(t), split),
        "charAt": _charged("charAt", lambda *a: 1, char_at),
        "indexOf": _charged("indexOf", _search_cost, index_of),
        "lastIndexOf": _charged(
            "lastIndexOf", _search_cost, lambda t, n: celtypes.IntType(str(t).rfind(str(n)))
        ),
        "lowerAscii": _charged("lowerAscii", lambda t: 1 + _text_cost(t), lambda t: s(t.lower())),
        "upperAscii": _charged("upperAscii", lambda t: 1 + _text_cost(t), lambda t: s(t.upper())),
        "substring": _charged("substring", lambda t, *a: 1 + _text_cost(t), substring),
        "join": _charged(
            "join",
            lambda items, separator="": 1 + sum(_text_cost(i) for i in items) + len(items),
            lambda items, separator="": s(str(separator).join(str(i) for i in items)),
        ),
        "replace": _charged(
            "replace",
            lambda t, a, b: 1 + 2 * _text_cost(t),
            lambda t, a, b: s(str(t).replace(str(a), str(b))),
        ),
    }


def _functions() -> dict[str, Callable[..., Any]]:
    standard: Mapping[str, Callable[..., Any]] = base_functions
    return {
        **_strings(),
        "_==_": _charged("eq", _equality_cost, standard["_==_"]),
        "_!=_": _charged("ne", _equality_cost, standard["_!=_"]),
        "_in_": _charged("in", _in_cost, standard["_in_"]),
        "_+_": _charged("add", _add_cost, standard["_+_"]),
        "matches": _charged("matches", _pattern_cost, standard["matches"]),
        "contains": _charged("contains", _search_cost, standard["contains"]),
        "startsWith": _charged("startsWith", _search_cost, standard["startsWith"]),
        "endsWith": _charged("endsWith", _search_cost, standard["endsWith"]),
    }


class MeteredProgram:
    """One expression compiled for the meter."""

    def __init__(self, expression: str) -> None:
        environment = celpy.Environment(runner_class=_MeteredRunner)
        self.program = environment.program(environment.compile(expression), functions=_functions())

    def cost(self, activation: Mapping[str, Any]) -> tuple[Any, int]:
        """The value and the units its evaluation cost."""
        Meter.units = 0
        value = self.program.evaluate(activation)
        return value, Meter.units


def to_cel(value: Any) -> Any:
    return celpy.json_to_cel(value)
