"""A package face that imports each name's module on first use (PEP 562): importing the
package, or one light name of it, does not load the whole library, so that ``cpg --help``,
shell completion and ``cpg version`` answer at once (§D31). The names are listed twice, in
``if TYPE_CHECKING`` imports for type checkers and readers and in the table given here; a
test keeps the two equal."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping


def lazy_face(package: str, where: Mapping[str, str]) -> Callable[[str], object]:
    """The module ``__getattr__`` of ``package``: ``where`` maps each name to its module."""

    def load(name: str) -> object:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(importlib.import_module(package), name, value)  # next time: a plain lookup
        return value

    return load


__all__ = ["lazy_face"]
