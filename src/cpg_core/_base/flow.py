"""The flow model: only the Hubble fields a policy generator needs, as plain frozen values."""

from __future__ import annotations

import operator
from enum import IntEnum

import attrs


class Verdict(IntEnum):
    VERDICT_UNKNOWN = 0
    FORWARDED = 1
    DROPPED = 2
    ERROR = 3
    AUDIT = 4
    REDIRECTED = 5
    TRACED = 6
    TRANSLATED = 7


class Direction(IntEnum):
    TRAFFIC_DIRECTION_UNKNOWN = 0
    INGRESS = 1
    EGRESS = 2


# L4 protocol names as Hubble spells the ``l4`` oneof keys; "" when the flow has no L4.
TCP = "TCP"
UDP = "UDP"
SCTP = "SCTP"
ICMPV4 = "ICMPv4"
ICMPV6 = "ICMPv6"
VRRP = "VRRP"
IGMP = "IGMP"
L4_PROTOCOLS = (TCP, UDP, ICMPV4, ICMPV6, SCTP, VRRP, IGMP)
PORT_PROTOCOLS = frozenset({TCP, UDP, SCTP})
PROTOCOLS = ("tcp", "udp", "sctp", "icmpv4", "icmpv6")
"""Protocol names ``--ignore-protocol`` (``ignore_protocols``) accepts."""
ICMP_PROTOCOLS = frozenset({ICMPV4, ICMPV6})


@attrs.frozen(slots=True, cache_hash=True, order=True)
class Endpoint:
    """One side of a flow. ``labels`` keep Cilium's ``source:key=value`` strings in flow order."""

    namespace: str = ""
    labels: tuple[str, ...] = ()
    identity: int = 0
    pod_name: str = ""
    cluster_name: str = ""
    workload: str = ""
    """``Kind/name`` of the pod's workload from its owner references, for a pod no stable
    label names (identities given to cpg; Hubble never says)."""

    def __reduce__(self) -> tuple[type[Endpoint], tuple[object, ...]]:
        # Positional and compact: worker processes hand many of these back.
        return (Endpoint, _ENDPOINT_FIELDS(self))


EMPTY_ENDPOINT = Endpoint()
_ENDPOINT_FIELDS = operator.attrgetter(*(a.name for a in attrs.fields(Endpoint)))
"""An endpoint's fields in order, read in one C call (pickling is on the workers' path)."""

EntryKey = tuple[int, Endpoint, Endpoint, str, int]
"""What makes two flows the same allow entry when both ends are endpoints:
(direction, source, destination, protocol, port)."""

_NAMESPACE_LABEL_PREFIX = "k8s:io.kubernetes.pod.namespace="
_CLUSTER_LABEL_PREFIX = "k8s:io.cilium.k8s.policy.cluster="


def endpoint_of(
    namespace: str, labels: tuple[str, ...], identity: int, pod_name: str, cluster_name: str
) -> Endpoint:
    """The endpoint as cpg reads it, whichever decoder saw it: Hubble often gives a remote
    endpoint only its labels, so a missing namespace (or cluster) comes from the
    ``io.kubernetes.pod.namespace`` (``io.cilium.k8s.policy.cluster``) label."""
    if not namespace or not cluster_name:
        for label in labels:
            if not namespace and label.startswith(_NAMESPACE_LABEL_PREFIX):
                namespace = label[len(_NAMESPACE_LABEL_PREFIX) :]
            elif not cluster_name and label.startswith(_CLUSTER_LABEL_PREFIX):
                cluster_name = label[len(_CLUSTER_LABEL_PREFIX) :]
    return Endpoint(namespace, labels, identity, pod_name, cluster_name)


@attrs.frozen(slots=True)
class HTTPInfo:
    method: str = ""
    url: str = ""
    code: int = 0


@attrs.frozen(slots=True)
class DNSInfo:
    query: str = ""
    ips: tuple[str, ...] = ()
    rcode: int = 0


@attrs.frozen(slots=True)
class L7Info:
    """The L7 record of a flow (HTTP or DNS); ``type`` is the L7FlowType name."""

    type: str = ""
    http: HTTPInfo | None = None
    dns: DNSInfo | None = None


@attrs.frozen(slots=True)
class PolicyRef:
    """A policy named by Hubble in ``*_denied_by``."""

    name: str = ""
    namespace: str = ""
    kind: str = ""


@attrs.frozen(slots=True)
class Flow:
    """A Hubble flow reduced to what classification, synthesis and evidence use.

    ``time`` stays the RFC 3339 text Hubble wrote ("" when absent); ``port`` is the
    destination port for TCP/UDP/SCTP and the ICMP type for ICMPv4/ICMPv6.
    ``drop_reason`` is the DropReason number (0 when none was given).
    """

    time: str = ""
    uuid: str = ""
    verdict: int = 0
    drop_reason: int = 0
    direction: int = 0
    source: Endpoint = EMPTY_ENDPOINT
    destination: Endpoint = EMPTY_ENDPOINT
    source_ip: str = ""
    destination_ip: str = ""
    protocol: str = ""
    port: int = 0
    is_reply: bool | None = None
    node_name: str = ""
    source_names: tuple[str, ...] = ()
    destination_names: tuple[str, ...] = ()
    l7: L7Info | None = None
    ingress_denied_by: tuple[PolicyRef, ...] = ()
    egress_denied_by: tuple[PolicyRef, ...] = ()
    drop_reason_text: str = ""
    ingress_allowed_by: tuple[PolicyRef, ...] = ()
    """The policies Hubble says allowed a forwarded flow (ingress side)."""
    egress_allowed_by: tuple[PolicyRef, ...] = ()
    """The drop reason name exactly as given when cpg does not know it (else "")."""
    source_port: int = 0
    """The source port of TCP/UDP/SCTP (0 when absent): with ``tcp_flags``, how a flow that
    Hubble did not mark as a reply is told from a request."""
    tcp_flags: tuple[str, ...] = ()
    """The TCP flags set, sorted (``("ACK", "SYN")``)."""

    def __reduce__(self) -> tuple[type[Flow], tuple[object, ...]]:
        return (Flow, _FLOW_FIELDS(self))


_FLOW_FIELDS = operator.attrgetter(*(a.name for a in attrs.fields(Flow)))


@attrs.frozen(slots=True)
class LostEvents:
    """A ``lost_events`` record: Hubble dropped events before they reached us."""

    count: int = 0
    source: str = ""


@attrs.frozen(slots=True)
class OtherRecord:
    """A valid response that carries no flow (``node_status`` and the like)."""

    kind: str = ""


Record = Flow | LostEvents | OtherRecord
