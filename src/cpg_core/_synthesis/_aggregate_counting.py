"""Counting flows into the aggregator: decide, resolve, and keep what each flow adds to its
allow entry, finding or tally, with a fast path for the common candidate."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cpg_core._base.dropreasons import POLICY_DENIED, is_known_reason, reason_name
from cpg_core._base.flow import ICMP_PROTOCOLS, PORT_PROTOCOLS, Endpoint, Flow
from cpg_core._base.l7 import dns_name, http_method, path_regex, valid_dns_name
from cpg_core._base.rules import DNS, DNS_PORT, EGRESS, HTTP, INGRESS, Atom, CidrPeer, EndpointPeer
from cpg_core._flows.attribution import NO_TIME, RuleStats, flow_class, time_key
from cpg_core._flows.decide import Decision, decide, not_a_drop_by_verdict
from cpg_core._flows.numbers import QuickKey
from cpg_core._flows.synthesis import PolicyTarget, Resolved, Unresolved, mesh_peer
from cpg_core._flows.triage import DropTally, FindingTally, deny_finding_key

if TYPE_CHECKING:  # _filters reads requests, which read this module
    from cpg_core._flows.identities import IdentityBook
from cpg_core._synthesis._aggregate_base import (
    _AUDIT,
    _CANDIDATE,
    _DROPPED,
    _EGRESS,
    _ENTRY_CACHE_LIMIT,
    _FINDINGS,
    _INGRESS,
    _LEARNED_VERDICTS,
    _TALLIED,
    NAMED_CIDR,
    OTHER_END,
    AtomKey,
    FindingKey,
    _is_other_end,
    count_minute,
)
from cpg_core._synthesis._aggregate_folds import _Folds


class _Counting(_Folds):
    """Flows in: each one decided, resolved and counted; the totals read back."""

    def use_identities(self, book: IdentityBook | None) -> None:
        """Fill in the flows added from now on with ``book`` (a live session reads the
        cluster's identities again as pods come and go); what was added stays as it was."""
        self._book = book if book is not None and not book.empty else None

    def add(self, flow: Flow) -> Decision:
        count_minute(self.minutes, flow.time)
        if self._book is not None:
            flow, kinds = self._book.resolve(flow)
            if kinds:
                self.identities.update(kinds)
        if self._filter is not None and not self._filter.matches(flow):
            self.decisions[Decision.FILTERED] += 1
            return Decision.FILTERED
        if self._window and not self._inside(flow.time):
            self.decisions[Decision.OUTSIDE_WINDOW] += 1
            return Decision.OUTSIDE_WINDOW
        if self._l7 and (flow.l7 is not None or flow.destination_names):
            self._learn(flow)
            if flow.l7 is not None:
                return self._slow(flow)
        if (
            self._fast
            and flow.verdict == _DROPPED
            and flow.drop_reason == POLICY_DENIED
            and flow.is_reply is not True
            and not flow.destination_names
        ):
            decision = Decision.CANDIDATE
            # The same pods on the same port again: straight to the allow entry's stats.
            stats = self._entries.get(
                (flow.direction, flow.source, flow.destination, flow.protocol, flow.port)
            )
            if stats is not None:
                self.decisions[decision] += 1
                stats.add(flow, "policy", self._max_samples)
                return decision
        else:
            return self._slow(flow)
        self.decisions[decision] += 1
        self._candidate(flow)
        return decision

    def add_line(self, key: QuickKey, time: str, raw: Any) -> bool:
        """Count a DROPPED, POLICY_DENIED, non-reply flow with no L7 record or names by its
        quick key alone (from a :class:`QuickReader`, or the live path's converter: see
        :meth:`read_quick_keys`), keeping ``raw`` unparsed as its sample. It is counted in a
        :class:`PendingCount`, which costs less than adding it to the entry's stats. False,
        and nothing counted, when the entry is new, outside the window, or the flow's time
        ties with the newest of its pair: then :meth:`add` the parsed flow. Either way the
        result is the same."""
        pending = self._pending.get(key)
        if pending is None:
            pending = self._count_for(key)
            if pending is None:
                return False
        if self._window and not self._inside(time):
            return False
        when = time if (len(time) == 30 and time[-1] == "Z") else time_key(time)
        if not pending.count or when > pending.newest:
            pending.newest = when
            pending.raw = raw
        elif when == pending.newest and self._max_samples:
            return False  # which one is the sample depends on the rest of the flows
        if when and (not pending.first or when < pending.first):
            pending.first = when
        pending.count += 1
        self.decisions[_CANDIDATE] += 1
        count_minute(self.minutes, time)
        return True

    def add_context(self, decision: Decision, time: str) -> bool:
        """Count a flow that only adds context, by its time alone: REPLY (a DROPPED
        POLICY_DENIED reply) or NOT_A_DROP (a verdict other than DROPPED and AUDIT), as
        :meth:`QuickReader.read` (or the live path's converter) read it. False, and nothing
        counted, when the flow needs :meth:`add` (a time window is set, or options change what
        such a flow means)."""
        if (
            self._window
            or self._filter is not None
            or (decision is Decision.REPLY and not self._fast)
            or (decision is Decision.NOT_A_DROP and not not_a_drop_by_verdict(self.options.decide))
        ):
            return False
        self.decisions[decision] += 1
        count_minute(self.minutes, time)
        key = time if (len(time) == 30 and time[-1] == "Z") else time_key(time)
        if key:
            if not self._first or key < self._first:
                self._first = key
            if key > self._last:
                self._last = key
        return True

    def _inside(self, when: str) -> bool:
        """Whether a flow's time is inside --since/--until (a flow without one is not)."""
        key = time_key(when)
        if key == NO_TIME:
            return False
        return (not self._since or key >= self._since) and (not self._until or key <= self._until)

    def _note_pods(self, flow: Flow) -> None:
        pods = self.pods
        when = ""
        for endpoint, ip in (
            (flow.source, flow.source_ip),
            (flow.destination, flow.destination_ip),
        ):
            if endpoint.pod_name and ip:
                if not when:
                    text = flow.time
                    when = text if (len(text) == 30 and text[-1] == "Z") else time_key(text)
                # Cheap here, checked in full where used (:meth:`_pod_peer`): a pod with
                # labels that is not the world (an L7 record's world peer names its pod too).
                labels = endpoint.labels
                usable = labels and not labels[0].startswith("reserved:") and endpoint.identity != 2
                pods.note(ip, when, endpoint if usable else None)
        if pods.full:
            pods.forget(self._world_ips())

    def _world_ips(self) -> set[str]:
        """The IPs of world peers the allow entries hold (the pods seen with them are kept)."""
        ips = set()
        for atoms in (*self._atoms.values(), *self._drained.world.values()):
            for key in atoms:
                peer = key[1]
                if isinstance(peer, CidrPeer):
                    ips.add(peer.cidr.split("/", 1)[0])
        return ips

    def _slow(self, flow: Flow) -> Decision:
        self._note_pods(flow)
        decision = decide(flow, self.options.decide)
        self.decisions[decision] += 1
        verdict = flow.verdict
        if verdict == _AUDIT:
            self.audit_flows += 1
        elif verdict == _DROPPED and not is_known_reason(flow.drop_reason):
            self.unrecognised_reasons[flow.drop_reason] += 1
        key = time_key(flow.time)
        if key:
            if not self._first or key < self._first:
                self._first = key
            self._last = max(self._last, key)
        if decision is Decision.CANDIDATE:
            self._candidate(flow)
        elif decision in _TALLIED:
            tally = self.drops.get(flow.drop_reason)
            if tally is None:
                tally = self.drops[flow.drop_reason] = DropTally()
            tally.add(flow)
        elif decision in _FINDINGS:
            self._find(deny_finding_key(decision.value, flow), flow)
        elif decision is Decision.IGNORED_PROTOCOL:
            self.ignored_protocols[flow.protocol.lower()] += 1
        elif decision is Decision.IGNORED_REASON:
            self.ignored_reasons[reason_name(flow.drop_reason)] += 1
        return decision

    def _find(self, key: FindingKey, flow: Flow) -> None:
        finding = self.findings.get(key)
        if finding is None:
            finding = self.findings[key] = FindingTally(*key)
        finding.add(flow)

    def _learn(self, flow: Flow) -> None:
        """Names for IPs (DNS responses of any verdict, ``destination_names``), and L7 counts."""
        l7 = flow.l7
        if l7 is not None:
            if l7.http is not None or l7.dns is not None:
                self.l7_records += 1
            if l7.dns is not None and l7.dns.query:
                name = dns_name(l7.dns.query)
                if valid_dns_name(name):
                    for ip in l7.dns.ips:
                        self.ip_names.setdefault(ip, set()).add(name)
        if flow.destination_names and flow.destination_ip:
            valid = {n for n in map(dns_name, flow.destination_names) if valid_dns_name(n)}
            if valid:
                self.ip_names.setdefault(flow.destination_ip, set()).update(valid)

    def _candidate_l7(self, flow: Flow) -> bool:
        """An L7 candidate: HTTP requests become per-port HTTP rules, DNS queries become names
        on the resolver. False when the flow carries nothing usable (it is then plain L4)."""
        l7 = flow.l7
        assert l7 is not None
        result = self._resolver.resolve(flow, self._explicit)
        if type(result) is not Resolved:
            return False
        atom = result.atom
        cls = flow_class(flow)
        detail: tuple[str, ...]
        if l7.http is not None and l7.http.method.strip():
            detail = (
                HTTP,
                http_method(l7.http.method),
                path_regex(l7.http.url, self.options.collapse_paths),
            )
            self._keep(
                result.target,
                (atom.direction, atom.peer, atom.protocol, atom.port, detail),
                flow,
                cls,
            )
            self._other_end_of(flow, atom, cls)
            return True
        if (
            l7.dns is not None
            and atom.direction == EGRESS
            and valid_dns_name(dns_name(l7.dns.query))
        ):
            detail = (DNS, dns_name(l7.dns.query))
            self._keep(
                result.target,
                (atom.direction, atom.peer, atom.protocol, DNS_PORT, detail),
                flow,
                cls,
            )
            self._other_end_of(flow, atom, cls)
            return True
        return False

    def _other_end_of(self, flow: Flow, atom: Atom, cls: str) -> None:
        ingress = atom.direction == INGRESS
        target_ep, peer_ep = (
            (flow.destination, flow.source) if ingress else (flow.source, flow.destination)
        )
        self._other_end(flow, atom.direction, target_ep, peer_ep, atom.protocol, atom.port, cls)

    def _other_end(
        self,
        flow: Flow,
        way: str,
        target_ep: Endpoint,
        peer_ep: Endpoint,
        protocol: str,
        port: int,
        cls: str,
    ) -> None:
        """Learned traffic between two pods, kept for the end that did not record it too: a
        packet seen arriving left its source's egress, one seen leaving reaches the
        destination's ingress. A capture often shows one end only (one node's Hubble, a
        sample); a policy learned for the other end must not break it (ARCHITECTURE §D27).
        Kept as an other-end entry, a rule only where that end has rules of its own in
        that direction."""
        if not self.options.decide.learn or flow.verdict not in _LEARNED_VERDICTS:
            return
        if peer_ep.cluster_name != target_ep.cluster_name:
            return  # the other end is in another cluster: its policies are not cpg's here
        resolver = self._resolver
        other = resolver.roles(peer_ep).target
        subject = resolver.roles(target_ep).peer
        if type(other) is not PolicyTarget or type(subject) is not EndpointPeer:
            return
        back = EGRESS if way == INGRESS else INGRESS
        key = (back, subject, protocol, port, OTHER_END)
        atoms = self._atoms.get(other)
        known = atoms is not None and key in atoms
        stats = self._keep(other, key, flow, cls, new=False)
        if stats is not None and not known and self._other_end_ok(other, key):
            self._new.add(other)

    def admit(self, flow: Flow, cls: str) -> None:
        """Make an allow entry for ``flow`` whatever its verdict, its flows counted under
        ``cls`` (``cpg plan --write-fixes`` admits traffic that works today this way)."""
        self.decisions[Decision.CANDIDATE] += 1
        self._candidate(flow, cls)

    def _candidate(self, flow: Flow, given: str | None = None) -> None:
        self._note_pods(flow)
        if self._l7 and flow.l7 is not None and given is None and self._candidate_l7(flow):
            return
        resolver = self._resolver
        direction = flow.direction
        protocol = flow.protocol
        port = flow.port
        if direction in (_INGRESS, _EGRESS) and (
            (protocol in PORT_PROTOCOLS and 0 < port <= 65535) or protocol in ICMP_PROTOCOLS
        ):
            if direction == _INGRESS:
                way, target_ep, peer_ep = INGRESS, flow.destination, flow.source
            else:
                way, target_ep, peer_ep = EGRESS, flow.source, flow.destination
            target = resolver.roles(target_ep).target
            peer = resolver.roles(peer_ep).peer
            if type(target) is PolicyTarget and peer is not None and type(peer) is not Unresolved:
                if self._explicit or peer_ep.cluster_name != target_ep.cluster_name:
                    peer = mesh_peer(peer, target_ep, peer_ep, self._explicit)
                cls = given or (
                    "policy"
                    if flow.drop_reason == POLICY_DENIED and flow.verdict == _DROPPED
                    else flow_class(flow)
                )
                stats = self._keep(target, (way, peer, protocol, port), flow, cls)
                if stats is not None:
                    entries = self._entries
                    if len(entries) >= _ENTRY_CACHE_LIMIT:
                        entries.clear()
                    entries[(direction, flow.source, flow.destination, protocol, port)] = stats
                if given is None:
                    self._other_end(flow, way, target_ep, peer_ep, protocol, port, cls)
                return
        result = resolver.resolve(flow, self._explicit)
        if type(result) is Resolved:
            atom = result.atom
            kept = self._keep(
                result.target,
                (atom.direction, atom.peer, atom.protocol, atom.port),
                flow,
                given or flow_class(flow),
            )
            if (
                kept is not None
                and not self._l7
                and flow.destination_names
                and isinstance(atom.peer, CidrPeer)
            ):
                names = ", ".join(sorted({dns_name(n) for n in flow.destination_names}))
                subject = (
                    f"{result.target.namespace}/{result.target.workload} → "
                    f"{atom.peer.cidr.split('/', 1)[0]} ({names}) {atom.protocol}/{atom.port}"
                )
                self._find((NAMED_CIDR, subject, ()), flow)
            return
        assert isinstance(result, Unresolved)
        self.unhandled[result.reason] += 1
        self._find((result.reason.value, result.subject, ()), flow)

    def _keep(
        self, target: PolicyTarget, atom: AtomKey, flow: Flow, cls: str, *, new: bool = True
    ) -> RuleStats | None:
        """Count ``flow`` in the allow entry; ``new``: a new entry makes its target one to
        write again (an other-end entry only when it is a rule, see :meth:`_other_end`)."""
        atoms = self._atoms.get(target)
        if atoms is None:
            namespaces = self.options.namespaces
            if (namespaces and target.namespace not in namespaces) or (
                target.namespace in self.options.excluded
            ):
                if new:
                    self.filtered_namespace += 1
                return None
            if self._max_policies and len(self._atoms) >= self._max_policies:
                self.overflow["policies"] += 1
                return None
            atoms = self._atoms[target] = {}
        stats = atoms.get(atom)
        if stats is None:
            if self._max_peers and len(atoms) >= self._max_peers:
                self.overflow["peers"] += 1
                return None
            if self._max_rules and self._rules_kept >= self._max_rules:
                self.overflow["rules"] += 1
                return None
            self._rules_kept += 1
            stats = atoms[atom] = RuleStats()
            self._reach.note(target, atom)
            if new:
                self._new.add(target)  # its other-end entries in that direction join it
        stats.add(flow, cls, self._max_samples)
        return stats

    @property
    def infra_drops(self) -> int:
        """Infrastructure and transient drops (what --fail-on-infra-drops counts)."""
        return self.decisions[Decision.INFRA] + self.decisions[Decision.TRANSIENT]

    @property
    def total_flows(self) -> int:
        return sum(self.decisions.values())

    @property
    def candidates(self) -> int:
        return self.decisions[Decision.CANDIDATE]

    @property
    def rule_flows(self) -> int:
        """Flows that became (part of) an allow entry."""
        self._fold()
        counted = sum(
            st.count
            for atoms in self._atoms.values()
            for key, st in atoms.items()
            if not _is_other_end(key)
        )
        return counted + self._drained.flows

    def window(self) -> tuple[str, str]:
        """Time keys of the first and last flow seen ("" when no flow had a time)."""
        self._fold()
        firsts = [t for t in (self._first, self._drained.first) if t]
        lasts = [t for t in (self._last, self._drained.last) if t]
        for atoms in self._atoms.values():
            for stats in atoms.values():
                if stats.first:
                    firsts.append(stats.first)
                if stats.last:
                    lasts.append(stats.last)
        return (min(firsts) if firsts else NO_TIME, max(lasts) if lasts else NO_TIME)
