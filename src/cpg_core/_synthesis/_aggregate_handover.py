"""An aggregator's hand-over: its state as plain values (a worker's result, a Dask part)
and the merge of another's into it; the order of merges never changes the totals. A worker
hands its aggregate over without copying it (:meth:`hand_over`): a forked worker's samples
cross the pipe as lines, a Dask worker's are parsed first (a parsed sample pickles to a
third of its line, and this crosses a network); absorbing compares samples by time,
parsing only to break a tie."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # _filters reads requests, which read this module
    pass
from cpg_core._synthesis._aggregate_base import (
    AggregateState,
)
from cpg_core._synthesis._aggregate_counting import _Counting


class _HandOver(_Counting):
    """State out, state in."""

    def state(self) -> AggregateState:
        """A snapshot of everything counted so far. It shares no mutable value with this
        aggregator: adding flows later never changes it."""
        return self._state(copy=True)

    def hand_over(self, *, parse_samples: bool = False) -> AggregateState:
        """Everything counted, as :meth:`state` gives it but without copying: what a worker
        that is done hands back. Samples may still be unparsed lines, unless
        ``parse_samples`` (a parsed sample pickles to about a third of its line: worth it
        when the partial crosses a network). This aggregator must not be used after."""
        state = self._state(copy=False)
        if parse_samples:
            for atoms in state.atoms.values():
                for stats in atoms.values():
                    stats.sample_flows()  # parses the samples in place
        return state

    def _state(self, *, copy: bool) -> AggregateState:
        self._fold()
        atoms = {
            target: {
                atom: stats.copy() if copy else stats
                for atom, stats in atoms.items()
                if stats.count
            }
            for target, atoms in self._atoms.items()
        }
        return AggregateState(
            decisions=dict(self.decisions),
            unhandled=dict(self.unhandled),
            ignored_protocols=dict(self.ignored_protocols),
            ignored_reasons=dict(self.ignored_reasons),
            filtered_namespace=self.filtered_namespace,
            audit_flows=self.audit_flows,
            findings={k: f.copy() for k, f in self.findings.items()} if copy else self.findings,
            atoms=atoms,
            drops={code: t.copy() for code, t in self.drops.items()} if copy else self.drops,
            unrecognised_reasons=dict(self.unrecognised_reasons),
            first_seen=self._first,
            last_seen=self._last,
            l7_records=self.l7_records,
            ip_names={ip: set(names) for ip, names in self.ip_names.items()}
            if copy
            else self.ip_names,
            pods=self.pods.copy() if copy else self.pods,
            drained=self._drained.copy() if copy else self._drained,
            identities=dict(self.identities),
            minutes=dict(self.minutes) if copy else self.minutes,
        )

    def absorb(self, state: AggregateState, *, own: bool = False) -> None:
        """Add another aggregator's counts and atoms; the result does not depend on order.
        Nothing of ``state`` is adopted as it is: absorbing the same state twice, or into two
        aggregators, never links them. With ``own`` the state is this call's alone (just
        unpickled, say), and what this aggregator lacks is taken from it without a copy."""
        self._fold()
        self.decisions.update(state.decisions)
        self.unhandled.update(state.unhandled)
        self.ignored_protocols.update(state.ignored_protocols)
        self.ignored_reasons.update(state.ignored_reasons)
        self.filtered_namespace += state.filtered_namespace
        self.audit_flows += state.audit_flows
        for key, finding in state.findings.items():
            known = self.findings.get(key)
            if known is None:
                self.findings[key] = finding.copy()
            else:
                known.absorb(finding)
        for code, tally in state.drops.items():
            counted = self.drops.get(code)
            if counted is None:
                self.drops[code] = tally.copy()
            else:
                counted.absorb(tally)
        self.unrecognised_reasons.update(state.unrecognised_reasons)
        if state.first_seen and (not self._first or state.first_seen < self._first):
            self._first = state.first_seen
        self._last = max(self._last, state.last_seen)
        self.l7_records += state.l7_records
        self.identities.update(state.identities)
        for minute, flows in state.minutes.items():
            self.minutes[minute] = self.minutes.get(minute, 0) + flows
        for ip, names in state.ip_names.items():
            self.ip_names.setdefault(ip, set()).update(names)
        self.pods.absorb(state.pods)
        if self.pods.full:
            self.pods.forget(self._world_ips())
        cap = self._max_samples
        self._drained.absorb(state.drained, cap)
        self._entries.clear()
        for target, atoms in state.atoms.items():
            self._reach.note_all(target, atoms)
            ours = self._atoms.get(target)
            if ours is None and own:
                self._atoms[target] = atoms
                continue
            if ours is None:
                ours = self._atoms[target] = {}
            for atom, stats in atoms.items():
                same = ours.get(atom)
                if same is None:
                    ours[atom] = stats if own else stats.copy()
                else:
                    same.absorb(stats, cap)
