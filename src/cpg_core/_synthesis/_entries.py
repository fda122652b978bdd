"""The allow entries an aggregation keeps, with every count of them (ARCHITECTURE §D32, §D35).

An entry is counted where a flow lands on it, once: in its :class:`RuleStats`, or, on a
replay's quick path, in a :class:`PendingCount` by the line's quick key, folded into the
stats before anything reads them (every read folds first; a live flush folds a slice at a
time, :meth:`Entries.fold_some`). The caps on what is kept, the targets that gained an
entry since a flush last asked, and what a flush moved out (:class:`DrainedTotals`) are
kept here too, so that no other part touches an entry's count.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from cpg_core._base.flow import EntryKey, Flow
from cpg_core._base.rules import CidrPeer
from cpg_core._flows.attribution import RuleStats
from cpg_core._flows.numbers import QuickKey
from cpg_core._flows.synthesis import PolicyTarget
from cpg_core._synthesis._aggregate_base import (
    AggregateOptions,
    AtomKey,
    DrainedTotals,
    _is_other_end,
)
from cpg_core._synthesis._pending import PendingCount, fold_pending
from cpg_core._synthesis.scope import Reach, ReachIndex

_ENTRY_CACHE_LIMIT = 16384
"""Entries the fast path remembers, and quick-key counts held, before starting afresh."""


class Entries:
    """Allow entries by policy target, their quick-key counts and what flushes moved out."""

    def __init__(self, options: AggregateOptions, *, fast: bool) -> None:
        """``fast``: lines may be counted by their quick key (the aggregator's word on
        whether the decision options and filter allow it)."""
        self._options = options
        self._max_samples = options.max_samples
        self._fast = fast
        self._atoms: dict[PolicyTarget, dict[AtomKey, RuleStats]] = {}
        self.cache: dict[EntryKey, RuleStats] = {}
        """(direction, source, destination, protocol, port) -> the stats of its allow entry,
        for endpoint and entity peers (a world peer's entry also depends on the flow's IP):
        the aggregator's fast path. Cleared, never replaced."""
        self.pending: dict[QuickKey, PendingCount] = {}
        """Lines of known entries counted by quick key, folded into the entries before any
        read. Cleared, never replaced."""
        self._entry_key: Callable[[QuickKey], EntryKey | None] | None = None
        self._parse_line: Callable[[Any], Flow] | None = None
        self._new: set[PolicyTarget] = set()
        self._drained = DrainedTotals()
        self._reach = ReachIndex()
        """The pod peers every target ever had per port, and who serves DNS (§D47)."""
        self._rules_kept = 0
        self.overflow: Counter[str] = Counter()
        """Flows not kept because a cap was reached: ``policies``, ``peers`` or ``rules``."""
        self.filtered_namespace = 0
        """New entries not kept: their target is outside the namespaces chosen."""

    # --- counting -------------------------------------------------------------------------

    def keep(
        self, target: PolicyTarget, atom: AtomKey, flow: Flow, cls: str, *, new: bool = True
    ) -> RuleStats | None:
        """Count ``flow`` in the allow entry; ``new``: a new entry makes its target one to
        write again (an other-end entry only when it is a rule, :meth:`keep_other_end`)."""
        atoms = self._atoms.get(target)
        if atoms is None:
            options = self._options
            if (options.namespaces and target.namespace not in options.namespaces) or (
                target.namespace in options.excluded
            ):
                if new:
                    self.filtered_namespace += 1
                return None
            if options.max_policies and len(self._atoms) >= options.max_policies:
                self.overflow["policies"] += 1
                return None
            atoms = self._atoms[target] = {}
        stats = atoms.get(atom)
        if stats is None:
            options = self._options
            if options.max_peers and len(atoms) >= options.max_peers:
                self.overflow["peers"] += 1
                return None
            if options.max_rules and self._rules_kept >= options.max_rules:
                self.overflow["rules"] += 1
                return None
            self._rules_kept += 1
            stats = atoms[atom] = RuleStats()
            self._reach.note(target, atom)
            if new:
                self._new.add(target)  # its other-end entries in that direction join it
        stats.add(flow, cls, self._max_samples)
        return stats

    def keep_other_end(self, target: PolicyTarget, key: AtomKey, flow: Flow, cls: str) -> None:
        """Count ``flow`` in an entry kept for the other end of learned traffic; its target
        is one to write again only once the entry is a rule (:meth:`other_end_ok`)."""
        atoms = self._atoms.get(target)
        known = atoms is not None and key in atoms
        stats = self.keep(target, key, flow, cls, new=False)
        if stats is not None and not known and self.other_end_ok(target, key):
            self._new.add(target)

    def remember(self, key: EntryKey, stats: RuleStats) -> None:
        """The entry of a flow's endpoints and port, for the fast path (bounded)."""
        cache = self.cache
        if len(cache) >= _ENTRY_CACHE_LIMIT:
            cache.clear()
        cache[key] = stats

    def other_end_ok(self, target: PolicyTarget, key: AtomKey) -> bool:
        """Whether an other-end entry is a rule: its target has allow entries of its own in
        that direction (learning never puts a direction into default-deny from the other
        end's view alone), and none for the same peer and port."""
        atoms = self._atoms.get(target) or {}
        plain = key[:4]
        if plain in atoms:
            return False
        way = key[0]
        return any(k[0] == way and not _is_other_end(k) for k in atoms)

    # --- quick keys and their folds -------------------------------------------------------

    def read_quick_keys(
        self, entry_key: Callable[[QuickKey], EntryKey | None], parse: Callable[[Any], Flow]
    ) -> None:
        """Count lines by the keys of a :class:`QuickReader`: ``entry_key`` is its
        :meth:`~QuickReader.entry_key`, ``parse`` turns a line into its Flow (for the
        samples). Keys of another reader mean other entries: what the previous reader's
        keys counted is folded in first."""
        if entry_key != self._entry_key or parse != self._parse_line:
            self.fold()
            self.pending.clear()
        self._entry_key = entry_key
        self._parse_line = parse

    def pending_for(self, key: QuickKey) -> PendingCount | None:
        """A new count for the entry of ``key``, when there is that entry."""
        if not self._fast or self._entry_key is None:
            return None
        entry = self._entry_key(key)
        stats = None if entry is None else self.cache.get(entry)
        if entry is None or stats is None:
            return None
        if len(self.pending) >= _ENTRY_CACHE_LIMIT:
            self.fold()
            self.pending.clear()
        pending = self.pending[key] = PendingCount(stats, (entry[1], entry[2]))
        return pending

    def fold(self) -> None:
        self.fold_some(None)

    def fold_some(self, limit: int | None) -> bool:
        """Fold at most ``limit`` (None: all) of the quick-key counts into the entries:
        whether none is left."""
        if not self.pending:
            return True
        assert self._parse_line is not None
        return fold_pending(self.pending.values(), self._parse_line, self._max_samples, limit)

    # --- reading ----------------------------------------------------------------------------

    def folded(self) -> Mapping[PolicyTarget, Mapping[AtomKey, RuleStats]]:
        """Every entry, with what the quick keys counted folded in (read, do not change)."""
        self.fold()
        return self._atoms

    def reach(self, targets: Iterable[PolicyTarget]) -> Reach:
        """What the whole capture shows of these targets' peers and of DNS (a copy)."""
        return self._reach.view(targets)

    def rule_flows(self) -> int:
        """Flows that became (part of) an allow entry, moved out or not."""
        self.fold()
        counted = sum(
            st.count
            for atoms in self._atoms.values()
            for key, st in atoms.items()
            if not _is_other_end(key)
        )
        return counted + self._drained.flows

    def times(self) -> tuple[list[str], list[str]]:
        """The first and last time keys of the entries and of what was moved out."""
        self.fold()
        firsts = [self._drained.first] if self._drained.first else []
        lasts = [self._drained.last] if self._drained.last else []
        for atoms in self._atoms.values():
            for stats in atoms.values():
                if stats.first:
                    firsts.append(stats.first)
                if stats.last:
                    lasts.append(stats.last)
        return firsts, lasts

    def world_ips(self) -> set[str]:
        """The IPs of world peers the entries hold (the pods seen with them are kept)."""
        ips = set()
        for atoms in (*self._atoms.values(), *self._drained.world.values()):
            for key in atoms:
                peer = key[1]
                if isinstance(peer, CidrPeer):
                    ips.add(peer.cidr.split("/", 1)[0])
        return ips

    def world_totals(self) -> Mapping[PolicyTarget, Mapping[AtomKey, RuleStats]]:
        """The entries to world peers with what :meth:`drain` moved out folded back in."""
        self.fold()
        if not self._drained.world:
            return self._atoms
        merged = self._drained.copy()
        for target, atoms in self._atoms.items():
            for key, stats in atoms.items():
                if stats.count:
                    merged.add(target, key, stats, self._max_samples)  # keeps world peers
        return merged.world

    # --- a live flush ---------------------------------------------------------------------

    def take_new_targets(self) -> set[PolicyTarget]:
        """The targets that gained an allow entry since the last call (or since the start):
        the only policies a live flush may have to rewrite."""
        new, self._new = self._new, set()
        return new

    def busy_targets(self) -> list[PolicyTarget]:
        """The targets with flows :meth:`drain` has not moved out yet."""
        self.fold()
        return [t for t, atoms in self._atoms.items() if any(s.count for s in atoms.values())]

    def drain(
        self, targets: Iterable[PolicyTarget]
    ) -> dict[PolicyTarget, dict[AtomKey, RuleStats]]:
        """What these targets' entries gathered since they were last drained, moved out
        without copying. The entries stay, empty, so flows keep taking the fast path; the
        totals (flow counts, time window, world peers) still count what was moved out."""
        self.fold()
        out: dict[PolicyTarget, dict[AtomKey, RuleStats]] = {}
        drained = self._drained
        cap = self._max_samples
        for target in targets:
            atoms = self._atoms.get(target)
            if not atoms:
                continue
            moved = {}
            for key, stats in atoms.items():
                if stats.count and (not _is_other_end(key) or self.other_end_ok(target, key)):
                    taken = moved[key] = stats.take()
                    if not _is_other_end(key):  # the totals count each flow once
                        drained.add(target, key, taken, cap)
            if moved:
                out[target] = moved
        return out

    # --- hand-over --------------------------------------------------------------------------

    def state(
        self, *, copy: bool
    ) -> tuple[dict[PolicyTarget, dict[AtomKey, RuleStats]], DrainedTotals]:
        """The entries with flows, and what was moved out: copies, or these very values
        (a worker that is done hands them over)."""
        self.fold()
        atoms = {
            target: {
                atom: stats.copy() if copy else stats
                for atom, stats in atoms.items()
                if stats.count
            }
            for target, atoms in self._atoms.items()
        }
        return atoms, self._drained.copy() if copy else self._drained

    def absorb(
        self,
        atoms: Mapping[PolicyTarget, dict[AtomKey, RuleStats]],
        drained: DrainedTotals,
        *,
        own: bool,
    ) -> None:
        """Add another aggregation's entries (``own``: they are this call's alone, and what
        this one lacks is taken without a copy)."""
        self.fold()
        cap = self._max_samples
        self._drained.absorb(drained, cap)
        self.cache.clear()
        for target, theirs in atoms.items():
            self._reach.note_all(target, theirs)
            ours = self._atoms.get(target)
            if ours is None and own:
                self._atoms[target] = theirs
                continue
            if ours is None:
                ours = self._atoms[target] = {}
            for atom, stats in theirs.items():
                same = ours.get(atom)
                if same is None:
                    ours[atom] = stats if own else stats.copy()
                else:
                    same.absorb(stats, cap)
