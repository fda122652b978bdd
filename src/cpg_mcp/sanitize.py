"""Strings leave cpg-mcp without control characters: a pod label or an HTTP path must not be
able to inject terminal escapes into whatever shows the model's tool results."""

from __future__ import annotations

import re
from typing import Any

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def clean_text(text: str, keep_newlines: bool = False) -> str:
    if keep_newlines:
        return _CONTROL.sub("", text)
    return _CONTROL.sub("", text.replace("\n", " ").replace("\t", " "))


def clean(value: Any, keep_newlines: bool = False) -> Any:
    """A copy of a JSON-like value with every string (keys too) cleaned."""
    if isinstance(value, str):
        return clean_text(value, keep_newlines)
    if isinstance(value, dict):
        return {clean_text(str(k)): clean(v, keep_newlines) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [clean(v, keep_newlines) for v in value]
    return value
