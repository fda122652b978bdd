"""Reading YAML and JSON that came from outside (policies, lint inputs, plans, identities,
the cluster's answers): one bounded reader each, so a hostile file costs milliseconds and
one error line naming the file, the line and the limit, never a traceback or an hour.

- libyaml when it is there (a 10 MB file in seconds, not a minute); it refuses more than a
  thousand nested collections itself, and cpg refuses more than ``MAX_DEPTH`` (no policy is
  deeper than about a dozen) before anything is built, so building never recurses deep;
- no anchors or aliases, whose expansion can grow a few hundred bytes into gigabytes (and no
  CiliumNetworkPolicy needs them);
- no tags but YAML's own (``!!python/…``, ``!anything``: refused, never constructed);
- no integer of more than ``MAX_DIGITS`` digits (Python refuses to convert 4,300 and more
  with a traceback; no field cpg reads needs 20);
- JSON through orjson (C, linear, its own depth and 64-bit integer limits) instead of the
  recursive standard library decoder.
"""

from __future__ import annotations

from typing import Any

import orjson
import yaml

from cpg_core._errors import CpgError

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


def _bounded_int(loader: yaml.constructor.SafeConstructor, node: yaml.ScalarNode) -> Any:
    digits = sum(c.isdigit() for c in str(node.value))
    if digits > MAX_DIGITS:
        raise yaml.constructor.ConstructorError(
            None,
            None,
            f"a number of {digits} digits (cpg reads at most {MAX_DIGITS})",
            node.start_mark,
        )
    return yaml.constructor.SafeConstructor.construct_yaml_int(loader, node)


class _Loader(_BASE):  # type: ignore[misc]
    """libyaml's safe loader (or PyYAML's), with integers bounded."""


_Loader.add_constructor("tag:yaml.org,2002:int", _bounded_int)
_LOADER: Any = _Loader


def _line(event: Any) -> int:
    mark = getattr(event, "start_mark", None)
    return mark.line + 1 if mark is not None else 0


def check_yaml(text: str, where: str) -> None:
    """Refuse what cpg does not build: anchors and aliases, tags other than YAML's own,
    collections nested deeper than MAX_DEPTH, and text that is no YAML (YamlInputError with
    the line)."""
    depth = 0
    try:
        for event in yaml.parse(text, Loader=_BASE):
            if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
                line = _line(event)
                raise YamlInputError(
                    f"{where}: uses YAML anchors or aliases (& or *) (line {line}); cpg does "
                    "not expand them (a few bytes can expand into gigabytes): write the values "
                    "out in full",
                    line=line,
                )
            tag = getattr(event, "tag", None)
            if tag not in _PLAIN_TAGS and not isinstance(event, yaml.DocumentStartEvent):
                line = _line(event)
                raise YamlInputError(
                    f"{where}: line {line}: the tag {tag!r} is not plain YAML; cpg builds no "
                    "object from a tag: remove it",
                    line=line,
                )
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > MAX_DEPTH:
                    line = _line(event)
                    raise YamlInputError(
                        f"{where}: line {line}: nested deeper than {MAX_DEPTH} levels; no "
                        "policy is (cpg reads at most that)",
                        line=line,
                    )
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else 0
        problem = getattr(exc, "problem", None) or str(exc)
        raise YamlInputError(
            f"{where}: cannot read it as YAML (not valid YAML: {problem}"
            + (f", line {line})" if line else ")"),
            line=line,
        ) from None


def _built(action: Any, where: str) -> Any:
    try:
        return action()
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else 0
        problem = getattr(exc, "problem", None) or str(exc)
        raise YamlInputError(
            f"{where}: cannot read it as YAML ({problem}" + (f", line {line})" if line else ")"),
            line=line,
        ) from None
    except RecursionError:
        raise YamlInputError(f"{where}: nested too deep to read") from None


def load_all(text: str, where: str) -> list[Any]:
    """Every document of ``text``, checked first (:func:`check_yaml`); YamlInputError."""
    check_yaml(text, where)
    found: list[Any] = _built(lambda: list(yaml.load_all(text, Loader=_Loader)), where)
    return found


def compose_all(text: str, where: str) -> list[Any]:
    """The nodes of every document of ``text`` (line numbers kept), checked first."""
    check_yaml(text, where)
    found: list[Any] = _built(lambda: list(yaml.compose_all(text, Loader=_Loader)), where)
    return found


def construct(node: Any, where: str) -> Any:
    """The value of a node :func:`compose_all` gave (integers bounded)."""
    return _built(lambda: _Loader("").construct_document(node), where)


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
