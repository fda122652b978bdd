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

from cpg_core.base import (
    DNS,
    DNS_PORT,
    EGRESS,
    INGRESS,
    PORT_PROTOCOLS,
    Atom,
    EndpointPeer,
    EntityPeer,
    format_labels,
    peer_sort_key,
    rules_from_atoms,
)
from cpg_core.flows import PolicyTarget, RuleStats

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


def _added() -> RuleStats:
    return RuleStats(classes={FOR_CLUSTER: 0})


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

    def is_exact(self, target: PolicyTarget) -> bool:
        return f"{target.namespace}/{target.workload}" in self.exact or "*" in self.exact


PortKey = tuple[str, str, int]
"""(direction, protocol, port)."""


class ReachIndex:
    """The pod peers each target ever had per direction, protocol and port, and the pods
    seen serving DNS. Grows as allow entries are created (not per flow)."""

    __slots__ = ("_dns", "_peers")

    def __init__(self) -> None:
        self._peers: dict[PolicyTarget, dict[PortKey, set[EndpointPeer]]] = {}
        self._dns: set[EndpointPeer] = set()

    def note(self, target: PolicyTarget, key: tuple[object, ...]) -> None:
        """Remember a new allow entry's peer (entry keys: direction, peer, protocol, port…)."""
        way, peer, protocol, port = key[0], key[1], key[2], key[3]
        if type(peer) is not EndpointPeer or peer.cluster or protocol not in PORT_PROTOCOLS:
            return
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
        )


@attrs.frozen(slots=True)
class Reach:
    peers: Mapping[PolicyTarget, Mapping[PortKey, frozenset[EndpointPeer]]]
    dns_servers: frozenset[EndpointPeer]

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

    @property
    def empty(self) -> bool:
        return not (self.services or self.system or self.dns_added)

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
        )


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
) -> tuple[dict[PolicyTarget, dict[Atom, RuleStats]], ScopeReport]:
    """The allow entries of each target, kept working for the cluster (see the module's
    words), and what was done. A target left with no entry (a system workload) is left out."""
    if not scope.enabled:
        return {t: dict(a) for t, a in attribution.items()}, ScopeReport()
    servers = dns_services(reach, dns_known) if scope.dns else []
    services: list[ClusterService] = []
    system: list[SystemWorkload] = []
    added: list[str] = []
    out = {}
    for target, entries in attribution.items():
        atoms, kept = _widen(target, entries, reach, scope, servers, services, max_samples)
        if target.namespace in SYSTEM_NAMESPACES and not scope.include_system:
            left_out = {a: s for a, s in atoms.items() if a not in kept}
            if left_out:
                system.append(
                    SystemWorkload(
                        namespace=target.namespace,
                        workload=target.workload,
                        rules=len(rules_from_atoms(left_out)),
                        flows=sum(s.count for s in left_out.values()),
                    )
                )
            atoms = {a: s for a, s in atoms.items() if a in kept}
        egress = any(a.direction == EGRESS for a in atoms)
        if servers and egress and _add_dns(target, atoms, servers, l7):
            added.append(f"{target.namespace}/{target.workload}")
        if atoms:
            out[target] = atoms
    report = ScopeReport(
        services=tuple(sorted(services, key=_service_order)),
        system=tuple(sorted(system, key=lambda s: (s.namespace, s.workload))),
        dns_servers=tuple(peer_text(p) for p in servers),
        dns_added=tuple(sorted(added)),
        threshold=scope.service_namespaces,
    )
    return out, report


def _widen(
    target: PolicyTarget,
    attribution: Mapping[Atom, RuleStats],
    reach: Reach,
    scope: ClusterScope,
    servers: Sequence[EndpointPeer],
    services: list[ClusterService],
    max_samples: int,
) -> tuple[dict[Atom, RuleStats], set[Atom]]:
    """The entries with every port the whole cluster uses written for the cluster; and the
    cluster entries (kept even for a system workload)."""
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
        if not dns and not 0 < scope.service_namespaces <= len({p.namespace for p in peers}):
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
    return not showed
