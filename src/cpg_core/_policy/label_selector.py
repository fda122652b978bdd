"""Kubernetes label selectors (``metav1.LabelSelector``) as values: what a Service, a
monitor or a Prometheus selects pods and namespaces by. Read once, matched against plain
labels, as Kubernetes matches them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from cpg_core._base.labels import LabelItems


class LabelSelectorError(ValueError):
    """A value that is no label selector; the message names where."""


@attrs.frozen(slots=True)
class LabelRequirement:
    key: str
    operator: str
    """``In``, ``NotIn``, ``Exists`` or ``DoesNotExist``."""
    values: tuple[str, ...] = ()


@attrs.frozen(slots=True)
class LabelSelector:
    """A Kubernetes label selector: ``matchLabels`` and ``matchExpressions``, all of which
    must hold (an empty selector selects everything)."""

    labels: LabelItems = ()
    expressions: tuple[LabelRequirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        for key, value in self.labels:
            if labels.get(key) != value:
                return False
        for req in self.expressions:
            present = req.key in labels
            if req.operator == "In" and (not present or labels[req.key] not in req.values):
                return False
            if req.operator == "NotIn" and present and labels[req.key] in req.values:
                return False
            if req.operator == "Exists" and not present:
                return False
            if req.operator == "DoesNotExist" and present:
                return False
        return True

    @property
    def empty(self) -> bool:
        return not (self.labels or self.expressions)

    def text(self) -> str:
        parts = [f"{k}={v}" for k, v in self.labels]
        for req in self.expressions:
            values = f" ({','.join(req.values)})" if req.values else ""
            parts.append(f"{req.key} {req.operator}{values}")
        return ",".join(parts) or "every pod"


_OPERATORS = frozenset({"In", "NotIn", "Exists", "DoesNotExist"})


def label_selector(value: Any, where: str) -> LabelSelector:
    """A Kubernetes LabelSelector object; LabelSelectorError names what is wrong."""
    if value is None:
        return LabelSelector()
    if not isinstance(value, Mapping):
        raise LabelSelectorError(f"{where} is not a label selector")
    labels = value.get("matchLabels") or {}
    if not isinstance(labels, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str | int | float | bool) for k, v in labels.items()
    ):
        raise LabelSelectorError(f"{where}.matchLabels is not a map of labels")
    expressions = []
    for index, item in enumerate(value.get("matchExpressions") or []):
        at = f"{where}.matchExpressions[{index}]"
        if not isinstance(item, Mapping) or not isinstance(item.get("key"), str):
            raise LabelSelectorError(f"{at} has no key")
        operator = item.get("operator")
        if operator not in _OPERATORS:
            raise LabelSelectorError(f"{at}: operator {operator!r} is not {_OPERATORS}")
        values = item.get("values") or []
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            raise LabelSelectorError(f"{at}.values is not a list of strings")
        expressions.append(LabelRequirement(item["key"], operator, tuple(values)))
    return LabelSelector(
        tuple(sorted((str(k), _scalar(v)) for k, v in labels.items())), tuple(expressions)
    )


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
