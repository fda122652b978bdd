"""From candidate flows to policy targets and rule atoms (ARCHITECTURE §D6–§D11).

The policy target is the destination of an INGRESS flow and the source of an EGRESS flow.
A flow that cannot become a precise rule is never guessed at: it is counted under a reason
(and, for endpoints without stable labels, reported as an ``unselectable`` finding).
"""

from __future__ import annotations

import functools
from enum import StrEnum

import attrs

from cpg_core._base.flow import ICMP_PROTOCOLS, PORT_PROTOCOLS, Direction, Endpoint, Flow
from cpg_core._base.labels import (
    CLUSTER_LABEL,
    LabelItems,
    cluster_problem,
    namespace_problem,
    reserved_names,
    select_labels,
    selector_problem,
    workload_name,
)
from cpg_core._base.rules import (
    EGRESS,
    INGRESS,
    Atom,
    CidrPeer,
    EndpointPeer,
    EntityPeer,
    Peer,
    host_cidr,
)


class Unhandled(StrEnum):
    UNSELECTABLE = "unselectable"
    """The target or peer has no stable label to select it by."""
    NO_NAMESPACE = "no_namespace"
    RESERVED_TARGET = "reserved_target"
    """The target is a node-level identity (host, remote-node…): needs a clusterwide policy."""
    NO_L4 = "no_l4"
    NO_PORT = "no_port"
    """Port 0 would mean "every port" in a CNP: never emitted."""
    UNSUPPORTED_PROTOCOL = "unsupported_protocol"
    UNKNOWN_DIRECTION = "unknown_direction"
    MASKED_DIRECTION = "masked_direction"
    """No direction, and a pod without labels: the capture went through a field mask (a
    Hubble exporter's) that left out traffic_direction and the labels."""
    WORLD_NO_IP = "world_no_ip"
    WORLD_IS_POD = "world_is_pod"
    """Hubble gave a pod the world identity (an L7 record, a stale ipcache): a CIDR rule
    would never select a managed pod, so the traffic is a finding (ARCHITECTURE §D22)."""
    INVALID_LABEL = "invalid_label"
    """A label a selector would need is not valid in Kubernetes: Cilium would reject the
    policy, so the traffic is a finding (ARCHITECTURE §D20)."""


def looks_masked(flow: Flow) -> bool:
    """A pod without a single label: the capture went through a field mask (a Hubble
    exporter's) that left the labels out, and with them, likely, the direction."""
    return any(e.namespace and not e.labels for e in (flow.source, flow.destination))


_RESERVED_IDENTITIES = {
    1: "host",
    2: "world",
    3: "unmanaged",
    4: "health",
    5: "init",
    6: "remote-node",
    7: "kube-apiserver",
    8: "ingress",
    9: "world-ipv4",
    10: "world-ipv6",
}
_ENTITY_NAMES = frozenset(
    {"host", "remote-node", "kube-apiserver", "health", "ingress", "init", "unmanaged"}
)
_WORLD_NAMES = frozenset({"world", "world-ipv4", "world-ipv6"})
_LOCAL_SCOPE_MIN = 1 << 24  # identities of CIDR/FQDN selectors (0x01xxxxxx)
_LOCAL_SCOPE_MAX = (2 << 24) - 1
_CACHE_LIMIT = 16384


@attrs.frozen(slots=True, order=True, cache_hash=True)
class PolicyTarget:
    """The endpoints one policy selects: a namespace and the selected labels."""

    namespace: str
    selector: LabelItems

    @property
    def workload(self) -> str:
        return workload_name(self.selector)


@attrs.frozen(slots=True)
class EndpointKind:
    """What cpg can say about an endpoint, computed once per distinct endpoint."""

    selected: LabelItems
    entity: str  # "" unless a Cilium entity
    world: bool


def endpoint_kind(endpoint: Endpoint) -> EndpointKind:
    """Kept per labels and identity, not per pod (a workload's pods share one, and a pod
    that is gone holds nothing: §D56): the matcher asks for each peer of each flow."""
    return _kind(endpoint.labels, endpoint.identity)


@functools.lru_cache(maxsize=65536)
def _kind(labels: tuple[str, ...], identity: int) -> EndpointKind:
    reserved = reserved_names(labels)
    entity = ""
    world = False
    if "kube-apiserver" in reserved:
        entity = "kube-apiserver"
    else:
        for name in reserved:
            if name in _ENTITY_NAMES:
                entity = name
                break
            if name in _WORLD_NAMES:
                world = True
                break
    if not entity and not world:
        ident = _RESERVED_IDENTITIES.get(identity)
        if ident in _ENTITY_NAMES:
            entity = ident
        elif (
            ident in _WORLD_NAMES
            or _LOCAL_SCOPE_MIN <= identity <= _LOCAL_SCOPE_MAX
            or any(label.startswith(("cidr:", "fqdn:")) for label in labels)
        ):
            world = True
    return EndpointKind(select_labels(labels), entity, world)


@attrs.frozen(slots=True)
class Resolved:
    target: PolicyTarget
    atom: Atom


@attrs.frozen(slots=True)
class Unresolved:
    reason: Unhandled
    subject: str
    """What could not be handled, for people: ``ns/pod (peer)`` and the like."""


@attrs.frozen(slots=True)
class Roles:
    """What one endpoint is as a policy target and as a peer, computed once per endpoint.
    ``peer`` is None for a world peer, whose CIDR comes from each flow's IP."""

    target: PolicyTarget | Unresolved
    peer: Peer | Unresolved | None


def endpoint_name(endpoint: Endpoint) -> str:
    """``ns/workload`` for people: the pod when nothing selects it, or the reserved name."""
    owner = endpoint.workload.partition("/")[2]  # Deployment/web: web
    workload = workload_name(select_labels(endpoint.labels)) or owner or endpoint.pod_name
    if endpoint.namespace:
        return f"{endpoint.namespace}/{workload or '_unknown'}"
    reserved = [label[9:] for label in endpoint.labels if label.startswith("reserved:")]
    if "host" in reserved:
        return "host"  # the node, whatever labels it carries
    return workload or (reserved[0] if reserved else "?")


_CLUSTER_PREFIX = f"k8s:{CLUSTER_LABEL}="


def cluster_of(endpoint: Endpoint) -> str:
    """The endpoint's ClusterMesh cluster ("" when Hubble did not say)."""
    if endpoint.cluster_name:
        return endpoint.cluster_name
    for text in endpoint.labels:
        if text.startswith(_CLUSTER_PREFIX):
            return text[len(_CLUSTER_PREFIX) :]
    return ""


def is_pod_endpoint(endpoint: Endpoint) -> bool:
    """A pod Cilium manages, with labels a selector can use (not the world, not an entity)."""
    if not endpoint.namespace or not endpoint.labels:
        return False
    kind = endpoint_kind(endpoint)
    return not kind.world and not kind.entity


def endpoint_order(endpoint: Endpoint) -> tuple[str, tuple[str, ...], str, str]:
    """A total order of endpoints: which of several pods seen with one IP is taken, whatever
    the order of the capture (a pod replaced by another with its IP)."""
    return (endpoint.namespace, endpoint.labels, endpoint.pod_name, endpoint.cluster_name)


def note_pod(pods: dict[str, Endpoint], endpoint: Endpoint, ip: str) -> None:
    """Remember the pod seen with ``ip`` (the first in :func:`endpoint_order` of several)."""
    if ip and endpoint.pod_name and is_pod_endpoint(endpoint):
        known = pods.get(ip)
        if known is None or endpoint_order(endpoint) < endpoint_order(known):
            pods[ip] = endpoint


def with_known_pod(flow: Flow, pods: dict[str, Endpoint]) -> Flow:
    """``flow`` with a world peer replaced by the pod the capture shows at its IP (Hubble
    gave a pod the world identity: an L7 record, a stale ipcache), else ``flow``."""
    ingress = flow.direction == Direction.INGRESS
    peer, ip = (flow.source, flow.source_ip) if ingress else (flow.destination, flow.destination_ip)
    if flow.direction not in (Direction.INGRESS, Direction.EGRESS) or ip not in pods:
        return flow
    if not endpoint_kind(peer).world:
        return flow
    if ingress:
        return attrs.evolve(flow, source=pods[ip])
    return attrs.evolve(flow, destination=pods[ip])


def mesh_flow(flow: Flow) -> bool:
    """Whether the two ends are known to be in different ClusterMesh clusters."""
    src, dst = flow.source.cluster_name, flow.destination.cluster_name
    return bool(src and dst and src != dst)


def traffic_subject(flow: Flow) -> str:
    """``src → dst PROTO/port``: one kind of traffic, for findings (``cluster/ns/workload``
    when the ends are in different clusters)."""
    proto = flow.protocol or "no-L4"
    port = f"/{flow.port}" if flow.protocol else ""
    src, dst = endpoint_name(flow.source), endpoint_name(flow.destination)
    if mesh_flow(flow):
        src, dst = f"{flow.source.cluster_name}/{src}", f"{flow.destination.cluster_name}/{dst}"
    return f"{src} → {dst} {proto}{port}"


def _who(endpoint: Endpoint, role: str) -> str:
    if endpoint.workload:  # named by its owner: shop/web (Deployment, target)
        kind, _, name = endpoint.workload.partition("/")
        role = f"{kind}, {role}"
    else:
        name = endpoint.pod_name or ",".join(endpoint.labels) or "no labels"
    where = f"{endpoint.namespace}/{name}" if endpoint.namespace else name
    return f"{where} ({role})"


def mesh_peer(
    peer: Peer | Unresolved, target: Endpoint, peer_endpoint: Endpoint, explicit: bool = False
) -> Peer | Unresolved:
    """ClusterMesh: an endpoint peer of another cluster than the target's is selected with
    its cluster named (a selector naming none selects the local cluster only, Cilium 1.19+).
    When either cluster is unknown, the peer is taken to be local. ``explicit`` (Cilium
    before 1.19, where a selector naming none selects every cluster) names a known cluster
    for local peers too."""
    other = bool(target.cluster_name) and peer_endpoint.cluster_name != target.cluster_name
    if type(peer) is EndpointPeer and peer_endpoint.cluster_name and (explicit or other):
        return EndpointPeer(peer.namespace, peer.labels, peer_endpoint.cluster_name)
    return peer


class Resolver:
    """Maps candidate flows to (target, atom). Caches what depends only on an endpoint;
    results are plain values either way."""

    __slots__ = ("_cidrs", "_roles", "_shared")

    def __init__(self) -> None:
        self._roles: dict[Endpoint, Roles] = {}
        self._shared: dict[tuple[str, tuple[str, ...], int, str], Roles] = {}
        """Roles that do not name the pod, by what they depend on: a workload's pods share
        one (§D56)."""
        self._cidrs: dict[str, CidrPeer | None] = {}

    def roles(self, endpoint: Endpoint) -> Roles:
        roles = self._roles.get(endpoint)
        if roles is None:
            if len(self._roles) >= _CACHE_LIMIT:
                self._roles.clear()
            key = (endpoint.namespace, endpoint.labels, endpoint.identity, endpoint.cluster_name)
            roles = self._shared.get(key)
            if roles is None:
                roles = _roles(endpoint)
                if type(roles.target) is not Unresolved and type(roles.peer) is not Unresolved:
                    if len(self._shared) >= _CACHE_LIMIT:
                        self._shared.clear()
                    self._shared[key] = roles
            self._roles[endpoint] = roles
        return roles

    def cidr_peer(self, ip: str) -> CidrPeer | None:
        peer = self._cidrs.get(ip, False)
        if peer is False:
            if len(self._cidrs) >= _CACHE_LIMIT:
                self._cidrs.clear()
            cidr = host_cidr(ip) if ip else None
            peer = self._cidrs[ip] = CidrPeer(cidr) if cidr else None
        return peer  # type: ignore[return-value]

    def _from_ingress_proxy(
        self, way: str, target_ep: Endpoint, peer_ep: Endpoint, protocol: str, port: int
    ) -> Resolved | None:
        """Traffic Cilium's Ingress or Gateway proxy (``reserved:ingress``) sends to a
        backend pod, seen at the proxy's egress: what the backend needs is an ingress rule
        from the ``ingress`` entity (a namespaced policy cannot police the proxy itself)."""
        if way != EGRESS or not _ingress_proxy(target_ep):
            return None
        backend = self.roles(peer_ep).target
        if type(backend) is not PolicyTarget:
            return None
        return Resolved(backend, Atom(INGRESS, EntityPeer("ingress"), protocol, port))

    def resolve(self, flow: Flow, explicit_cluster: bool = False) -> Resolved | Unresolved:
        """The policy target and atom of one candidate flow, or why there is none
        (``explicit_cluster``: see :func:`mesh_peer`)."""
        direction = flow.direction
        if direction == Direction.INGRESS:
            way, target_ep, peer_ep, peer_ip = (
                INGRESS,
                flow.destination,
                flow.source,
                flow.source_ip,
            )
        elif direction == Direction.EGRESS:
            way, target_ep, peer_ep, peer_ip = (
                EGRESS,
                flow.source,
                flow.destination,
                flow.destination_ip,
            )
        else:
            reason = (
                Unhandled.MASKED_DIRECTION if looks_masked(flow) else Unhandled.UNKNOWN_DIRECTION
            )
            return Unresolved(reason, traffic_subject(flow))
        protocol = flow.protocol
        port = flow.port
        if protocol in PORT_PROTOCOLS:
            if port <= 0 or port > 65535:
                return Unresolved(Unhandled.NO_PORT, traffic_subject(flow))
        elif protocol not in ICMP_PROTOCOLS:
            if not protocol:
                return Unresolved(Unhandled.NO_L4, traffic_subject(flow))
            return Unresolved(Unhandled.UNSUPPORTED_PROTOCOL, traffic_subject(flow))
        target = self.roles(target_ep).target
        if type(target) is Unresolved:
            backend = self._from_ingress_proxy(way, target_ep, peer_ep, protocol, port)
            return target if backend is None else backend
        peer = self.roles(peer_ep).peer
        if peer is None:
            peer = self.cidr_peer(peer_ip)
            if peer is None:
                return Unresolved(Unhandled.WORLD_NO_IP, traffic_subject(flow))
        elif type(peer) is Unresolved:
            return peer
        elif explicit_cluster or peer_ep.cluster_name != target_ep.cluster_name:
            peer = mesh_peer(peer, target_ep, peer_ep, explicit_cluster)
        assert isinstance(target, PolicyTarget)
        assert not isinstance(peer, Unresolved)
        return Resolved(target, Atom(way, peer, protocol, port))


def _ingress_proxy(endpoint: Endpoint) -> bool:
    return endpoint_kind(endpoint).entity == "ingress"


def _roles(endpoint: Endpoint) -> Roles:
    kind = endpoint_kind(endpoint)
    target: PolicyTarget | Unresolved
    named = (
        None
        if kind.entity or kind.world or not endpoint.namespace
        else namespace_problem(endpoint.namespace)
        or (cluster_problem(endpoint.cluster_name) if endpoint.cluster_name else None)
    )
    if named is not None:  # a name Kubernetes would refuse: no selector, no file path
        unnamed = Unresolved(Unhandled.INVALID_LABEL, f"{_who(endpoint, 'target')}: {named}")
        as_peer = Unresolved(Unhandled.INVALID_LABEL, f"{_who(endpoint, 'peer')}: {named}")
        return Roles(unnamed, as_peer)
    if kind.entity or kind.world:
        target = Unresolved(Unhandled.RESERVED_TARGET, _who(endpoint, "target"))
    elif not endpoint.namespace:
        target = Unresolved(Unhandled.NO_NAMESPACE, _who(endpoint, "target"))
    elif not kind.selected:
        target = Unresolved(Unhandled.UNSELECTABLE, _who(endpoint, "target"))
    elif (problem := selector_problem(kind.selected)) is not None:
        target = Unresolved(Unhandled.INVALID_LABEL, f"{_who(endpoint, 'target')}: {problem}")
    else:
        target = PolicyTarget(endpoint.namespace, kind.selected)
    peer: Peer | Unresolved | None
    if kind.entity:
        peer = EntityPeer(kind.entity)
    elif kind.world:
        peer = None
    elif endpoint.namespace and kind.selected and (problem := selector_problem(kind.selected)):
        peer = Unresolved(Unhandled.INVALID_LABEL, f"{_who(endpoint, 'peer')}: {problem}")
    elif endpoint.namespace and kind.selected:
        peer = EndpointPeer(endpoint.namespace, kind.selected)
    else:
        peer = Unresolved(Unhandled.UNSELECTABLE, _who(endpoint, "peer"))
    return Roles(target, peer)
