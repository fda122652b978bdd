"""Flows counted by their quick key, folded into the allow entries' stats before anything
reads them.

A replay's quick way (:class:`~cpg_core._flows.quickline.QuickReader`) meets each allow entry's
flows again and again. Adding each one to the entry's :class:`RuleStats` touches several
dicts and objects scattered in memory; a :class:`PendingCount` per (allow entry, endpoint
pair) is one small object: how many flows, their time window and the newest line. The
aggregator folds these into the RuleStats (:func:`fold_pending`) before anything reads
them, which gives what adding every flow would have (§D35): counts add up, windows widen,
and the newest flow of the pair is its sample, a tie of times broken on the parsed flows as
everywhere else.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from cpg_core._base.flow import Endpoint, Flow
from cpg_core._flows.attribution import NO_TIME, RuleStats


class PendingCount:
    """Flows of one allow entry between one endpoint pair, not yet in the entry's stats."""

    __slots__ = ("count", "first", "newest", "pair", "raw", "stats")

    def __init__(self, stats: RuleStats, pair: tuple[Endpoint, Endpoint]) -> None:
        self.stats = stats
        self.pair = pair
        self.count = 0
        self.first = NO_TIME
        """The oldest time key of the flows (empty when none had a time)."""
        self.newest = NO_TIME
        """The newest time key, that of ``raw``."""
        self.raw: Any = None
        """The newest flow's unparsed record (None when samples are not kept)."""


def fold_pending(
    pending: Iterable[PendingCount],
    parse: Callable[[Any], Flow],
    max_samples: int,
    limit: int | None = None,
) -> bool:
    """Move what the counts hold into their entries' stats; the counts are empty after. With
    ``limit``, at most that many counts are folded: whether none is left."""
    folded = 0
    for count in pending:
        if not count.count:
            continue
        if limit is not None and folded == limit:
            return False
        sample = (parse, count.raw, count.newest) if max_samples else None
        count.stats.absorb_counted(
            count.count, count.first, count.newest, count.pair, sample, max_samples
        )
        count.count = 0
        count.first = count.newest = NO_TIME
        count.raw = None
        folded += 1
    return True
