"""The aggregator's pending folds: a line of a known entry is counted by its quick key (the
hot path of a replay, ARCHITECTURE §D35) and folded into its allow entry before anything
reads the entries; every read method folds first (a test reads each one first). Numbers are
per reader: an aggregator fed by another reader folds what the first one counted. A live
flush folds a slice at a time (:meth:`fold_some`), so the stream never waits for one fold of
every entry, and a flush with nothing to read folds nothing."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from cpg_core._base.flow import EntryKey, Flow
from cpg_core._flows.numbers import QuickKey
from cpg_core._synthesis._pending import PendingCount, fold_pending

if TYPE_CHECKING:  # _filters reads requests, which read this module
    pass
from cpg_core._synthesis._aggregate_base import (
    _ENTRY_CACHE_LIMIT,
    _AggregatorBase,
)


class _Folds(_AggregatorBase):
    """Lines counted by quick key, and their fold into the entries."""

    def read_quick_keys(
        self, entry_key: Callable[[QuickKey], EntryKey | None], parse: Callable[[Any], Flow]
    ) -> None:
        """Let :meth:`add_line` count lines by the keys of a :class:`QuickReader`:
        ``entry_key`` is its :meth:`~QuickReader.entry_key`, ``parse`` turns a line into its
        Flow (for the samples). Keys of another reader mean other entries: what the
        previous reader's keys counted is folded in first."""
        if entry_key != self._entry_key or parse != self._parse_line:
            self._fold()
            self._pending.clear()
        self._entry_key = entry_key
        self._parse_line = parse

    def _count_for(self, key: QuickKey) -> PendingCount | None:
        """A new count for the entry of ``key``, when the aggregator has that entry."""
        if not self._fast or self._entry_key is None:
            return None
        entry = self._entry_key(key)
        stats = None if entry is None else self._entries.get(entry)
        if entry is None or stats is None:
            return None
        if len(self._pending) >= _ENTRY_CACHE_LIMIT:
            self._fold()
            self._pending.clear()
        pending = self._pending[key] = PendingCount(stats, (entry[1], entry[2]))
        return pending

    def _fold(self) -> None:
        self.fold_some(None)

    def fold_some(self, limit: int | None) -> bool:
        """Fold at most ``limit`` (None: all) of the counts :meth:`add_line` keeps (every
        read method folds them all first): whether none is left. A live capture folds a
        flush's backlog a slice at a time, so that the stream it shares the aggregator with
        waits only for one slice."""
        if not self._pending:
            return True
        assert self._parse_line is not None
        return fold_pending(self._pending.values(), self._parse_line, self._max_samples, limit)
