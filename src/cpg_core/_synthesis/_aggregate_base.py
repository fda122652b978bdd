"""What every part of the aggregator shares: its options, the plans it hands out, what a
drain leaves behind and a worker hands over, and the entries it keeps (ARCHITECTURE §D35)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs

from cpg_core._base.flow import Direction, Verdict
from cpg_core._base.labels import format_labels
from cpg_core._base.names import policy_name, short_hash
from cpg_core._base.rules import Atom, CidrPeer, Rule, rules_from_atoms
from cpg_core._flows.attribution import NO_TIME, RuleStats
from cpg_core._flows.decide import FINDING_DECISIONS, DecideOptions, Decision
from cpg_core._flows.synthesis import PolicyTarget, Unhandled
from cpg_core._flows.triage import DropTally, FindingTally
from cpg_core._synthesis._pods import PodMemory
from cpg_core._synthesis.scope import ClusterScope

if TYPE_CHECKING:  # _filters reads requests, which read this module
    from cpg_core._flows.filters import FlowFilter
    from cpg_core._flows.identities import IdentityBook
    from cpg_core._synthesis.declarations import Declarations


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
_CANDIDATE = Decision.CANDIDATE
_AUDIT = int(Verdict.AUDIT)
_DROPPED = int(Verdict.DROPPED)
_INGRESS = int(Direction.INGRESS)
_EGRESS = int(Direction.EGRESS)


@attrs.frozen(slots=True)
class AggregateOptions:
    """What an aggregation keeps and how it reads flows: the decision options, the
    namespaces, samples, L7, the time window and the flow filter (built from a request)."""

    decide: DecideOptions = attrs.Factory(DecideOptions)
    namespaces: frozenset[str] = frozenset()
    """Policy-target namespaces to keep; empty keeps every namespace."""
    excluded: frozenset[str] = frozenset()
    """Policy-target namespaces never kept (their flows still give the other end rules)."""
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
    identities: IdentityBook | None = None
    """What CiliumEndpoints, CiliumIdentities and pods say of the endpoints Hubble left
    without identity (ARCHITECTURE §D40)."""
    declarations: Declarations | None = None
    """What the cluster's objects declare it depends on (ARCHITECTURE §D58): kept open
    wherever a plan polices one of its ends."""
    scope: ClusterScope = attrs.Factory(ClusterScope)
    """How far the plans reach beyond the capture: cluster services, DNS, system
    namespaces (ARCHITECTURE §D47)."""
    max_policies: int = 0
    """Policy targets kept; the flows of a new one beyond it are counted, not kept (0: no
    cap). A live session's memory is bounded so, whatever a flood of new workloads brings."""
    max_peers: int = 0
    """Allow entries (a peer and a port) kept per policy target, likewise (0: no cap)."""
    max_rules: int = 0
    """Allow entries kept in all, likewise (0: no cap): the caps above multiply, this one
    bounds what they allow together."""


def rules_of(attribution: Mapping[Atom, RuleStats]) -> list[Rule]:
    """The canonical rules of a plan's entries, each saying which cluster objects declare
    it (``Kind ns/name (TCP/9443)``, from the entries' ``declared``: §D58)."""
    rules = rules_from_atoms(attribution)
    said: dict[tuple[str, Any], dict[str, set[str]]] = {}
    for atom, stats in attribution.items():
        for by in stats.declared:
            ports = said.setdefault((atom.direction, atom.peer), {}).setdefault(by.ref, set())
            ports.add(f"{atom.protocol}/{atom.port}")
    if not said:
        return rules
    out = []
    for rule in rules:
        found = said.get((rule.direction, rule.peer))
        if found:
            mine = {f"{proto}/{port}" for port, proto in rule.ports} | (
                {"UDP/53", "TCP/53"} if rule.dns else set()
            )
            words = tuple(
                sorted(
                    f"{ref} ({', '.join(sorted(ports & mine))})"
                    for ref, ports in found.items()
                    if ports & mine
                )
            )
            rule = attrs.evolve(rule, declared=words) if words else rule
        out.append(rule)
    return out


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
    stem: str = ""
    """The file's stem when it is not the workload's name (beside a person's file that holds
    that name: the workload, its evidence and every command keep the workload's name)."""

    @property
    def namespace(self) -> str:
        return self.target.namespace

    @property
    def file_stem(self) -> str:
        return self.stem or self.workload

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
        return attrs.evolve(merged, rules=tuple(rules_of(merged.attribution)))

    def beside_foreign(self, taken: frozenset[str] = frozenset()) -> PolicyPlan:
        """The plan under a file of its own beside a person's policy that holds its path
        (``taken``: the names in that file: the policy never takes a person's name)."""
        stem = f"{self.workload}-cpg"
        return attrs.evolve(
            self, stem=stem, name=policy_name(stem) if self.name in taken else self.name
        )

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
    """Every count an aggregator holds, as one plain value: what forked workers and Dask
    partitions hand back to be folded into one aggregator."""

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
    pods: PodMemory = attrs.Factory(PodMemory)
    drained: DrainedTotals = attrs.Factory(DrainedTotals)
    identities: dict[str, int] = attrs.Factory(dict)
    minutes: dict[str, int] = attrs.Factory(dict)


MINUTES_KEPT = 10_080
"""Minutes of a capture's activity kept (a week, about 1 MiB); past it, hours (§D59): a
session of months stays small."""


def count_minute(minutes: dict[str, int], time: str) -> None:
    """One flow in the minute of ``time`` (its RFC 3339 text's first 16 characters; an hour
    once the capture outgrew :data:`MINUTES_KEPT`)."""
    key = time[:16] if len(minutes) < MINUTES_KEPT else time[:13]
    minutes[key] = minutes.get(key, 0) + 1
