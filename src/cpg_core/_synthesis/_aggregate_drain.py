"""Draining a live capture's aggregator, so that a flush costs what changed (ARCHITECTURE
§D32).

A live capture keeps one aggregator for the whole session; the stream adds to it under a
lock. The aggregator remembers which targets gained an allow entry since it was last asked
(:meth:`take_new_targets`). A flush drains those targets: :meth:`drain` moves each entry's
stats out and leaves the entry in place, empty, so the fast path keeps finding it, while the
totals keep counting what moved out (flows, time window, world peers for the pod-as-world
finding, :class:`DrainedTotals`). The capture drains a few dozen targets at a time under the
lock and plans and writes them outside it; at the evidence interval the targets with flows
since their last write (:meth:`busy_targets`) are drained too. A flush with no new entry
therefore moves, copies and writes nothing. Evidence adds per write (a live session's counts
are deltas), so what was drained is exactly what the evidence has not seen."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from cpg_core._flows.attribution import RuleStats
from cpg_core._flows.synthesis import PolicyTarget

if TYPE_CHECKING:  # _filters reads requests, which read this module
    pass
from cpg_core._synthesis._aggregate_base import (
    AtomKey,
    _is_other_end,
)
from cpg_core._synthesis._aggregate_handover import _HandOver


class _Drain(_HandOver):
    """What a flush moves out."""

    def take_new_targets(self) -> set[PolicyTarget]:
        """The targets that gained an allow entry since the last call (or since the start):
        the only policies a live flush may have to rewrite."""
        new, self._new = self._new, set()
        return new

    def busy_targets(self) -> list[PolicyTarget]:
        """The targets with flows :meth:`drain` has not moved out yet."""
        self._fold()
        return [t for t, atoms in self._atoms.items() if any(s.count for s in atoms.values())]

    def drain(
        self, targets: Iterable[PolicyTarget]
    ) -> dict[PolicyTarget, dict[AtomKey, RuleStats]]:
        """What these targets' allow entries gathered since they were last drained, moved
        out without copying (see :meth:`resolved`). The entries stay, empty, so flows keep
        taking the fast path; the totals (flow counts, time window, health) still count what
        was moved out."""
        self._fold()
        out: dict[PolicyTarget, dict[AtomKey, RuleStats]] = {}
        drained = self._drained
        cap = self._max_samples
        for target in targets:
            atoms = self._atoms.get(target)
            if not atoms:
                continue
            moved = {}
            for key, stats in atoms.items():
                if stats.count and (not _is_other_end(key) or self._other_end_ok(target, key)):
                    taken = moved[key] = stats.take()
                    if not _is_other_end(key):  # the totals count each flow once
                        drained.add(target, key, taken, cap)
            if moved:
                out[target] = moved
        return out
