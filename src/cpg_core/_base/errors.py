"""The one exception family cpg raises on purpose, so callers can catch a single type.

A message may tell the user which setting to change. The setting is a :class:`Setting` part
of the message, not a spelling: the CLI shows ``--max-malformed``, cpg-mcp its tool argument
``max_malformed`` or what the operator sets, each through :meth:`CpgError.render` with its own
words. ``str(error)`` shows the neutral name."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import attrs


@attrs.frozen(slots=True)
class Setting:
    """A setting named inside a message (e.g. ``max_malformed``), shown in each root's words."""

    name: str


Words = Callable[[str], str] | Mapping[str, str]
"""How a root spells a setting: a function, or a table (a name it lacks is shown as is)."""


def _spell(words: Words | None, name: str) -> str:
    if words is None:
        return name
    if callable(words):
        return words(name)
    return words.get(name, name)


class Message(str):
    """A warning for a person that names a setting, as an error's message does: it is the
    text with the neutral names (so it goes wherever a string goes), and each root renders
    its :attr:`parts` in its own words."""

    parts: tuple[str | Setting, ...]

    def __new__(cls, *parts: str | Setting) -> Message:
        text = super().__new__(
            cls, "".join(_spell(None, p.name) if isinstance(p, Setting) else p for p in parts)
        )
        text.parts = parts
        return text

    def render(self, words: Words | None = None) -> str:
        return "".join(
            part if isinstance(part, str) else _spell(words, part.name) for part in self.parts
        )


def rendered(text: str, words: Words | None) -> str:
    """``text`` in a root's words when it is a :class:`Message`, else as it is."""
    return text.render(words) if isinstance(text, Message) else text


class CpgError(Exception):
    """Base of every error cpg raises on purpose. ``field`` names the setting that is wrong,
    neutrally, when one is (``RequestError`` always has one)."""

    field: str | None = None

    def __init__(self, *parts: str | Setting, field: str | None = None) -> None:
        super().__init__(*parts)
        self.parts: tuple[str | Setting, ...] = parts
        if field is not None:
            self.field = field

    def render(self, words: Words | None = None) -> str:
        """The message with each setting in ``words`` (a root's spelling)."""
        return "".join(
            part if isinstance(part, str) else _spell(words, part.name) for part in self.parts
        )

    def __str__(self) -> str:
        return self.render()

    def __reduce__(self) -> tuple[Any, ...]:
        # Errors cross process boundaries (forked workers, Dask): rebuilt from their parts
        # and attributes whatever a subclass's constructor takes.
        return (_rebuild, (type(self), self.parts, dict(self.__dict__)))


def _rebuild(cls: type[CpgError], parts: tuple[str | Setting, ...], state: dict[str, Any]) -> Any:
    error = cls.__new__(cls)
    Exception.__init__(error, *parts)
    error.__dict__.update(state)
    return error


class FlowParseError(CpgError, ValueError):
    """A flow record could not be understood; the message says which field and why."""


class PolicyMergeError(CpgError):
    """An existing policy file could not be merged; the message says why and what to do."""


class SelectorMismatchError(PolicyMergeError):
    """The existing file selects other endpoints than the policy being merged into it."""
