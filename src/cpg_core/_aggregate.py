"""The accumulator a run feeds flows into: decisions, counts, findings and rule atoms.

Pure and incremental: ``add`` one flow at a time, read the totals and the policy plans at
any point. Order of flows never changes the result.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import TYPE_CHECKING, Any

import attrs

from cpg_core._attribution import NO_TIME, RuleStats, flow_class, time_key
from cpg_core._decide import FINDING_DECISIONS, DecideOptions, Decision, decide
from cpg_core._documents import ClusterHealth
from cpg_core._dropreasons import POLICY_DENIED, is_known_reason, reason_name
from cpg_core._flow import (
    ICMP_PROTOCOLS,
    PORT_PROTOCOLS,
    Direction,
    Endpoint,
    EntryKey,
    Flow,
    Verdict,
)
from cpg_core._l7 import dns_name, http_method, path_regex, valid_dns_name
from cpg_core._labels import format_labels
from cpg_core._names import policy_name, short_hash
from cpg_core._numbers import QuickKey
from cpg_core._pending import PendingCount, fold_pending
from cpg_core._rules import (
    DNS,
    DNS_PORT,
    DNS_PORTS,
    EGRESS,
    HTTP,
    INGRESS,
    Atom,
    CidrPeer,
    EndpointPeer,
    FqdnPeer,
    Peer,
    Rule,
    describe_rule,
    peer_sort_key,
    rules_from_atoms,
)
from cpg_core._synthesis import (
    PolicyTarget,
    Resolved,
    Resolver,
    Unhandled,
    Unresolved,
    endpoint_order,
    is_pod_endpoint,
    mesh_peer,
)
from cpg_core._triage import (
    DropTally,
    FindingTally,
    HealthSession,
    deny_finding_key,
    health_document,
)

if TYPE_CHECKING:  # _filters reads requests, which read this module
    from cpg_core._filters import FlowFilter

AtomKey = tuple[Any, ...]
"""An Atom's fields as a plain tuple: (direction, peer, protocol, port[, l7])."""
FindingKey = tuple[str, str, tuple[str, ...]]
"""(kind, subject, denying policies)."""
_TALLIED = frozenset({Decision.INFRA, Decision.TRANSIENT, Decision.NOISE})
OTHER_END = ("other-end",)
"""The fifth field of an allow entry kept for the other end of learned traffic (see
:meth:`Aggregator._other_end`): a rule only where that end has rules of its own."""


def _is_other_end(key: AtomKey) -> bool:
    return len(key) > 4 and key[4] == OTHER_END


_LEARNED_VERDICTS = frozenset({int(Verdict.FORWARDED), int(Verdict.REDIRECTED), int(Verdict.AUDIT)})
NAMED_CIDR = "cidr_for_dns_name"
"""A toCIDR rule written for an address Hubble knew a DNS name of (without ``--l7``)."""
_FINDINGS = FINDING_DECISIONS
_ENTRY_CACHE_LIMIT = 65536
_CANDIDATE = Decision.CANDIDATE
_AUDIT = int(Verdict.AUDIT)
_DROPPED = int(Verdict.DROPPED)
_INGRESS = int(Direction.INGRESS)
_EGRESS = int(Direction.EGRESS)


@attrs.frozen(slots=True)
class AggregateOptions:
    decide: DecideOptions = attrs.Factory(DecideOptions)
    namespaces: frozenset[str] = frozenset()
    """Policy-target namespaces to keep; empty keeps every namespace."""
    max_samples: int = 10
    """Sample flows kept per allow entry (0 keeps none)."""
    l7: bool = False
    """Turn HTTP and DNS records into L7 rules, and named world peers into ``toFQDNs``."""
    collapse_paths: bool = False
    """With ``l7``: identifier path segments become one-segment wildcards."""
    since: str = ""
    """A time key: flows before it are counted as outside the window, not used."""
    until: str = ""
    """A time key: flows after it are counted as outside the window, not used."""
    flow_filter: FlowFilter | None = None
    """Only the flows it selects are used; the others are counted as filtered."""
    explicit_cluster: bool = False
    """Endpoint peers carry their ClusterMesh cluster label even when it is the target's
    (Cilium before 1.19, where a selector without one selects every cluster)."""


@attrs.frozen(slots=True)
class PolicyPlan:
    """Everything needed to write one policy file."""

    target: PolicyTarget
    workload: str
    """File stem and evidence name; unique within its namespace."""
    name: str
    rules: tuple[Rule, ...]
    attribution: dict[Atom, RuleStats] = attrs.field(factory=dict, eq=False)
    """What each allow entry of this run was built from."""

    @property
    def namespace(self) -> str:
        return self.target.namespace

    def absorbing(self, earlier: PolicyPlan, max_samples: int) -> PolicyPlan:
        """This plan with the attribution of an earlier plan of the same target folded in
        (its rules stay this plan's: the earlier entries are already in the file)."""
        attribution = {atom: stats.copy() for atom, stats in self.attribution.items()}
        for atom, stats in earlier.attribution.items():
            mine = attribution.get(atom)
            if mine is None:
                attribution[atom] = stats.copy()
            else:
                mine.absorb(stats, max_samples)
        return attrs.evolve(self, attribution=attribution)

    def joining(self, earlier: PolicyPlan, max_samples: int) -> PolicyPlan:
        """This plan and an earlier one of the same target that was never written: the rules
        of both, with the flows of both (``--stable-for`` keeps a policy back this way)."""
        merged = self.absorbing(earlier, max_samples)
        return attrs.evolve(merged, rules=tuple(rules_from_atoms(merged.attribution)))

    def with_selector_suffix(self) -> PolicyPlan:
        """The plan under a name derived from its selector too, for when another selector
        already has its workload name (in this run, or in the file on disk)."""
        stem = f"{self.workload}-{short_hash(format_labels(self.target.selector))}"
        return attrs.evolve(self, workload=stem, name=policy_name(stem))


@attrs.define(slots=True)
class DrainedTotals:
    """What :meth:`Aggregator.drain` moved out, still part of the aggregator's totals: the
    flows, their time window, and the entries to world peers (whether such a peer is a pod
    Hubble could not name is known only at the end, and its finding counts every flow)."""

    flows: int = 0
    first: str = NO_TIME
    last: str = NO_TIME
    world: dict[PolicyTarget, dict[AtomKey, RuleStats]] = attrs.Factory(dict)

    def add(self, target: PolicyTarget, key: AtomKey, stats: RuleStats, cap: int) -> None:
        self._widen(stats.count, stats.first, stats.last)
        if type(key[1]) is CidrPeer:
            self._keep_world(target, key, stats, cap)

    def absorb(self, other: DrainedTotals, cap: int) -> None:
        self._widen(other.flows, other.first, other.last)
        for target, atoms in other.world.items():
            for key, stats in atoms.items():
                self._keep_world(target, key, stats, cap)

    def _widen(self, flows: int, first: str, last: str) -> None:
        self.flows += flows
        if first and (not self.first or first < self.first):
            self.first = first
        self.last = max(self.last, last)

    def _keep_world(self, target: PolicyTarget, key: AtomKey, stats: RuleStats, cap: int) -> None:
        atoms = self.world.setdefault(target, {})
        held = atoms.get(key)
        if held is None:
            atoms[key] = stats.copy()
        else:
            held.absorb(stats, cap)

    def copy(self) -> DrainedTotals:
        copied = DrainedTotals(self.flows, self.first, self.last)
        copied.world = {t: {k: s.copy() for k, s in a.items()} for t, a in self.world.items()}
        return copied


@attrs.frozen(slots=True)
class AggregateState:
    decisions: dict[Decision, int]
    unhandled: dict[Unhandled, int]
    ignored_protocols: dict[str, int]
    ignored_reasons: dict[str, int]
    filtered_namespace: int
    audit_flows: int
    findings: dict[FindingKey, FindingTally]
    atoms: dict[PolicyTarget, dict[AtomKey, RuleStats]]
    drops: dict[int, DropTally]
    unrecognised_reasons: dict[int, int]
    first_seen: str
    last_seen: str
    l7_records: int
    ip_names: dict[str, set[str]]
    pod_ips: set[str] = attrs.Factory(set)
    pod_endpoints: dict[str, Endpoint] = attrs.Factory(dict)
    drained: DrainedTotals = attrs.Factory(DrainedTotals)


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
        self.filtered_namespace = 0
        self.audit_flows = 0
        self.findings: dict[FindingKey, FindingTally] = {}
        self.drops: dict[int, DropTally] = {}
        """Infrastructure, transient and noise drops by reason."""
        self.unrecognised_reasons: Counter[int] = Counter()
        """Drop reason numbers this version does not know (classified as unknown)."""
        self._first = NO_TIME  # time window of flows outside the rule fast path
        self._last = NO_TIME
        self._atoms: dict[PolicyTarget, dict[AtomKey, RuleStats]] = {}
        self._max_samples = self.options.max_samples
        self._l7 = self.options.l7
        self.l7_records = 0
        """Flows with an HTTP or DNS record (seen only with ``l7``)."""
        self.ip_names: dict[str, set[str]] = {}
        """IP -> DNS names learned from the capture (only with ``l7``)."""
        self.pod_ips: set[str] = set()
        self.pod_endpoints: dict[str, Endpoint] = {}
        """IP -> the pod the capture shows with it (labels known), for a world peer Hubble
        gave a pod's IP: the rule names that pod (§D22)."""
        """IPs the capture shows as a pod's (an endpoint with a pod name): a world peer with
        one of them is a pod Hubble could not identify, never a CIDR rule (§D22)."""
        # (direction, source, destination, protocol, port) -> stats of its allow entry, for
        # endpoint and entity peers (a world peer's entry also depends on the flow's IP).
        self._entries: dict[EntryKey, RuleStats] = {}
        # Lines of known entries counted by quick key, folded into _atoms before any read.
        self._pending: dict[QuickKey, PendingCount] = {}
        self._entry_key: Callable[[QuickKey], EntryKey | None] | None = None
        self._parse_line: Callable[[Any], Flow] | None = None
        self._new: set[PolicyTarget] = set()
        """Targets that gained an allow entry since :meth:`take_new_targets` last ran."""
        self._drained = DrainedTotals()
        self._resolver = resolver or Resolver()
        self._explicit = self.options.explicit_cluster
        self._since = self.options.since
        self._until = self.options.until
        self._window = bool(self._since or self._until)
        chosen = self.options.flow_filter
        self._filter = chosen if chosen is not None and not chosen.empty else None
        self._fast = (
            self._filter is None
            and not self.options.decide.ignore_protocols
            and POLICY_DENIED not in self.options.decide.ignore_reasons
        )

    @property
    def atoms(self) -> dict[PolicyTarget, set[Atom]]:
        self._fold()
        return {t: set(atoms) for t, atoms in _as_atoms(self._atoms, self._other_end_ok).items()}

    def attribution(self) -> dict[PolicyTarget, dict[Atom, RuleStats]]:
        self._fold()
        return _as_atoms(self._atoms, self._other_end_ok)

    def _other_end_ok(self, target: PolicyTarget, key: AtomKey) -> bool:
        """Whether an other-end entry is a rule: its target has allow entries of its own in
        that direction (learning never puts a direction into default-deny from the other
        end's view alone), and none for the same peer and port."""
        atoms = self._atoms.get(target) or {}
        plain = key[:4]
        if plain in atoms:
            return False
        way = key[0]
        return any(k[0] == way and not _is_other_end(k) for k in atoms)

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

    @property
    def infra_drops(self) -> int:
        """Infrastructure and transient drops (what --fail-on-infra-drops counts)."""
        return self.decisions[Decision.INFRA] + self.decisions[Decision.TRANSIENT]

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

    def add(self, flow: Flow) -> Decision:
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
        return True

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
            or (decision is Decision.NOT_A_DROP and self.options.decide.learn)
        ):
            return False
        self.decisions[decision] += 1
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
        for endpoint, ip in (
            (flow.source, flow.source_ip),
            (flow.destination, flow.destination_ip),
        ):
            if endpoint.pod_name and ip:
                self.pod_ips.add(ip)
                known = self.pod_endpoints.get(ip)
                if known is endpoint:
                    continue
                # Cheap here, checked in full where used (:meth:`_pod_peer`): a pod with
                # labels that is not the world (an L7 record's world peer names its pod too).
                labels = endpoint.labels
                if not labels or labels[0].startswith("reserved:") or endpoint.identity == 2:
                    continue
                if known is None or endpoint_order(endpoint) < endpoint_order(known):
                    self.pod_endpoints[ip] = endpoint

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
            if namespaces and target.namespace not in namespaces:
                if new:
                    self.filtered_namespace += 1
                return None
            atoms = self._atoms[target] = {}
        stats = atoms.get(atom)
        if stats is None:
            stats = atoms[atom] = RuleStats()
            if new:
                self._new.add(target)  # its other-end entries in that direction join it
        stats.add(flow, cls, self._max_samples)
        return stats

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
            pod_ips=set(self.pod_ips) if copy else self.pod_ips,
            pod_endpoints=dict(self.pod_endpoints) if copy else self.pod_endpoints,
            drained=self._drained.copy() if copy else self._drained,
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
        for ip, names in state.ip_names.items():
            self.ip_names.setdefault(ip, set()).update(names)
        self.pod_ips |= state.pod_ips
        for ip, pod in state.pod_endpoints.items():
            held = self.pod_endpoints.get(ip)
            if held is None or endpoint_order(pod) < endpoint_order(held):
                self.pod_endpoints[ip] = pod
        cap = self._max_samples
        self._drained.absorb(state.drained, cap)
        self._entries.clear()
        for target, atoms in state.atoms.items():
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

    def health(self, *, started: str, ended: str, lost_events: int = 0) -> ClusterHealth:
        """The cluster-health document of what was added so far (times are passed in)."""
        self._fold()
        first, last = self.window()
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
            [*self.findings.values(), *self._pod_findings()],
        )

    def _pods_as_world(
        self, raw: Mapping[PolicyTarget, Mapping[AtomKey, RuleStats]]
    ) -> dict[PolicyTarget, dict[AtomKey, RuleStats]]:
        """Allow entries of ``raw`` to a world peer whose IP the capture ties to a pod."""
        found: dict[PolicyTarget, dict[AtomKey, RuleStats]] = {}
        if not self.pod_ips:
            return found
        for target, atoms in raw.items():
            for key, stats in atoms.items():
                peer = key[1]
                if (
                    stats.count
                    and isinstance(peer, CidrPeer)
                    and peer.cidr.split("/", 1)[0] in self.pod_ips
                ):
                    found.setdefault(target, {})[key] = stats
        return found

    def _world_totals(self) -> Mapping[PolicyTarget, Mapping[AtomKey, RuleStats]]:
        """The entries to world peers with what :meth:`drain` moved out folded back in."""
        if not self._drained.world:
            return self._atoms
        merged = self._drained.copy()
        for target, atoms in self._atoms.items():
            for key, stats in atoms.items():
                if stats.count:
                    merged.add(target, key, stats, self._max_samples)  # keeps world peers
        return merged.world

    def _pod_peer(self, peer: object) -> Peer | None:
        """The pod a world peer's IP belongs to, as a peer, when the capture shows its labels."""
        assert isinstance(peer, CidrPeer)
        endpoint = self.pod_endpoints.get(peer.cidr.split("/", 1)[0])
        if endpoint is None or not is_pod_endpoint(endpoint):
            return None
        named = self._resolver.roles(endpoint).peer
        return named if isinstance(named, EndpointPeer) else None

    def _pod_findings(self) -> list[FindingTally]:
        out = []
        for target, atoms in self._pods_as_world(self._world_totals()).items():
            for key, stats in atoms.items():
                way, peer, protocol, port = key[:4]  # an L7 entry has its request as a fifth
                assert isinstance(peer, CidrPeer)
                if self._pod_peer(peer) is not None:
                    continue  # named by its labels: a rule, not a finding
                ip = peer.cidr.split("/", 1)[0]
                arrow = f"{ip} → {target.namespace}/{target.workload}"
                if way == EGRESS:
                    arrow = f"{target.namespace}/{target.workload} → {ip}"
                subject = f"{arrow} {protocol}/{port}"
                tally = FindingTally(Unhandled.WORLD_IS_POD.value, subject, count=stats.count)
                tally.examples = stats.sample_flows()
                out.append(tally)
        return out

    @property
    def total_flows(self) -> int:
        return sum(self.decisions.values())

    @property
    def candidates(self) -> int:
        return self.decisions[Decision.CANDIDATE]

    def plans(
        self, resolved: Mapping[PolicyTarget, Mapping[Atom, RuleStats]] | None = None
    ) -> list[PolicyPlan]:
        """One plan per target, sorted by namespace then workload. A world peer that is a
        pod's IP is a finding, not a rule (see :meth:`health`). Given what :meth:`resolved`
        made of drained entries, the plans of those alone (reading nothing of this
        aggregator, so flows may keep arriving meanwhile)."""
        if resolved is None:
            self._fold()
        return plan_policies(self.resolved(self._atoms) if resolved is None else resolved)

    def resolved(
        self, raw: Mapping[PolicyTarget, Mapping[AtomKey, RuleStats]]
    ) -> dict[PolicyTarget, dict[Atom, RuleStats]]:
        """The allow entries of ``raw`` (this aggregator's, or what :meth:`drain` moved out)
        as policies hold them: a world peer that is a pod's IP named as that pod (or left
        out: it is a finding), and with L7 a world peer's IP named by the DNS names seen."""
        attribution = _as_atoms(raw, self._other_end_ok)
        cap = self._max_samples
        for target, atoms in self._pods_as_world(raw).items():
            kept = {
                atom: stats
                for atom, stats in attribution[target].items()
                if _key_of(atom) not in atoms
            }
            for key, stats in sorted(atoms.items(), key=_atom_order):
                named = self._pod_peer(key[1])
                if named is None:
                    continue
                atom = Atom(key[0], named, *key[2:])  # the pod, with the entry's L7 request
                same = kept.get(atom)
                if same is None:
                    kept[atom] = stats.copy()
                else:
                    same = kept[atom] = same.copy()
                    same.absorb(stats, cap)
            if kept:
                attribution[target] = kept
            else:
                del attribution[target]
        if self._l7:
            attribution = {t: name_world_peers(a, self.ip_names) for t, a in attribution.items()}
        return attribution

    # --- a capture that writes as it goes ------------------------------------------------------

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


def _as_atoms(
    raw: Mapping[PolicyTarget, Mapping[AtomKey, RuleStats]],
    other_end_ok: Callable[[PolicyTarget, AtomKey], bool],
) -> dict[PolicyTarget, dict[Atom, RuleStats]]:
    """Entries keyed by Atom; entries :meth:`Aggregator.drain` emptied are left out, and an
    other-end entry is its plain rule where ``other_end_ok`` says it is one."""
    out = {}
    for target, atoms in raw.items():
        kept = {}
        for key, stats in atoms.items():
            if not stats.count:
                continue
            if _is_other_end(key):
                if other_end_ok(target, key):
                    kept[Atom(*key[:4])] = stats
                continue
            kept[Atom(*key)] = stats
        if kept:
            out[target] = kept
    return out


def _key_of(atom: Atom) -> AtomKey:
    """The entry key of an Atom (its L7 request as a fifth field when it has one)."""
    key: AtomKey = (atom.direction, atom.peer, atom.protocol, atom.port)
    return (*key, atom.l7) if atom.l7 else key


def _atom_order(item: tuple[AtomKey, RuleStats]) -> tuple[Any, ...]:
    way, peer, protocol, port = item[0][:4]
    return (way, peer_sort_key(peer), protocol, port, item[0][4:])


@attrs.frozen(slots=True)
class HeldBack:
    """An allow entry seen fewer times than ``--min-flows``: not written, but reported."""

    namespace: str
    workload: str
    rule: str
    flows: int


HeldStats = dict[tuple[PolicyTarget, Atom], RuleStats]
"""Allow entries held back so far, with what they were built from."""


def hold_back(
    plans: Iterable[PolicyPlan],
    min_flows: int,
    held: HeldStats | None = None,
    max_samples: int = 10,
) -> tuple[list[PolicyPlan], HeldStats]:
    """The plans without the allow entries seen fewer than ``min_flows`` times, and those
    entries. Entries ``held`` from earlier (a live capture's earlier flushes) join in: an
    entry is written, with all its flows, once it reaches ``min_flows``."""
    held = dict(held or {})
    kept_plans = []
    for plan in plans:
        kept: dict[Atom, RuleStats] = {}
        for atom, stats in plan.attribution.items():
            earlier = held.pop((plan.target, atom), None)
            if earlier is not None:
                stats = stats.copy()
                stats.absorb(earlier, max_samples)
            if stats.count >= min_flows:
                kept[atom] = stats
            else:
                held[(plan.target, atom)] = stats
        if kept:
            kept_plans.append(
                attrs.evolve(plan, rules=tuple(rules_from_atoms(kept)), attribution=kept)
            )
    return kept_plans, held


def held_back(held: HeldStats) -> list[HeldBack]:
    """The report's list of held-back entries, sorted."""
    return sorted(
        (
            HeldBack(
                target.namespace,
                target.workload,
                describe_rule(next(iter(rules_from_atoms([atom])))),
                stats.count,
            )
            for (target, atom), stats in held.items()
        ),
        key=lambda h: (h.namespace, h.workload, h.rule),
    )


def plan_policies(
    atoms: Mapping[PolicyTarget, Collection[Atom] | Mapping[Atom, RuleStats]],
) -> list[PolicyPlan]:
    """Name each target and build its canonical rules. Two selectors that would share a
    workload name in one namespace both get a suffix derived from their labels."""
    by_name: dict[tuple[str, str], list[PolicyTarget]] = {}
    for target in atoms:
        by_name.setdefault((target.namespace, target.workload), []).append(target)
    plans = []
    for (_namespace, workload), targets in by_name.items():
        for target in targets:
            plan = PolicyPlan(
                target=target,
                workload=workload,
                name=policy_name(workload),
                rules=tuple(rules_from_atoms(atoms[target])),
                attribution=_stats_of(atoms[target]),
            )
            plans.append(plan.with_selector_suffix() if len(targets) > 1 else plan)
    plans.sort(key=lambda p: (p.target.namespace, p.workload))
    return plans


def _stats_of(atoms: Collection[Atom] | Mapping[Atom, RuleStats]) -> dict[Atom, RuleStats]:
    return dict(atoms) if isinstance(atoms, Mapping) else {}


KUBE_DNS = EndpointPeer("kube-system", (("k8s-app", "kube-dns"),))


def name_world_peers(
    atoms: Mapping[Atom, RuleStats], ip_names: Mapping[str, Iterable[str]]
) -> dict[Atom, RuleStats]:
    """With L7: an egress world peer whose IP has DNS names becomes ``toFQDNs`` peers, and
    every name a policy reaches by FQDN is allowed on the resolver it uses (the one seen in its
    DNS queries, else kube-dns in kube-system), on UDP and TCP 53."""
    out: dict[Atom, RuleStats] = {}
    for atom, stats in atoms.items():
        peer = atom.peer
        names = (
            sorted(ip_names.get(peer.cidr.split("/", 1)[0], ()))
            if atom.direction == EGRESS and isinstance(peer, CidrPeer) and not atom.l7
            else []
        )
        if not names:
            _merge_into(out, atom, stats)
            continue
        for name in names:
            _merge_into(out, attrs.evolve(atom, peer=FqdnPeer(name)), stats)
    resolvers = {a.peer for a in out if a.l7 and a.l7[0] == DNS} or {KUBE_DNS}
    wanted = {a.peer.name for a in out if isinstance(a.peer, FqdnPeer)}
    wanted |= {a.l7[1] for a in out if a.l7 and a.l7[0] == DNS}
    for resolver in resolvers:
        for name in wanted:
            for port, proto in DNS_PORTS:
                out.setdefault(Atom(EGRESS, resolver, proto, port, (DNS, name)), RuleStats())
    return out


def _merge_into(out: dict[Atom, RuleStats], atom: Atom, stats: RuleStats) -> None:
    found = out.get(atom)
    if found is None:
        out[atom] = stats
    elif found is not stats:
        merged = RuleStats()
        merged.absorb(found, len(found.samples) + len(stats.samples))
        merged.absorb(stats, len(found.samples) + len(stats.samples))
        out[atom] = merged
