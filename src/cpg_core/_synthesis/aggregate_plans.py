"""What the aggregator's entries become: policy plans (world peers named, pods Hubble
called world found), held-back entries, and the findings of the cluster-health document."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from typing import TYPE_CHECKING, Any

import attrs

from cpg_core._base.documents import DeclaredBy
from cpg_core._base.flow import Flow
from cpg_core._base.labels import select_labels
from cpg_core._base.names import policy_name
from cpg_core._base.rules import (
    DNS,
    DNS_PORTS,
    EGRESS,
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
from cpg_core._flows.attribution import RuleStats
from cpg_core._flows.synthesis import PolicyTarget, Resolved, Resolver, Unhandled, is_pod_endpoint
from cpg_core._flows.triage import FindingTally
from cpg_core._synthesis._aggregate_base import AtomKey, PolicyPlan, _is_other_end, rules_of
from cpg_core._synthesis._pods import PodMemory
from cpg_core._synthesis.scope import PLATFORM_WORKLOAD, SYSTEM_NAMESPACE, ScopeReport, declare

if TYPE_CHECKING:
    from cpg_core._flows.identities import IdentityBook


def as_atoms(
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
            if stats.count >= min_flows or not stats.count:  # none: implied, not seen
                kept[atom] = stats
            else:
                held[(plan.target, atom)] = stats
        if kept:
            kept_plans.append(attrs.evolve(plan, rules=tuple(rules_of(kept)), attribution=kept))
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
                rules=tuple(_rules_of(atoms[target])),
                attribution=_stats_of(atoms[target]),
            )
            plans.append(plan.with_selector_suffix() if len(targets) > 1 else plan)
    plans.sort(key=lambda p: (p.target.namespace, p.workload))
    return plans


def with_declared_entries(
    plans: Iterable[PolicyPlan], declared: Iterable[tuple[Flow, tuple[DeclaredBy, ...]]]
) -> list[PolicyPlan]:
    """``plans`` with an entry for each declared dependency (a flow that stands for it, and
    the objects that declare it): no flow counted, the objects named (§D58). What
    ``cpg plan --write-fixes`` writes for the declared dependencies a plan says would
    break."""
    resolver = Resolver()
    attribution = {plan.target: dict(plan.attribution) for plan in plans}
    for flow, objects in declared:
        resolved = resolver.resolve(flow)
        if not isinstance(resolved, Resolved):
            continue
        atoms = attribution.setdefault(resolved.target, {})
        for by in objects:
            declare(atoms, resolved.atom, by)
    return plan_policies(attribution)


def _rules_of(atoms: Collection[Atom] | Mapping[Atom, RuleStats]) -> list[Rule]:
    return rules_of(atoms) if isinstance(atoms, Mapping) else rules_from_atoms(atoms)


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


def dns_pods_known(book: IdentityBook | None) -> list[EndpointPeer]:
    """The pods the identities name as the cluster's DNS (when the capture shows none)."""
    if book is None:
        return []
    found = set()
    for pods in book.pods_at.values():
        for pod in pods:
            selected = select_labels(pod.labels)
            if selected and pod.namespace:
                found.add(EndpointPeer(pod.namespace, selected))
    return sorted(found)


@attrs.frozen(slots=True)
class WorldPods:
    """World peers that are pods Hubble could not identify: the capture's pods by IP, and
    the resolver that names one as a peer by its labels (§D22)."""

    pods: PodMemory
    resolver: Resolver

    def peer(self, peer: object) -> Peer | None:
        """The pod a world peer's IP belongs to, as a peer, when the capture shows its labels."""
        assert isinstance(peer, CidrPeer)
        endpoint = self.pods.endpoint(peer.cidr.split("/", 1)[0])
        if endpoint is None or not is_pod_endpoint(endpoint):
            return None
        named = self.resolver.roles(endpoint).peer
        return named if isinstance(named, EndpointPeer) else None

    def entries(
        self, raw: Mapping[PolicyTarget, Mapping[AtomKey, RuleStats]]
    ) -> dict[PolicyTarget, dict[AtomKey, RuleStats]]:
        """Allow entries of ``raw`` to a world peer whose IP the capture ties to a pod."""
        found: dict[PolicyTarget, dict[AtomKey, RuleStats]] = {}
        if not self.pods:
            return found
        for target, atoms in raw.items():
            for key, stats in atoms.items():
                peer = key[1]
                if (
                    stats.count
                    and isinstance(peer, CidrPeer)
                    and peer.cidr.split("/", 1)[0] in self.pods
                ):
                    found.setdefault(target, {})[key] = stats
        return found

    def findings(
        self, world: Mapping[PolicyTarget, Mapping[AtomKey, RuleStats]]
    ) -> list[FindingTally]:
        """A finding for each entry of ``world`` to a pod the capture cannot name."""
        out = []
        for target, atoms in self.entries(world).items():
            for key, stats in atoms.items():
                way, peer, protocol, port = key[:4]  # an L7 entry has its request as a fifth
                assert isinstance(peer, CidrPeer)
                if self.peer(peer) is not None:
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


def resolve_entries(
    raw: Mapping[PolicyTarget, Mapping[AtomKey, RuleStats]],
    other_end_ok: Callable[[PolicyTarget, AtomKey], bool],
    world_pods: WorldPods,
    ip_names: Mapping[str, Iterable[str]] | None,
    cap: int,
) -> dict[PolicyTarget, dict[Atom, RuleStats]]:
    """The allow entries of ``raw`` as policies hold them: a world peer that is a pod's IP
    named as that pod (or left out: it is a finding), and, given the DNS names seen
    (``ip_names``, with L7), a world peer's IP named by them."""
    attribution = as_atoms(raw, other_end_ok)
    for target, atoms in world_pods.entries(raw).items():
        kept = {
            atom: stats for atom, stats in attribution[target].items() if _key_of(atom) not in atoms
        }
        for key, stats in sorted(atoms.items(), key=_atom_order):
            named = world_pods.peer(key[1])
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
    if ip_names is not None:
        attribution = {t: name_world_peers(a, ip_names) for t, a in attribution.items()}
    return attribution


def system_findings(scope: ScopeReport) -> list[FindingTally]:
    """The system namespaces' workloads whose per-peer rules the plans so far left out
    (§D47): a finding each, so cluster-health.json and the summary name them."""
    return [
        FindingTally(
            SYSTEM_NAMESPACE,
            f"{item.namespace}/{item.workload}: {item.rules} rule(s)",
            count=item.flows,
        )
        for item in scope.system
    ] + [
        FindingTally(
            PLATFORM_WORKLOAD,
            f"{item.namespace}/{item.workload} ({item.name}): {item.rules} rule(s)",
            count=item.flows,
        )
        for item in scope.platform
        if item.treatment == "system"
    ]
