"""Rules that keep working for the traffic the capture did not hold (ARCHITECTURE §D47).

A capture is a sample. Written as the sample shows it, a service every namespace calls (the
cluster's DNS, a metrics endpoint) admits only today's callers, a client of the whole
cluster (a scraper, an ingress controller) reaches only today's pods, and a workload put into
egress default-deny resolves nothing when the sample held no DNS. The next Deployment, or the
next name, then breaks. :func:`for_the_cluster` turns the plans of a capture into plans that
keep the cluster working:

- a server port callers of ``service_namespaces`` namespaces reach (the cluster's DNS always)
  admits the ``cluster`` entity on that port, and a client that reaches that many namespaces
  on one port reaches the ``cluster`` entity there, unless the user named the workload
  (``exact``): the per-peer rules it replaces are folded into it, evidence included;
- every policy with an egress section gets DNS (UDP and TCP 53) to the cluster's DNS service,
  with L7 the visibility rule Cilium documents (``matchPattern: "*"``), so a DNS forwarder
  never gets a name allowlist either; a learned UDP/53 rule gains its TCP/53 twin;
- workloads of the system namespaces get no per-peer rules unless asked (at most the
  cluster-service rules); what was left out is reported.

The knowledge a decision needs (which namespaces ever reached a port, which endpoints serve
DNS) is the whole capture's, not one plan's: :class:`ReachIndex` keeps it as entries are
created, so a live flush that plans a few targets decides as a replay of everything would.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import attrs

from cpg_core._base.documents import DeclaredBy
from cpg_core._base.flow import PORT_PROTOCOLS
from cpg_core._base.labels import format_labels, stable_labels
from cpg_core._base.rules import (
    DNS,
    DNS_PORT,
    EGRESS,
    INGRESS,
    Atom,
    EndpointPeer,
    EntityPeer,
    Peer,
    describe_peer,
    peer_sort_key,
    rules_from_atoms,
)
from cpg_core._flows.attribution import RuleStats
from cpg_core._flows.synthesis import PolicyTarget
from cpg_core._synthesis.catalogue import BUILTIN, Catalogue, PlatformWorkload
from cpg_core._synthesis.declarations import Declarations, is_dns_cache

CLUSTER = EntityPeer("cluster")
"""Every endpoint of the local cluster: its pods, nodes and Cilium's own identities."""
ANY_NAME = "*"
"""The DNS rule that allows every name (``matchPattern: "*"``): Cilium's visibility rule."""
SYSTEM_NAMESPACES = frozenset(
    {"kube-system", "kube-public", "kube-node-lease", "cilium", "cilium-system"}
)
"""Namespaces whose workloads get no per-peer allowlists by default: Kubernetes' own and the
ones Cilium is installed into."""
DEFAULT_SERVICE_NAMESPACES = 5
SYSTEM_NAMESPACE = "system_namespace"
PLATFORM_WORKLOAD = "platform_workload"
"""The finding kind of a platform workload the catalogue recognised, whose per-peer rules
were left out."""
"""The finding kind of a system namespace's workload whose per-peer rules were left out."""
WELL_KNOWN_DNS = EndpointPeer("kube-system", (("k8s-app", "kube-dns"),))
"""The cluster DNS as Cilium's documentation selects it (kube-dns and CoreDNS alike)."""
_DNS_APPS = frozenset({"kube-dns", "coredns", "node-local-dns", "dns-default"})
_DNS_KEYS = ("k8s-app", "app.kubernetes.io/name", "app", "dns.operator.openshift.io/daemonset-dns")
_CALLERS_SHOWN = 5
FOR_CLUSTER = "for_cluster"
"""The evidence class of an entry no flow asked for, written for the cluster (DNS for every
egress policy, the TCP half of DNS): it counts no flow, and says why the rule is there."""


CLUSTER_WHY = (
    "written for the cluster, not asked for by a flow: DNS (UDP and TCP 53) for every policy "
    "with egress rules, or the other protocol of a DNS port"
)


DECLARED = "declared"
"""The evidence class of an entry a cluster object declares (ARCHITECTURE §D58): no flow
asked for it, the object says the cluster depends on it (``RuleStats.declared`` names it)."""


def _added() -> RuleStats:
    return RuleStats(classes={FOR_CLUSTER: 0})


def _declared(by: DeclaredBy) -> RuleStats:
    return RuleStats(classes={DECLARED: 0}, declared=(by,))


def declare(atoms: dict[Atom, RuleStats], atom: Atom, by: DeclaredBy) -> bool:
    """Keep ``atom`` open for ``by``: a new entry, or one that is there already (seen, or
    written for the cluster) now also naming it. True when the entry is new."""
    held = atoms.get(atom)
    if held is None:
        atoms[atom] = _declared(by)
        return True
    if by not in held.declared:
        held = atoms[atom] = held.copy()
        held.declared = tuple(sorted({*held.declared, by}))
        held.classes.setdefault(DECLARED, 0)
    return False


@attrs.frozen(slots=True)
class ClusterScope:
    """How far a capture's rules reach beyond the capture (the user's choices)."""

    service_namespaces: int = DEFAULT_SERVICE_NAMESPACES
    """A server port callers of this many namespaces reach admits the cluster, and a client
    reaching this many namespaces on one port reaches the cluster (0: only the DNS service)."""
    exact: frozenset[str] = frozenset()
    """``namespace/workload`` of the workloads written with exactly today's peers."""
    include_system: bool = False
    """Per-peer rules for workloads of the system namespaces too."""
    dns: bool = True
    """Every policy with egress gets DNS to the cluster's DNS service."""
    enabled: bool = True
    """Off: the plans are the capture's shape, nothing added (``plan --write-fixes``)."""
    catalogue: Catalogue = BUILTIN
    """Platform workloads recognised by their labels, and what is done with each (§D58)."""

    def is_exact(self, target: PolicyTarget) -> bool:
        return f"{target.namespace}/{target.workload}" in self.exact or "*" in self.exact


PortKey = tuple[str, str, int]
"""(direction, protocol, port)."""


class ReachIndex:
    """The pod peers each target ever had per direction, protocol and port, and the pods
    seen serving DNS. Grows as allow entries are created (not per flow)."""

    __slots__ = ("_caches", "_dns", "_peers")

    def __init__(self) -> None:
        self._peers: dict[PolicyTarget, dict[PortKey, set[EndpointPeer]]] = {}
        self._dns: set[EndpointPeer] = set()
        self._caches: set[EndpointPeer] = set()

    def note(self, target: PolicyTarget, key: tuple[object, ...]) -> None:
        """Remember a new allow entry's peer (entry keys: direction, peer, protocol, port…),
        and the node-local DNS caches seen at either end."""
        way, peer, protocol, port = key[0], key[1], key[2], key[3]
        if type(peer) is not EndpointPeer or peer.cluster or protocol not in PORT_PROTOCOLS:
            return
        for seen in (peer, EndpointPeer(target.namespace, target.selector)):
            if seen not in self._caches and is_dns_cache(dict(seen.labels)):
                self._caches.add(seen)
        assert isinstance(way, str) and isinstance(protocol, str) and isinstance(port, int)
        ports = self._peers.setdefault(target, {})
        ports.setdefault((way, protocol, port), set()).add(peer)
        if port == DNS_PORT:
            if way == EGRESS:
                self._dns.add(peer)
            else:
                self._dns.add(EndpointPeer(target.namespace, target.selector))

    def note_all(self, target: PolicyTarget, keys: Iterable[tuple[object, ...]]) -> None:
        for key in keys:
            self.note(target, key)

    def view(self, targets: Iterable[PolicyTarget] | None = None) -> Reach:
        """A copy of what is known of ``targets`` (every target when None), safe to read
        while the index keeps growing."""
        chosen = self._peers if targets is None else {t: self._peers.get(t, {}) for t in targets}
        return Reach(
            {
                target: {key: frozenset(peers) for key, peers in ports.items()}
                for target, ports in chosen.items()
            },
            frozenset(self._dns),
            frozenset(self._caches),
        )


@attrs.frozen(slots=True)
class Reach:
    peers: Mapping[PolicyTarget, Mapping[PortKey, frozenset[EndpointPeer]]]
    dns_servers: frozenset[EndpointPeer]
    dns_caches: frozenset[EndpointPeer] = frozenset()
    """Node-local DNS caches the capture shows (pods a Local Redirect Policy sends every
    pod's DNS queries to): every DNS rule admits them too."""

    def of(self, target: PolicyTarget, key: PortKey) -> frozenset[EndpointPeer]:
        return self.peers.get(target, {}).get(key, frozenset())


@attrs.frozen(slots=True, kw_only=True)
class ClusterService:
    """A port written for the whole cluster instead of today's peers."""

    namespace: str
    workload: str
    direction: str
    ports: tuple[str, ...]
    """``PROTO/port`` it applies to."""
    namespaces: int
    """Distinct namespaces of the peers the capture showed on it."""
    peers: tuple[str, ...]
    """The first peers seen (``namespace/labels``), sorted."""
    more: int
    """Peers seen beyond those shown."""
    dns: bool
    """The cluster's DNS service (always written for the cluster)."""


@attrs.frozen(slots=True, kw_only=True)
class SystemWorkload:
    """A workload of a system namespace whose per-peer rules were not written."""

    namespace: str
    workload: str
    rules: int
    flows: int


@attrs.frozen(slots=True, kw_only=True)
class PlatformSkip:
    """A workload the catalogue recognised, and what was done with it."""

    namespace: str
    workload: str
    name: str
    """The catalogue entry's name (``Istio``)."""
    why: str
    recognised_by: str
    """The labels or namespace that recognised it."""
    treatment: str
    rules: int
    """Per-peer rules not written (``system``), or widened to the cluster."""
    flows: int


@attrs.frozen(slots=True, kw_only=True, order=True)
class DeclaredRule:
    """An allow entry written (or kept) for what a cluster object declares."""

    namespace: str
    workload: str
    direction: str
    traffic: str
    """``TCP/9443 from entity kube-apiserver``."""
    by: str
    """The declaring object (``ValidatingWebhookConfiguration istio-galley``)."""


@attrs.frozen(slots=True, kw_only=True)
class ScopeReport:
    """What :func:`for_the_cluster` did, for the run report."""

    services: tuple[ClusterService, ...] = ()
    system: tuple[SystemWorkload, ...] = ()
    dns_servers: tuple[str, ...] = ()
    """The DNS service every egress policy was given (``namespace/labels``)."""
    dns_added: tuple[str, ...] = ()
    """``namespace/workload`` of the egress policies that got a DNS rule the capture did not
    show."""
    threshold: int = DEFAULT_SERVICE_NAMESPACES
    declared: tuple[DeclaredRule, ...] = ()
    """The entries written for what the cluster's objects declare."""
    platform: tuple[PlatformSkip, ...] = ()
    """The workloads the catalogue recognised."""
    dns_caches: tuple[str, ...] = ()
    """The node-local DNS caches every DNS rule also admits."""

    @property
    def empty(self) -> bool:
        return not (
            self.services or self.system or self.dns_added or self.declared or self.platform
        )

    def joined(self, later: ScopeReport) -> ScopeReport:
        """This report and a later flush's: the later word on each service and workload."""
        services = {(s.namespace, s.workload, s.direction, s.ports): s for s in self.services}
        services.update(
            {(s.namespace, s.workload, s.direction, s.ports): s for s in later.services}
        )
        system = {(s.namespace, s.workload): s for s in self.system}
        for item in later.system:
            known = system.get((item.namespace, item.workload))
            system[(item.namespace, item.workload)] = (
                item
                if known is None
                else attrs.evolve(
                    item, flows=known.flows + item.flows, rules=max(known.rules, item.rules)
                )
            )
        return ScopeReport(
            services=tuple(sorted(services.values(), key=_service_order)),
            system=tuple(sorted(system.values(), key=lambda s: (s.namespace, s.workload))),
            dns_servers=later.dns_servers or self.dns_servers,
            dns_added=tuple(sorted({*self.dns_added, *later.dns_added})),
            threshold=later.threshold,
            declared=tuple(sorted({*self.declared, *later.declared})),
            platform=_joined_platform(self.platform, later.platform),
            dns_caches=later.dns_caches or self.dns_caches,
        )


def _joined_platform(
    earlier: Iterable[PlatformSkip], later: Iterable[PlatformSkip]
) -> tuple[PlatformSkip, ...]:
    found = {(p.namespace, p.workload): p for p in earlier}
    for item in later:
        known = found.get((item.namespace, item.workload))
        found[(item.namespace, item.workload)] = (
            item
            if known is None
            else attrs.evolve(
                item, flows=known.flows + item.flows, rules=max(known.rules, item.rules)
            )
        )
    return tuple(sorted(found.values(), key=lambda p: (p.namespace, p.workload)))


def _service_order(service: ClusterService) -> tuple[str, str, str, tuple[str, ...]]:
    return (service.namespace, service.workload, service.direction, service.ports)


def peer_text(peer: EndpointPeer) -> str:
    return f"{peer.namespace}/{format_labels(peer.labels)}"


def is_dns_service(peer: EndpointPeer, *, serves: bool) -> bool:
    """Whether a pod is the cluster's DNS service (not an application's own resolver): a
    DNS app's labels, or (``serves``: the capture shows it answering port 53) a system
    namespace."""
    labels = dict(peer.labels)
    if any(labels.get(k) in _DNS_APPS for k in _DNS_KEYS):
        return True
    return serves and peer.namespace in SYSTEM_NAMESPACES


def dns_services(reach: Reach, known: Iterable[EndpointPeer] = ()) -> list[EndpointPeer]:
    """The cluster's DNS service: the pods the capture shows serving DNS to the cluster,
    else the DNS pods the identities know (``known``), else Cilium's well-known selector."""
    found = [p for p in reach.dns_servers if is_dns_service(p, serves=True)]
    if not found:
        found = [p for p in known if is_dns_service(p, serves=False)]
    return sorted(set(found)) or [WELL_KNOWN_DNS]


def for_the_cluster(
    attribution: Mapping[PolicyTarget, Mapping[Atom, RuleStats]],
    reach: Reach,
    scope: ClusterScope,
    *,
    l7: bool = False,
    dns_known: Iterable[EndpointPeer] = (),
    max_samples: int = 10,
    declared: Declarations | None = None,
) -> tuple[dict[PolicyTarget, dict[Atom, RuleStats]], ScopeReport]:
    """The allow entries of each target, kept working for the cluster (see the module's
    words), and what was done. A target left with no entry (a system workload) is left out.
    ``declared``: what the cluster's objects declare (§D58), kept open wherever a policy
    polices one of its ends, and its DNS caches beside every DNS rule."""
    if not scope.enabled:
        return {t: dict(a) for t, a in attribution.items()}, ScopeReport()
    servers = dns_services(reach, dns_known) if scope.dns else []
    if scope.dns:
        servers += sorted(reach.dns_caches - set(servers))
    caches = declared.dns_peers() if declared is not None and scope.dns else []
    services: list[ClusterService] = []
    system: list[SystemWorkload] = []
    added: list[str] = []
    kept_open: list[DeclaredRule] = []
    platform: list[PlatformSkip] = []
    out = {}
    for target, entries in attribution.items():
        entry = None
        if _may_recognise(scope, target, entries):
            seen = known_labels(target, entries, declared)
            entry = scope.catalogue.recognise(target.namespace, seen)
        wide = _WIDE.get(entry.treatment, "") if entry is not None else ""
        atoms, kept = _widen(target, entries, reach, scope, servers, services, max_samples, wide)
        system_namespace = target.namespace in SYSTEM_NAMESPACES and not scope.include_system
        if system_namespace or (entry is not None and entry.treatment == "system"):
            policed = set() if system_namespace else policed_today(entries)
            left_out = {a: s for a, s in atoms.items() if a not in kept}
            left_out = {a: s for a, s in left_out.items() if a.direction not in policed}
            if left_out and system_namespace:
                system.append(
                    SystemWorkload(
                        namespace=target.namespace,
                        workload=target.workload,
                        rules=len(rules_from_atoms(left_out)),
                        flows=sum(s.count for s in left_out.values()),
                    )
                )
            elif left_out and entry is not None:
                platform.append(_skipped(target, entry, left_out))
            atoms = {a: s for a, s in atoms.items() if a not in left_out}
        elif entry is not None:
            widened = {a: s for a, s in atoms.items() if a in kept and a.direction == wide}
            platform.append(_skipped(target, entry, widened))
        if declared is not None and atoms:
            kept_open += _keep_declared(target, atoms, declared)
        egress = any(a.direction == EGRESS for a in atoms)
        if servers and egress and _add_dns(target, atoms, servers, l7, caches):
            added.append(f"{target.namespace}/{target.workload}")
        if atoms:
            out[target] = atoms
    report = ScopeReport(
        services=tuple(sorted(services, key=_service_order)),
        system=tuple(sorted(system, key=lambda s: (s.namespace, s.workload))),
        dns_servers=tuple(peer_text(p) for p in servers),
        dns_added=tuple(sorted(added)),
        threshold=scope.service_namespaces,
        declared=tuple(sorted(set(kept_open))),
        platform=tuple(sorted(platform, key=lambda p: (p.namespace, p.workload))),
        dns_caches=tuple(
            dict.fromkeys(
                [*(peer_text(p) for p in servers if p in reach.dns_caches)]
                + [f"{describe_peer(p)} ({by.ref})" for p, by in caches]
            )
        ),
    )
    return out, report


POLICED_CLASSES = frozenset({"policy", "unknown", "audit"})
"""The classes of flows a policy already decided (denied, or let through in audit mode):
their direction is policed today, so its rules fix what is there, they police nothing new."""


def policed_today(entries: Mapping[Atom, RuleStats]) -> set[str]:
    """The directions the capture shows policed today (a drop or an audit there): the
    catalogue leaves a platform workload's rules out only where writing them would police
    it for the first time (learned from traffic that works), never where they fix drops."""
    return {a.direction for a, s in entries.items() if POLICED_CLASSES & s.classes.keys()}


def _may_recognise(
    scope: ClusterScope, target: PolicyTarget, entries: Mapping[Atom, RuleStats]
) -> bool:
    """Whether the catalogue could change ``target``'s entries: a treatment that widens, or
    a direction they would police for the first time (what ``system`` leaves out). A replay
    of drops, whose every direction is policed today, pays nothing for it."""
    catalogue = scope.catalogue
    if not catalogue.entries or scope.is_exact(target):
        return False
    if catalogue.widens:
        return True
    return bool({a.direction for a in entries} - policed_today(entries))


_WIDE = {"cluster-client": EGRESS, "cluster-service": INGRESS}
"""The direction a catalogue treatment writes for the whole cluster."""


def _skipped(
    target: PolicyTarget, entry: PlatformWorkload, atoms: Mapping[Atom, RuleStats]
) -> PlatformSkip:
    return PlatformSkip(
        namespace=target.namespace,
        workload=target.workload,
        name=entry.name,
        why=entry.why,
        recognised_by=entry.text(),
        treatment=entry.treatment,
        rules=len(rules_from_atoms(atoms)),
        flows=sum(s.count for s in atoms.values()),
    )


def known_labels(
    target: PolicyTarget, atoms: Mapping[Atom, RuleStats], declared: Declarations | None
) -> list[dict[str, str]]:
    """The label sets the pods of ``target`` are known to carry: its selector, each pod its
    samples show, and each declared pod or template of its namespace it selects."""
    mine = dict(target.selector)
    found = {tuple(sorted(mine.items()))}
    for atom, stats in atoms.items():
        for flow in stats.sample_flows():
            subject = flow.destination if atom.direction == INGRESS else flow.source
            found.add(tuple(sorted(stable_labels(subject.labels).items())))
    for pod in declared.pods_in(target.namespace) if declared is not None else ():
        labels = pod.label_map
        if all(labels.get(k) == v for k, v in mine.items()):
            found.add(pod.labels)
    return [dict(items) for items in sorted(found)]


def _keep_declared(
    target: PolicyTarget, atoms: dict[Atom, RuleStats], declared: Declarations
) -> list[DeclaredRule]:
    """Each declared dependency one of whose ends is ``target``'s pods, where ``target``'s
    policy polices that direction: the entry that keeps it open (its peer and port exactly
    as the declaring object names them). A policy never gets a direction for it: a pod no
    policy polices in a direction lets the dependency through already."""
    policed = {a.direction for a in atoms}
    if not policed:
        return []
    labels = known_labels(target, atoms, declared)
    out = []
    for dependency in declared.dependencies:
        for way, mine, other in (
            (INGRESS, dependency.destination, dependency.source),
            (EGRESS, dependency.source, dependency.destination),
        ):
            if way not in policed or isinstance(mine, EntityPeer):
                continue
            if not any(mine.selects(target.namespace, pod) for pod in labels):
                continue
            peers: tuple[Peer, ...] = (other,) if isinstance(other, EntityPeer) else other.peers()
            for peer in peers:
                atom = Atom(way, peer, dependency.protocol, dependency.port)
                declare(atoms, atom, dependency.declared_by)
                word = "from" if way == INGRESS else "to"
                out.append(
                    DeclaredRule(
                        namespace=target.namespace,
                        workload=target.workload,
                        direction=way,
                        traffic=f"{dependency.protocol}/{dependency.port} {word} "
                        f"{describe_peer(peer)}",
                        by=dependency.declared_by.ref,
                    )
                )
    return out


def _widen(
    target: PolicyTarget,
    attribution: Mapping[Atom, RuleStats],
    reach: Reach,
    scope: ClusterScope,
    servers: Sequence[EndpointPeer],
    services: list[ClusterService],
    max_samples: int,
    forced: str = "",
) -> tuple[dict[Atom, RuleStats], set[Atom]]:
    """The entries with every port the whole cluster uses written for the cluster (every
    port of direction ``forced``: a catalogue's cluster client or service); and the cluster
    entries (kept even for a system workload)."""
    out = dict(attribution)
    cluster_atoms = {a for a in attribution if a.peer == CLUSTER}
    if scope.is_exact(target):
        return out, cluster_atoms
    groups: dict[PortKey, list[Atom]] = {}
    for atom in attribution:
        peer = atom.peer
        if type(peer) is EndpointPeer and not peer.cluster and atom.protocol in PORT_PROTOCOLS:
            groups.setdefault((atom.direction, atom.protocol, atom.port), []).append(atom)
    me = EndpointPeer(target.namespace, target.selector)
    serves_dns = me in servers
    chosen: dict[tuple[str, tuple[str, ...], bool], set[EndpointPeer]] = {}
    for key, atoms in sorted(groups.items()):
        way, protocol, port = key
        peers = reach.of(target, key) | {a.peer for a in atoms if type(a.peer) is EndpointPeer}
        dns = serves_dns and way == INGRESS and port == DNS_PORT
        many = 0 < scope.service_namespaces <= len({p.namespace for p in peers})
        if not dns and not many and way != forced:
            continue
        merged = RuleStats()
        for atom in atoms:
            merged.absorb(out.pop(atom), max_samples)
        protocols = ("UDP", "TCP") if dns else (protocol,)
        for proto in protocols:
            wide = Atom(way, CLUSTER, proto, port)
            held = out.get(wide)
            if proto != protocol:
                out.setdefault(wide, _added())
            elif held is None:
                out[wide] = merged
            else:
                held = out[wide] = held.copy()
                held.absorb(merged, max_samples)
            cluster_atoms.add(wide)
        ports = tuple(f"{proto}/{port}" for proto in protocols)
        chosen.setdefault((way, ports, dns), set()).update(peers)
    for (way, ports, dns), seen in chosen.items():
        shown = sorted(seen)[:_CALLERS_SHOWN]
        services.append(
            ClusterService(
                namespace=target.namespace,
                workload=target.workload,
                direction=way,
                ports=ports,
                namespaces=len({p.namespace for p in seen}),
                peers=tuple(peer_text(p) for p in shown),
                more=len(seen) - len(shown),
                dns=dns,
            )
        )
    return out, cluster_atoms


def _add_dns(
    target: PolicyTarget,
    atoms: dict[Atom, RuleStats],
    servers: Sequence[EndpointPeer],
    l7: bool,
    caches: Sequence[tuple[Peer, DeclaredBy]] = (),
) -> bool:
    """DNS on UDP and TCP 53 to each DNS service of the cluster's (with L7, every name),
    and the other protocol for every resolver the capture showed (with L7, every name too
    when this workload is itself a DNS service: a forwarder resolves whatever it is asked).
    True when the capture showed this workload no DNS to the cluster's service."""
    me = EndpointPeer(target.namespace, target.selector)
    forwarder = me in servers
    showed = any(a.direction == EGRESS and a.port == DNS_PORT and a.peer in servers for a in atoms)
    resolvers = {
        a.peer
        for a in atoms
        if a.direction == EGRESS and a.port == DNS_PORT and a.protocol in ("UDP", "TCP")
    }
    for peer in sorted({*servers, *resolvers} - {me}, key=peer_sort_key):
        named = any(a.direction == EGRESS and a.peer == peer and a.l7[:1] == (DNS,) for a in atoms)
        detail: tuple[str, ...] = ()
        if l7 and (peer in servers or forwarder):
            detail = (DNS, ANY_NAME)
        elif named:
            continue  # an outside resolver: the names seen stay its allowlist
        for proto in ("UDP", "TCP"):
            atoms.setdefault(Atom(EGRESS, peer, proto, DNS_PORT, detail), _added())
    for peer, by in caches:  # declared node-local caches: every name, as the service's
        if peer == me:
            continue
        detail = (DNS, ANY_NAME) if l7 else ()
        for proto in ("UDP", "TCP"):
            declare(atoms, Atom(EGRESS, peer, proto, DNS_PORT, detail), by)
    return not showed
