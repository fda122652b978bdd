"""The stable API is what docs/api.md lists: the page's list of stable names and the
members its reference renders are ``cpg_core.__all__``, so a name cannot join or leave the
API without the page (and a reader) hearing of it."""

from __future__ import annotations

import re
from pathlib import Path

import cpg_core

PAGE = Path(__file__).resolve().parents[1] / "docs/api.md"


def _listed(text: str) -> list[str]:
    stable = text.split("<!-- the stable names", 1)[1].split("## Reference", 1)[0]
    return re.findall(r"^- `([A-Za-z_][A-Za-z0-9_]*)`$", stable, re.M)


def _rendered(text: str) -> list[str]:
    reference = text.split("::: cpg_core", 1)[1]
    return re.findall(r"^ {8}- ([A-Za-z_][A-Za-z0-9_]*)$", reference, re.M)


def test_the_page_lists_every_stable_name_once() -> None:
    text = PAGE.read_text()
    listed = _listed(text)
    assert len(listed) == len(set(listed))
    assert set(listed) == set(cpg_core.__all__)
    assert set(_rendered(text)) == set(cpg_core.__all__)


def test_every_stable_name_is_documented() -> None:
    """Each stable name has a docstring of its own (a class or function) for the page."""
    import inspect

    missing = [
        name
        for name in cpg_core.__all__
        if (inspect.isclass(value := getattr(cpg_core, name)) or inspect.isfunction(value))
        and not inspect.getdoc(value)
    ]
    assert missing == []
