"""Opaque, non-numeric page cursors (an Inspector turns numeric-looking args into numbers)."""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Any, TypeVar

from mcp.server.mcpserver.exceptions import ToolError

T = TypeVar("T")
_PREFIX = "cpg1:"


def encode(offset: int) -> str:
    return base64.urlsafe_b64encode(f"{_PREFIX}{offset}".encode()).decode().rstrip("=")


def decode(cursor: str | None) -> int:
    if not cursor:
        return 0
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        if not text.startswith(_PREFIX):
            raise ValueError(text)
        offset = int(text[len(_PREFIX) :])
        if offset < 0:
            raise ValueError(text)
        return offset
    except (ValueError, UnicodeDecodeError):
        raise ToolError(
            "invalid cursor; retry without cursor to restart from the first page"
        ) from None


def page(items: Sequence[T], cursor: str | None, limit: int) -> tuple[list[T], dict[str, Any]]:
    """One page and its ``total_count``/``has_more``/``next_cursor``. A stale cursor (past the
    end) gives an empty page."""
    start = decode(cursor)
    chunk = list(items[start : start + limit])
    more = start + limit < len(items)
    meta: dict[str, Any] = {"total_count": len(items), "has_more": more}
    if more:
        meta["next_cursor"] = encode(start + limit)
    return chunk, meta
