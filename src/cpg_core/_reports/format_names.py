"""The formats each kind of document prints in, the default first: names only, so that a
command can declare its ``-o`` choices without loading a renderer. ``_formats.FORMATS`` has a
renderer for each (a test keeps the two equal)."""

from __future__ import annotations

from collections.abc import Mapping

FORMAT_NAMES: Mapping[str, tuple[str, ...]] = {
    "run": ("text", "json"),
    "review": ("markdown", "html", "json"),
    "plan": ("text", "json"),
    "verify": ("text", "json"),
    "explain": ("text", "json", "yaml"),
    "why": ("text", "json"),
    "drift": ("text", "json"),
    "lint": ("text", "json", "sarif"),
}


def formats(kind: str) -> tuple[str, ...]:
    """The formats a kind of document can be rendered in, the default first."""
    return FORMAT_NAMES[kind]


REVIEW_MAX_SIZE = 60_000
"""Characters a Markdown review holds unless asked otherwise: under GitHub's 65,536 for a
pull-request comment, with room for what a gate puts above it."""
