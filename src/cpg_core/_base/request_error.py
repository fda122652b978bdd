"""The error a request's check raises, and the splitting of repeatable values: what every
request module needs, with nothing above it (so the flow filters can use it without the
rest of the requests)."""

from __future__ import annotations

from collections.abc import Iterable

from cpg_core._base.errors import CpgError, Setting


class RequestError(CpgError, ValueError):
    """A value the user gave is not valid. ``field`` names the setting neutrally (e.g.
    ``ignore_protocol``); the message says what is wrong and what would be right."""

    field: str

    def __init__(self, field: str, *parts: str | Setting) -> None:
        super().__init__(*parts, field=field)

    @property
    def message(self) -> str:
        return self.render()


def split_values(values: Iterable[str]) -> list[str]:
    """``["a,b", " c"]`` → ``["a", "b", "c"]``: repeatable and comma-separated alike."""
    return [part.strip() for value in values for part in value.split(",") if part.strip()]
