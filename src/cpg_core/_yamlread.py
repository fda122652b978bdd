"""Reading YAML that people wrote: with libyaml when it is there (a 10 MB file in seconds, not
a minute), and never with anchors or aliases, whose expansion can grow a few hundred bytes
into gigabytes (and no CiliumNetworkPolicy needs them)."""

from __future__ import annotations

from typing import Any

import yaml

from cpg_core._errors import CpgError

_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class YamlInputError(CpgError):
    """A YAML input cannot be read safely; the message names it and says what to do."""


def load_all(text: str, where: str) -> list[Any]:
    """Every document of ``text``. Anchors, aliases and invalid YAML are YamlInputError."""
    try:
        for event in yaml.parse(text, Loader=_LOADER):
            if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
                mark = getattr(event, "start_mark", None)
                line = f" (line {mark.line + 1})" if mark is not None else ""
                raise YamlInputError(
                    f"{where}: uses YAML anchors or aliases (& or *){line}; cpg does not expand "
                    "them (a few bytes can expand into gigabytes): write the values out in full"
                )
        return list(yaml.load_all(text, Loader=_LOADER))
    except yaml.YAMLError as exc:
        raise YamlInputError(f"{where}: cannot read it as YAML (not valid YAML: {exc})") from None


def load_one(text: str, where: str) -> Any:
    """The single document of ``text`` (None when empty)."""
    docs = [d for d in load_all(text, where) if d is not None]
    if len(docs) > 1:
        raise YamlInputError(f"{where}: holds {len(docs)} YAML documents; expected one")
    return docs[0] if docs else None
