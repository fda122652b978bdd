"""The CiliumNetworkPolicy CRD schema cpg ships (``schemas/``, see its PROVENANCE), as the
check ``cpg lint`` runs on every policy: what the API server would refuse."""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from importlib import resources
from typing import Any


@functools.cache
def _validator() -> Any:
    import jsonschema  # type: ignore[import-untyped]

    text = resources.files("cpg_io").joinpath("schemas/ciliumnetworkpolicy-v2.json").read_text()
    return jsonschema.Draft7Validator(json.loads(text))


def crd_schema_errors(policy: Mapping[str, Any]) -> list[tuple[tuple[str | int, ...], str]]:
    """Each schema violation of ``policy``: (the path of the field, the message)."""
    found = []
    for error in sorted(_validator().iter_errors(dict(policy)), key=lambda e: list(e.path)):
        found.append((tuple(error.absolute_path), _short(error.message)))
    return found


def _short(message: str) -> str:
    """jsonschema quotes whole sub-documents in some messages: keep a line a person reads."""
    return message if len(message) <= 200 else message[:197] + "..."
