"""A package face that imports each name's module on first use (PEP 562): importing the
package, or one light name of it, does not load the whole library, so that ``cpg --help``,
shell completion and ``cpg version`` answer at once (§D31). The names are listed twice: in
``if TYPE_CHECKING`` imports, each as itself (``X as X``: an explicit re-export, which is how
a user's type checker sees the package's names), and in the table given here, which also
makes the package's ``__all__``; a test keeps the two equal."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping


def lazy_face(package: str, where: Mapping[str, str]) -> tuple[Callable[[str], object], list[str]]:
    """The module ``__getattr__`` of ``package`` and its ``__all__``: ``where`` maps each
    module to the names it gives, separated by spaces."""
    module_of = {name: module for module, names in where.items() for name in names.split()}

    def load(name: str) -> object:
        module = module_of.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(importlib.import_module(package), name, value)  # next time: a plain lookup
        return value

    return load, sorted(module_of)


__all__ = ["lazy_face"]
