"""The accumulator a run feeds flows into: decisions, counts, findings and allow entries.

Pure and incremental: ``add`` one flow at a time, read the totals and the policy plans at
any point. Order of flows never changes the result. The aggregator decides and resolves
each flow and keeps the tallies; the allow entries and every count of them are one value it
holds (:class:`~cpg_core._synthesis._entries.Entries`), as are the pods it saw
(:class:`PodMemory`) and the resolver; what the plans make of the entries is
``aggregate_plans``'s. A worker hands its state over as a plain value and another
aggregator absorbs it (the order of merges never changes the totals): a forked worker's
samples cross the pipe as lines, a Dask worker's are parsed first (a parsed sample pickles
to a third of its line, and this crosses a network).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from cpg_core._base.documents import ClusterHealth
from cpg_core._base.dropreasons import POLICY_DENIED, is_known_reason, reason_name
from cpg_core._base.flow import ICMP_PROTOCOLS, PORT_PROTOCOLS, Endpoint, EntryKey, Flow
from cpg_core._base.l7 import dns_name, http_method, path_regex, valid_dns_name
from cpg_core._base.rules import DNS, DNS_PORT, EGRESS, HTTP, INGRESS, Atom, CidrPeer, EndpointPeer
from cpg_core._flows.attribution import NO_TIME, RuleStats, flow_class, time_key
from cpg_core._flows.decide import Decision, candidate_by_key, decide, not_a_drop_by_verdict
from cpg_core._flows.numbers import QuickKey
from cpg_core._flows.synthesis import (
    PolicyTarget,
    Resolved,
    Resolver,
    Unhandled,
    Unresolved,
    mesh_peer,
)
from cpg_core._flows.triage import (
    DropTally,
    FindingTally,
    HealthSession,
    absorb_tallies,
    deny_finding_key,
    health_document,
)
from cpg_core._synthesis._aggregate_base import (
    _AUDIT,
    _CANDIDATE,
    _DROPPED,
    _EGRESS,
    _FINDINGS,
    _INGRESS,
    _LEARNED_VERDICTS,
    _TALLIED,
    NAMED_CIDR,
    OTHER_END,
    AggregateOptions,
    AggregateState,
    AtomKey,
    DrainedTotals,
    FindingKey,
    PolicyPlan,
    count_minute,
)
from cpg_core._synthesis._entries import Entries
from cpg_core._synthesis._pods import PodMemory
from cpg_core._synthesis.aggregate_plans import (
    KUBE_DNS,
    HeldBack,
    HeldStats,
    WorldPods,
    as_atoms,
    dns_pods_known,
    held_back,
    hold_back,
    name_world_peers,
    plan_policies,
    resolve_entries,
    system_findings,
)
from cpg_core._synthesis.scope import Reach, ScopeReport, for_the_cluster

if TYPE_CHECKING:  # _filters reads requests, which read this module
    from cpg_core._flows.identities import IdentityBook


class Aggregator:
    """Feeds flows through decide → resolve and keeps what every report needs.

    ``add`` has a fast path for the common candidate (a DROPPED POLICY_DENIED flow between
    known endpoints); anything else goes through :func:`decide` and :meth:`Resolver.resolve`,
    which define the behaviour (a test checks both paths agree)."""

    def __init__(
        self, options: AggregateOptions | None = None, resolver: Resolver | None = None
    ) -> None:
        """``resolver`` may be shared by aggregators that follow one another (its caches
        depend only on endpoints)."""
        self.options = options or AggregateOptions()
        self.decisions: Counter[Decision] = Counter()
        self.unhandled: Counter[Unhandled] = Counter()
        self.ignored_protocols: Counter[str] = Counter()
        self.ignored_reasons: Counter[str] = Counter()
        self.audit_flows = 0
        self.findings: dict[FindingKey, FindingTally] = {}
        self.drops: dict[int, DropTally] = {}
        """Infrastructure, transient and noise drops by reason."""
        self.unrecognised_reasons: Counter[int] = Counter()
        """Drop reason numbers this version does not know (classified as unknown)."""
        self._first = NO_TIME  # time window of flows outside the allow entries
        self._last = NO_TIME
        self.minutes: dict[str, int] = {}
        """Flows per minute of the capture: where it has gaps (§D59)."""
        self.scope = ScopeReport()
        """What the plans so far did to keep the cluster working (§D47)."""
        self._max_samples = self.options.max_samples
        self._l7 = self.options.l7
        self.l7_records = 0
        """Flows with an HTTP or DNS record (seen only with ``l7``)."""
        self.ip_names: dict[str, set[str]] = {}
        """IP -> DNS names learned from the capture (only with ``l7``)."""
        self.pods = PodMemory()
        """IPs the capture shows as a pod's (an endpoint with a pod name), and the pod when
        its labels are known: a world peer with one of them is a pod Hubble could not
        identify, never a CIDR rule; the rule names that pod (§D22). Bounded (§D56)."""
        self._resolver = resolver or Resolver()
        self._explicit = self.options.explicit_cluster
        book = self.options.identities
        self._book = book if book is not None and not book.empty else None
        self.identities: Counter[str] = Counter()
        """Sides of flows the identities given filled in (or found untrusted), by kind."""
        self._since = self.options.since
        self._until = self.options.until
        self._window = bool(self._since or self._until)
        chosen = self.options.flow_filter
        self._filter = chosen if chosen is not None and not chosen.empty else None
        self._fast = self._filter is None and candidate_by_key(self.options.decide)
        """Whether a DROPPED POLICY_DENIED flow may be counted by its key (the decision's
        own word on which options allow it, and no flow filter to ask)."""
        self.entries = Entries(self.options, fast=self._fast)
        """The allow entries and every count of them."""
        self._cache = self.entries.cache
        self._pending = self.entries.pending
        self.overflow = self.entries.overflow
        """Flows not kept because a cap was reached: ``policies``, ``peers`` or ``rules``."""

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
            stats = self._cache.get(
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
            pending = self.entries.pending_for(key)
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
            pods.forget(self.entries.world_ips())

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
            self.entries.keep(
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
            self.entries.keep(
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
        self.entries.keep_other_end(other, (back, subject, protocol, port, OTHER_END), flow, cls)

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
                stats = self.entries.keep(target, (way, peer, protocol, port), flow, cls)
                if stats is not None:
                    key = (direction, flow.source, flow.destination, protocol, port)
                    self.entries.remember(key, stats)
                if given is None:
                    self._other_end(flow, way, target_ep, peer_ep, protocol, port, cls)
                return
        result = resolver.resolve(flow, self._explicit)
        if type(result) is Resolved:
            atom = result.atom
            kept = self.entries.keep(
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
        return self.entries.rule_flows()

    @property
    def filtered_namespace(self) -> int:
        """Candidates whose target is outside the namespaces chosen."""
        return self.entries.filtered_namespace

    def window(self) -> tuple[str, str]:
        """Time keys of the first and last flow seen ("" when no flow had a time)."""
        firsts, lasts = self.entries.times()
        firsts += [self._first] if self._first else []
        lasts += [self._last] if self._last else []
        return (min(firsts) if firsts else NO_TIME, max(lasts) if lasts else NO_TIME)

    # --- hand-over -------------------------------------------------------------------------

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
        atoms, drained = self.entries.state(copy=copy)
        return AggregateState(
            decisions=dict(self.decisions),
            unhandled=dict(self.unhandled),
            ignored_protocols=dict(self.ignored_protocols),
            ignored_reasons=dict(self.ignored_reasons),
            filtered_namespace=self.entries.filtered_namespace,
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
            drained=drained,
            identities=dict(self.identities),
            minutes=dict(self.minutes) if copy else self.minutes,
        )

    def absorb(self, state: AggregateState, *, own: bool = False) -> None:
        """Add another aggregator's counts and atoms; the result does not depend on order.
        Nothing of ``state`` is adopted as it is: absorbing the same state twice, or into two
        aggregators, never links them. With ``own`` the state is this call's alone (just
        unpickled, say), and what this aggregator lacks is taken from it without a copy."""
        self.entries.fold()
        self.decisions.update(state.decisions)
        self.unhandled.update(state.unhandled)
        self.ignored_protocols.update(state.ignored_protocols)
        self.ignored_reasons.update(state.ignored_reasons)
        self.entries.filtered_namespace += state.filtered_namespace
        self.audit_flows += state.audit_flows
        absorb_tallies(self.findings, state.findings)
        absorb_tallies(self.drops, state.drops)
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
            self.pods.forget(self.entries.world_ips())
        self.entries.absorb(state.atoms, state.drained, own=own)

    # --- a live flush (ARCHITECTURE §D32) ---------------------------------------------------

    def read_quick_keys(
        self, entry_key: Callable[[QuickKey], EntryKey | None], parse: Callable[[Any], Flow]
    ) -> None:
        """Let :meth:`add_line` count lines by the keys of a :class:`QuickReader` (see
        :meth:`Entries.read_quick_keys`)."""
        self.entries.read_quick_keys(entry_key, parse)

    def fold_some(self, limit: int | None) -> bool:
        """Fold at most ``limit`` (None: all) of the counts :meth:`add_line` keeps (every
        read folds them all first): whether none is left. A live capture folds a flush's
        backlog a slice at a time, so that the stream waits only for one slice."""
        return self.entries.fold_some(limit)

    def take_new_targets(self) -> set[PolicyTarget]:
        """The targets that gained an allow entry since the last call."""
        return self.entries.take_new_targets()

    def busy_targets(self) -> list[PolicyTarget]:
        """The targets with flows :meth:`drain` has not moved out yet."""
        return self.entries.busy_targets()

    def drain(
        self, targets: Iterable[PolicyTarget]
    ) -> dict[PolicyTarget, dict[AtomKey, RuleStats]]:
        """What these targets' allow entries gathered since they were last drained, moved
        out without copying (see :meth:`resolved`, :meth:`Entries.drain`)."""
        return self.entries.drain(targets)

    # --- answers ----------------------------------------------------------------------------

    @property
    def atoms(self) -> dict[PolicyTarget, set[Atom]]:
        return {target: set(atoms) for target, atoms in self.attribution().items()}

    def attribution(self) -> dict[PolicyTarget, dict[Atom, RuleStats]]:
        return as_atoms(self.entries.folded(), self.entries.other_end_ok)

    def plans(
        self,
        resolved: Mapping[PolicyTarget, Mapping[Atom, RuleStats]] | None = None,
        reach: Reach | None = None,
    ) -> list[PolicyPlan]:
        """One plan per target, sorted by namespace then workload, kept working for the
        cluster as the options' scope says (§D47; what was done is :attr:`scope`). A world
        peer that is a pod's IP is a finding, not a rule (see :meth:`health`). Given what
        :meth:`resolved` made of drained entries and the :meth:`reach` of their targets
        (both taken while flows could not arrive), the plans of those alone (reading nothing
        else of this aggregator, so flows may keep arriving meanwhile)."""
        attribution = self.resolved(self.entries.folded()) if resolved is None else resolved
        scope = self.options.scope
        if scope.enabled and attribution:
            attribution, report = for_the_cluster(
                attribution,
                self.entries.reach(attribution) if reach is None else reach,
                scope,
                l7=self._l7,
                dns_known=dns_pods_known(self.options.identities),
                max_samples=self._max_samples,
                declared=self.options.declarations,
            )
            self.scope = self.scope.joined(report)
        return plan_policies(attribution)

    def reach(self, targets: Iterable[PolicyTarget]) -> Reach:
        """What the whole capture shows of these targets' peers and of DNS (a copy)."""
        return self.entries.reach(targets)

    def resolved(
        self, raw: Mapping[PolicyTarget, Mapping[AtomKey, RuleStats]]
    ) -> dict[PolicyTarget, dict[Atom, RuleStats]]:
        """The allow entries of ``raw`` (this aggregator's, or what :meth:`drain` moved out)
        as policies hold them (see :func:`resolve_entries`)."""
        return resolve_entries(
            raw,
            self.entries.other_end_ok,
            WorldPods(self.pods, self._resolver),
            self.ip_names if self._l7 else None,
            self._max_samples,
        )

    def health(self, *, started: str, ended: str, lost_events: int = 0) -> ClusterHealth:
        """The cluster-health document of what was added so far (times are passed in; the
        system namespaces' left-out rules are those of the plans made so far)."""
        first, last = self.window()
        pods = WorldPods(self.pods, self._resolver)
        return health_document(
            HealthSession(
                started=started,
                ended=ended,
                flows_seen=self.total_flows,
                lost_events=lost_events,
                first_flow=first,
                last_flow=last,
                replies=self.decisions[Decision.REPLY],
                not_a_drop=self.decisions[Decision.NOT_A_DROP],
            ),
            self.drops,
            [
                *self.findings.values(),
                *pods.findings(self.entries.world_totals()),
                *system_findings(self.scope),
            ],
        )


__all__ = [
    "KUBE_DNS",
    "NAMED_CIDR",
    "OTHER_END",
    "AggregateOptions",
    "AggregateState",
    "Aggregator",
    "AtomKey",
    "DrainedTotals",
    "FindingKey",
    "HeldBack",
    "HeldStats",
    "PolicyPlan",
    "held_back",
    "hold_back",
    "name_world_peers",
    "plan_policies",
]
