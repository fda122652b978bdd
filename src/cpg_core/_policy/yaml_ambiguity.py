"""What one YAML text means to one reader and something else to another: a key given twice
(PyYAML keeps the last, a person reviewing reads the first, kubectl's strict field check
refuses it), unquoted YAML 1.1 booleans (kubectl's YAML 1.1 decoder reads ``y`` as true,
PyYAML and YAML 1.2 tools such as kustomize as the text ``y``), and integers beyond 64 bits
(which the API server's decoder refuses). Read from libyaml's events, after the text has
been read once: the bounded reader has already refused what it refuses."""

from __future__ import annotations

import re
from typing import Any

import attrs
import yaml

from cpg_core._policy.yamlread import _BASE, Path

YAML11_ONLY_TRUE = frozenset({"y", "Y"})
YAML11_ONLY_FALSE = frozenset({"n", "N"})
"""Booleans to kubectl's YAML 1.1 decoder, texts to PyYAML: the readers disagree on the way
to the API server."""
YAML11_BOOLEANS = frozenset(
    {"yes", "Yes", "YES", "no", "No", "NO", "on", "On", "ON", "off", "Off", "OFF"}
)
"""Booleans to kubectl and PyYAML, texts to YAML 1.2 tools (kustomize, yq v4)."""
_INTEGER = re.compile(r"[-+]?(0|[1-9][0-9_]*)")
INT64_MAX = 2**63 - 1


@attrs.frozen(slots=True)
class Ambiguity:
    """One place of a document that readers take differently."""

    document: int
    """The document's index in the text (0-based)."""
    path: Path
    line: int
    kind: str
    """``duplicate-key``, ``yaml11-boolean-text`` (y/n), ``yaml11-boolean`` (yes/no/on/off)
    or ``integer-range``."""
    text: str
    """The key or scalar as written."""


def yaml_ambiguities(text: str) -> list[Ambiguity]:
    """Every ambiguity of ``text`` (a text the bounded reader has read already; one that does
    not parse gives what was found before the error)."""
    loader = _BASE(text)
    found: list[Ambiguity] = []
    try:
        _walk(loader, found)
    except yaml.YAMLError:
        pass  # the bounded reader names it
    finally:
        loader.dispose()
    return found


def _walk(loader: Any, found: list[Ambiguity]) -> None:
    document = -1
    # Each open collection: [is_mapping, path, keys seen, expecting a key, pending key, count]
    stack: list[list[Any]] = []
    while True:
        event = loader.get_event()
        kind = type(event)
        if kind is yaml.StreamEndEvent:
            return
        if kind is yaml.DocumentStartEvent:
            document += 1
            continue
        if (
            kind is yaml.ScalarEvent
            or kind is yaml.MappingStartEvent
            or kind is yaml.SequenceStartEvent
        ):
            path = _here(stack)
            line = event.start_mark.line + 1
            top = stack[-1] if stack else None
            is_key = top is not None and top[0] and top[3]
            if kind is yaml.ScalarEvent:
                _scalar(event, document, path, line, is_key, top, found)
            elif top is not None:
                _advance(top)
            if kind is not yaml.ScalarEvent:
                stack.append([kind is yaml.MappingStartEvent, path, set(), True, "", 0])
            continue
        if kind is yaml.MappingEndEvent or kind is yaml.SequenceEndEvent:
            stack.pop()


def _here(stack: list[list[Any]]) -> Path:
    if not stack:
        return ()
    top = stack[-1]
    if not top[0]:
        return (*top[1], top[5])
    return (*top[1], top[4]) if not top[3] else top[1]


def _advance(top: list[Any]) -> None:
    """A value (not a key) has been read into the collection ``top``."""
    if top[0]:
        top[3] = True
    else:
        top[5] += 1


def _scalar(
    event: Any,
    document: int,
    path: Path,
    line: int,
    is_key: bool,
    top: list[Any] | None,
    found: list[Ambiguity],
) -> None:
    value = event.value
    plain = event.implicit[0] and not event.style and event.tag is None
    if is_key and top is not None:
        where = (*top[1], value)
        if value in top[2]:
            found.append(Ambiguity(document, where, line, "duplicate-key", value))
        top[2].add(value)
        top[3], top[4] = False, value
        if plain:
            _typed(value, document, where, line, found)
        return
    if plain:
        _typed(value, document, path, line, found)
    if top is not None:
        _advance(top)


def _typed(value: str, document: int, path: Path, line: int, found: list[Ambiguity]) -> None:
    if value in YAML11_ONLY_TRUE or value in YAML11_ONLY_FALSE:
        found.append(Ambiguity(document, path, line, "yaml11-boolean-text", value))
    elif value in YAML11_BOOLEANS:
        found.append(Ambiguity(document, path, line, "yaml11-boolean", value))
    elif len(value) > 18 and _INTEGER.fullmatch(value):
        number = int(value.replace("_", ""))
        if not -INT64_MAX - 1 <= number <= INT64_MAX:
            found.append(Ambiguity(document, path, line, "integer-range", value))


__all__ = ["Ambiguity", "yaml_ambiguities"]
