"""From candidate flows to policy targets and rule atoms (DESIGN §3 items 6–11).

The policy target is the destination of an INGRESS flow and the source of an EGRESS flow.
A flow that cannot become a precise rule is never guessed at: it is counted under a reason
(and, for endpoints without stable labels, reported as an ``unselectable`` finding).
"""

from __future__ import annotations

from enum import StrEnum

import attrs

from cpg_core.flow import ICMP_PROTOCOLS, PORT_PROTOCOLS, Direction, Endpoint, Flow
from cpg_core.labels import LabelItems, reserved_names, select_labels, workload_name
from cpg_core.rules import (
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
    WORLD_NO_IP = "world_no_ip"


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


@attrs.frozen(slots=True, order=True)
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
    reserved = reserved_names(endpoint.labels)
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
        ident = _RESERVED_IDENTITIES.get(endpoint.identity)
        if ident in _ENTITY_NAMES:
            entity = ident
        elif (
            ident in _WORLD_NAMES
            or _LOCAL_SCOPE_MIN <= endpoint.identity <= _LOCAL_SCOPE_MAX
            or any(label.startswith(("cidr:", "fqdn:")) for label in endpoint.labels)
        ):
            world = True
    return EndpointKind(select_labels(endpoint.labels), entity, world)


@attrs.frozen(slots=True)
class Resolved:
    target: PolicyTarget
    atom: Atom


@attrs.frozen(slots=True)
class Unresolved:
    reason: Unhandled
    subject: str
    """What could not be handled, for people: ``ns/pod (peer)`` and the like."""


def _who(endpoint: Endpoint, role: str) -> str:
    name = endpoint.pod_name or ",".join(endpoint.labels) or "no labels"
    where = f"{endpoint.namespace}/{name}" if endpoint.namespace else name
    return f"{where} ({role})"


class Resolver:
    """Maps candidate flows to (target, atom). Caches per-endpoint facts; results are values."""

    __slots__ = ("_kinds",)

    def __init__(self) -> None:
        self._kinds: dict[Endpoint, EndpointKind] = {}

    def kind(self, endpoint: Endpoint) -> EndpointKind:
        kind = self._kinds.get(endpoint)
        if kind is None:
            if len(self._kinds) >= 65536:
                self._kinds.clear()
            kind = self._kinds[endpoint] = endpoint_kind(endpoint)
        return kind

    def resolve(self, flow: Flow) -> Resolved | Unresolved:
        if flow.direction == Direction.INGRESS:
            direction, target_ep, peer_ep, peer_ip = (
                INGRESS,
                flow.destination,
                flow.source,
                flow.source_ip,
            )
        elif flow.direction == Direction.EGRESS:
            direction, target_ep, peer_ep, peer_ip = (
                EGRESS,
                flow.source,
                flow.destination,
                flow.destination_ip,
            )
        else:
            return Unresolved(Unhandled.UNKNOWN_DIRECTION, _who(flow.destination, "destination"))

        protocol = flow.protocol
        if protocol in PORT_PROTOCOLS:
            if flow.port <= 0 or flow.port > 65535:
                return Unresolved(Unhandled.NO_PORT, f"{protocol} port {flow.port}")
        elif protocol not in ICMP_PROTOCOLS:
            if not protocol:
                return Unresolved(Unhandled.NO_L4, _who(target_ep, "target"))
            return Unresolved(Unhandled.UNSUPPORTED_PROTOCOL, protocol)

        target_kind = self.kind(target_ep)
        if target_kind.entity or target_kind.world:
            return Unresolved(Unhandled.RESERVED_TARGET, _who(target_ep, "target"))
        if not target_ep.namespace:
            return Unresolved(Unhandled.NO_NAMESPACE, _who(target_ep, "target"))
        if not target_kind.selected:
            return Unresolved(Unhandled.UNSELECTABLE, _who(target_ep, "target"))

        peer_kind = self.kind(peer_ep)
        peer: Peer
        if peer_kind.entity:
            peer = EntityPeer(peer_kind.entity)
        elif peer_kind.world:
            cidr = host_cidr(peer_ip) if peer_ip else None
            if cidr is None:
                return Unresolved(Unhandled.WORLD_NO_IP, _who(peer_ep, "peer"))
            peer = CidrPeer(cidr)
        elif peer_ep.namespace and peer_kind.selected:
            peer = EndpointPeer(peer_ep.namespace, peer_kind.selected)
        else:
            return Unresolved(Unhandled.UNSELECTABLE, _who(peer_ep, "peer"))
        return Resolved(
            PolicyTarget(target_ep.namespace, target_kind.selected),
            Atom(direction, peer, protocol, flow.port),
        )
