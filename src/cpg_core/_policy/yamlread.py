"""Reading YAML and JSON that came from outside (policies, lint inputs, plans, identities,
the cluster's answers): one bounded reader each, so a hostile file costs milliseconds and
one error line naming the file, the line and the limit, never a traceback or an hour.

- libyaml when it is there (a 10 MB file in seconds, not a minute); it refuses more than a
  thousand nested collections itself, and cpg refuses more than ``MAX_DEPTH`` (no policy is
  deeper than about a dozen) as the collections open, and builds without recursion;
- no anchors or aliases, whose expansion can grow a few hundred bytes into gigabytes (and no
  CiliumNetworkPolicy needs them);
- no tags but YAML's own (``!!python/…``, ``!anything``: refused, never constructed);
- no integer of more than ``MAX_DIGITS`` digits (Python refuses to convert 4,300 and more
  with a traceback; no field cpg reads needs 20);
- JSON through orjson (C, linear, its own depth and 64-bit integer limits) instead of the
  recursive standard library decoder.
"""

from __future__ import annotations

import math
from typing import Any

import orjson
import yaml

from cpg_core._base.errors import CpgError

_BASE: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
MAX_DEPTH = 64
"""Nested collections cpg reads in one document."""
MAX_DIGITS = 30
"""Digits of an integer cpg reads."""
_PLAIN_TAGS = frozenset(
    {
        None,
        "!",
        "tag:yaml.org,2002:str",
        "tag:yaml.org,2002:int",
        "tag:yaml.org,2002:float",
        "tag:yaml.org,2002:bool",
        "tag:yaml.org,2002:null",
        "tag:yaml.org,2002:map",
        "tag:yaml.org,2002:seq",
        "tag:yaml.org,2002:timestamp",
    }
)


class YamlInputError(CpgError):
    """A YAML input cannot be read safely; the message names it and says what to do."""

    def __init__(self, *parts: Any, line: int = 0) -> None:
        super().__init__(*parts)
        self.line = line
        """1-based line of the problem (0: the whole file)."""


class JsonInputError(CpgError):
    """A JSON input cannot be read safely; the message names it, the place and the limit."""


_BASES = (("0x", 16), ("0o", 8), ("0b", 2))


def _too_long(text: str) -> str:
    """Why an integer's text is too long for cpg ("" when it is not): at most MAX_DIGITS
    decimal digits, and as much by value in any base (hexadecimal, octal, binary: Python
    refuses to print an integer of 4,300 digits, wherever it came from)."""
    plain = text.strip().lstrip("+-").replace("_", "").lower()
    base = 10
    for prefix, value in _BASES:
        if plain.startswith(prefix):
            plain, base = plain[len(prefix) :], value
            break
    digits = sum(c.isalnum() for c in plain)
    allowed = int(MAX_DIGITS * math.log(10) / math.log(base))
    if digits <= allowed:
        return ""
    shown = "a number" if base == 10 else f"a base-{base} number"
    return f"{shown} of {digits} digits (cpg reads at most {MAX_DIGITS} decimal digits' worth)"


def _bounded_int(loader: yaml.constructor.SafeConstructor, node: yaml.ScalarNode) -> Any:
    why = _too_long(str(node.value))
    if why:
        raise yaml.constructor.ConstructorError(None, None, why, node.start_mark)
    return yaml.constructor.SafeConstructor.construct_yaml_int(loader, node)


class _Loader(_BASE):  # type: ignore[misc]
    """libyaml's safe loader (or PyYAML's), with integers bounded."""


_Loader.add_constructor("tag:yaml.org,2002:int", _bounded_int)
BOUNDED_LOADER: Any = _Loader


def _line(event: Any) -> int:
    mark = getattr(event, "start_mark", None)
    return mark.line + 1 if mark is not None else 0


def load_all(text: str, where: str) -> list[Any]:
    """Every document of ``text``, read in one bounded pass (the limits above, checked as
    the events arrive; :class:`YamlInputError` with the line); the same values PyYAML's safe
    loader builds."""
    return [document for document, _ in _read(text, where, lines=False)]


def load_all_with_lines(text: str, where: str) -> list[tuple[Any, dict[Path, int]]]:
    """Every document of ``text`` with the 1-based line of each of its fields, by path
    (a mapping key's path ends in the key as written): what lint points its findings at."""
    return _read(text, where, lines=True)


Path = tuple[str | int, ...]

_SCALAR_TAGS = frozenset(
    {
        "tag:yaml.org,2002:int",
        "tag:yaml.org,2002:float",
        "tag:yaml.org,2002:bool",
        "tag:yaml.org,2002:null",
        "tag:yaml.org,2002:timestamp",
    }
)
_STR = "tag:yaml.org,2002:str"
_MAP = "tag:yaml.org,2002:map"
_SEQ = "tag:yaml.org,2002:seq"
_MERGE = "tag:yaml.org,2002:merge"
_VALUE = "tag:yaml.org,2002:value"
_CONSTRUCTOR: Any = _Loader("")


class _Merges(list[Any]):
    """The values of a mapping's ``<<`` keys, merged into it when it ends (YAML's merge key:
    the mapping's own keys win, then the first merged mapping with the key)."""


class _Unbuildable(Exception):
    """A value the safe loader refuses to build (its line and problem): raised once the
    whole stream was checked, so a limit the check names comes first, as it always did."""

    def __init__(self, problem: str, line: int) -> None:
        super().__init__(problem)
        self.problem = problem
        self.line = line


def _read(text: str, where: str, *, lines: bool) -> list[tuple[Any, dict[Path, int]]]:
    """One pass over libyaml's events: every limit checked as the event arrives, values
    built without the node tree PyYAML's constructor walks in Python (10x faster on a large
    policy), scalars resolved and built exactly as its safe loader does."""
    loader = _BASE(text)
    try:
        return _events_to_documents(loader, where, lines)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc)
        raise _unreadable(
            where, f"not valid YAML: {problem}", mark.line + 1 if mark else 0
        ) from None
    except _Unbuildable as exc:
        raise _unreadable(where, exc.problem, exc.line) from None
    finally:
        loader.dispose()


def _unreadable(where: str, problem: str, line: int) -> YamlInputError:
    return YamlInputError(
        f"{where}: cannot read it as YAML ({problem}" + (f", line {line})" if line else ")"),
        line=line,
    )


def _events_to_documents(loader: Any, where: str, lines: bool) -> list[tuple[Any, dict[Path, int]]]:
    builder = _Builder(loader, where, lines)
    scalar_event, mapping_start, sequence_start = (
        yaml.ScalarEvent,
        yaml.MappingStartEvent,
        yaml.SequenceStartEvent,
    )
    while True:
        event = loader.get_event()
        kind = type(event)
        if kind is scalar_event:
            builder.scalar(event)
        elif kind is mapping_start or kind is sequence_start:
            builder.begin(event, kind is mapping_start)
        elif kind is yaml.MappingEndEvent or kind is yaml.SequenceEndEvent:
            builder.end()
        elif kind is yaml.AliasEvent:
            _refuse_anchor(event, where)
        elif kind is yaml.DocumentStartEvent:
            builder.lines = {}
        elif kind is yaml.StreamEndEvent:
            break
    if builder.unbuilt is not None:
        raise builder.unbuilt
    return builder.documents


class _Builder:
    """Values built from events: each open collection is a frame ``[container, pending key
    (mappings), merges, path, key text]``; a finished value goes into the frame below it,
    or is a document."""

    __slots__ = ("documents", "keep_lines", "lines", "loader", "stack", "unbuilt", "where")

    def __init__(self, loader: Any, where: str, keep_lines: bool) -> None:
        self.loader = loader
        self.where = where
        self.keep_lines = keep_lines
        self.documents: list[tuple[Any, dict[Path, int]]] = []
        self.stack: list[list[Any]] = []
        self.lines: dict[Path, int] = {}
        self.unbuilt: _Unbuildable | None = None
        """The first value the safe loader would refuse: raised once every limit was checked."""

    def scalar(self, event: Any) -> None:
        if event.anchor is not None:
            _refuse_anchor(event, self.where)
        tag = event.tag
        if tag is None or tag == "!":  # typed by its text when plain, else a string
            tag = (
                self.loader.resolve(yaml.ScalarNode, event.value, event.implicit)
                if event.implicit[0]
                else _STR
            )
        elif tag not in _PLAIN_TAGS:
            _refuse_tag(event, tag, self.where)
        value: Any = event.value
        line = event.start_mark.line + 1
        if tag != _STR:
            try:
                value = _scalar(tag, event)
            except _Unbuildable as exc:
                self.unbuilt = self.unbuilt or exc
                value = None
            if tag in (_MERGE, _VALUE) and not self._at_key():  # "<<" and "=" are keys only
                self.unbuilt = self.unbuilt or _Unbuildable(
                    f"could not determine a constructor for the tag {tag!r}", line
                )
        self._place(value, line, event.value, tag == _MERGE)

    def _at_key(self) -> bool:
        stack = self.stack
        return bool(stack) and type(stack[-1][0]) is dict and stack[-1][1] is _NO_KEY

    def begin(self, event: Any, mapping: bool) -> None:
        if event.anchor is not None:
            _refuse_anchor(event, self.where)
        tag = event.tag
        if tag is not None and tag != "!":
            if tag not in _PLAIN_TAGS:
                _refuse_tag(event, tag, self.where)
            if tag != (_MAP if mapping else _SEQ):
                self.unbuilt = self.unbuilt or _Unbuildable(
                    f"the tag {tag} on a {'mapping' if mapping else 'list'}",
                    event.start_mark.line + 1,
                )
        if len(self.stack) >= MAX_DEPTH:
            line = event.start_mark.line + 1
            raise YamlInputError(
                f"{self.where}: line {line}: nested deeper than {MAX_DEPTH} levels; no "
                "policy is (cpg reads at most that)",
                line=line,
            )
        path: Path = ()
        if self.keep_lines:
            path = _child_path(self.stack)
            self.lines[path] = event.start_mark.line + 1
        self.stack.append([{} if mapping else [], _NO_KEY, None, path, ""])

    def end(self) -> None:
        frame = self.stack.pop()
        value = frame[0]
        if frame[2] is not None:
            try:
                value = _merged(value, frame[2])
            except _Unbuildable as exc:
                self.unbuilt = self.unbuilt or exc
        self._place(value, 0, None, False)

    def _place(self, value: Any, line: int, text: str | None, merge: bool) -> None:
        """A finished value (a scalar's ``text`` and ``line``, or a collection's) into the
        collection it belongs to, as an item, a key or a key's value."""
        stack = self.stack
        if not stack:
            if self.keep_lines and text is not None:
                self.lines[()] = line
            self.documents.append((value, self.lines))
            return
        top = stack[-1]
        container = top[0]
        if type(container) is list:
            if self.keep_lines and text is not None:
                self.lines[(*top[3], len(container))] = line
            container.append(value)
        elif top[1] is _NO_KEY:
            top[1] = _Merges() if merge else value
            if text is not None:
                top[4] = text
                if self.keep_lines:
                    self.lines[(*top[3], text)] = line
        else:
            self._set(top, value, line, text)

    def _set(self, top: list[Any], value: Any, line: int, text: str | None) -> None:
        key = top[1]
        top[1] = _NO_KEY
        if self.keep_lines and text is not None:
            self.lines[(*top[3], top[4])] = line
        if type(key) is _Merges:
            top[2] = top[2] or _Merges()
            top[2].append((value, line))
            return
        try:
            top[0][key] = value
        except TypeError:
            self.unbuilt = self.unbuilt or _Unbuildable("found unhashable key", line)


_NO_KEY = object()


def _child_path(stack: list[list[Any]]) -> Path:
    """The path of a collection that starts inside the innermost open one."""
    if not stack:
        return ()
    top = stack[-1]
    if type(top[0]) is list:
        return (*top[3], len(top[0]))
    return (*top[3], top[4])


def _scalar(tag: str, event: Any) -> Any:
    """A plain scalar's value by its resolved (or YAML) tag, as the safe loader builds it."""
    if tag == "tag:yaml.org,2002:null":
        return None
    if tag in (_VALUE, _MERGE):
        return event.value  # as a key: "=" is a string to the safe loader, "<<" merges
    node = yaml.ScalarNode(tag, event.value, event.start_mark, event.end_mark, event.style)
    if tag == "tag:yaml.org,2002:int":
        why = _too_long(str(event.value))
        if why:
            raise _Unbuildable(why, event.start_mark.line + 1)
    if tag in _SCALAR_TAGS:
        try:
            return _CONSTRUCTOR.yaml_constructors[tag](_CONSTRUCTOR, node)
        except (ValueError, yaml.YAMLError) as exc:
            raise _Unbuildable(
                f"cannot build {event.value!r} as {tag.rsplit(':', 1)[-1]} ({exc})",
                event.start_mark.line + 1,
            ) from None
    raise _Unbuildable(
        f"expected a {tag.rsplit(':', 1)[-1]}, but found a scalar", event.start_mark.line + 1
    )


def _merged(mapping: dict[Any, Any], merges: list[tuple[Any, int]]) -> dict[Any, Any]:
    """A mapping with its ``<<`` values merged in: each a mapping or a list of mappings; the
    first merged mapping that has a key gives it, and the mapping's own keys win."""
    out: dict[Any, Any] = {}
    for value, line in merges:
        parts = [value] if isinstance(value, dict) else value
        if not isinstance(parts, list) or not all(isinstance(p, dict) for p in parts):
            raise _Unbuildable("expected a mapping or list of mappings for merging", line)
        for part in parts:
            for key, item in part.items():
                out.setdefault(key, item)
    out.update(mapping)
    return out


def _refuse_anchor(event: Any, where: str) -> None:
    line = _line(event)
    raise YamlInputError(
        f"{where}: uses YAML anchors or aliases (& or *) (line {line}); cpg does "
        "not expand them (a few bytes can expand into gigabytes): write the values "
        "out in full",
        line=line,
    )


def _refuse_tag(event: Any, tag: str, where: str) -> None:
    line = _line(event)
    raise YamlInputError(
        f"{where}: line {line}: the tag {tag!r} is not plain YAML; cpg builds no "
        "object from a tag: remove it",
        line=line,
    )


def load_one(text: str, where: str) -> Any:
    """The single document of ``text`` (None when empty)."""
    docs = [d for d in load_all(text, where) if d is not None]
    if len(docs) > 1:
        raise YamlInputError(f"{where}: holds {len(docs)} YAML documents; expected one")
    return docs[0] if docs else None


def load_json(data: str | bytes, where: str) -> Any:
    """One JSON document from outside, with orjson's limits (nesting, 64-bit integers):
    JsonInputError names the file, the place and the reason."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise JsonInputError(f"{where}: not JSON cpg reads ({exc})") from None
