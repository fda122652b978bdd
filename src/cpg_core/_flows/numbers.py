"""Endpoints numbered for quick keys: the JSON reader and the live path's converter give an
allow entry's endpoints as small numbers, so that hashing the key never calls Python code
(ARCHITECTURE §D35)."""

from __future__ import annotations

import itertools
from collections.abc import Hashable

from cpg_core._base.flow import Endpoint, EntryKey

QuickKey = tuple[int, int, int, str, int]
"""An allow-entry key as a quick reader gives it: (direction, source, destination, protocol,
port) with the two endpoints as the reader's numbers for them (:meth:`EndpointNumbers.entry_key`
gives the EntryKey)."""

ENDPOINT_CACHE_LIMIT = 16384
"""The raw endpoints remembered at most; all are forgotten together when there are more."""


class EndpointNumbers:
    """Each endpoint's number, found by a raw form of it (a decoded struct, an encoding).
    A number is never given twice, also after the bounded caches were cleared: a count kept
    under an old number can never land on another endpoint's entry."""

    __slots__ = ("_by_number", "_number_of", "_sequence", "by_raw")

    def __init__(self) -> None:
        self.by_raw: dict[Hashable, int] = {}
        """Raw form to number: what the hot path looks up (cleared in place, never replaced,
        so a reader may hold it)."""
        self._number_of: dict[Endpoint, int] = {}
        self._by_number: dict[int, Endpoint] = {}
        self._sequence = itertools.count(1)

    def number(self, raw: Hashable, endpoint: Endpoint) -> int:
        """The number of ``endpoint``, met as ``raw`` for the first time (or since the caches
        were cleared). Raw forms that differ only in what cpg does not read share one."""
        if len(self.by_raw) >= ENDPOINT_CACHE_LIMIT:
            self.by_raw.clear()
            self._number_of.clear()
            self._by_number.clear()
        number = self._number_of.get(endpoint)
        if number is None:
            number = self._number_of[endpoint] = next(self._sequence)
            self._by_number[number] = endpoint
        self.by_raw[raw] = number
        return number

    def endpoint(self, number: int) -> Endpoint | None:
        """The endpoint of a number given lately (None once it was forgotten)."""
        return self._by_number.get(number)

    def entry_key(self, key: QuickKey) -> EntryKey | None:
        """The allow-entry key of a quick key given lately (None once one of its endpoints
        was forgotten)."""
        by_number = self._by_number
        source = by_number.get(key[1])
        destination = by_number.get(key[2])
        if source is None or destination is None:
            return None
        return key[0], source, destination, key[3], key[4]
