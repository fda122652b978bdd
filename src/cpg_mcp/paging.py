"""Opaque, non-numeric page cursors (an Inspector turns numeric-looking args into numbers)."""

from __future__ import annotations

import base64
import json
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


PAGE_BUDGET = 60_000
"""Characters of JSON a page's items may take: with the rest of a result, under the ~25k
tokens hosts pass on from one tool call. A page stops at ``limit`` items or this, whichever
comes first, and always holds at least one item."""


def _size(item: Any) -> int:
    if hasattr(item, "model_dump_json"):
        return len(item.model_dump_json())
    return len(json.dumps(item, ensure_ascii=False, default=str))


def page(
    items: Sequence[T], cursor: str | None, limit: int, budget: int = PAGE_BUDGET
) -> tuple[list[T], dict[str, Any]]:
    """One page and its ``total_count``/``has_more``/``next_cursor``: at most ``limit`` items
    and at most ``budget`` characters of them. A stale cursor (past the end) gives an empty
    page."""
    start = decode(cursor)
    chunk: list[T] = []
    used = 0
    for item in items[start : start + limit]:
        used += _size(item)
        if chunk and used > budget:
            break
        chunk.append(item)
    end = start + len(chunk)
    more = end < len(items)
    meta: dict[str, Any] = {"total_count": len(items), "has_more": more}
    if more:
        meta["next_cursor"] = encode(end)
    return chunk, meta
