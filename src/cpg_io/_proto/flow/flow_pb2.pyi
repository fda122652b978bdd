import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf import wrappers_pb2 as _wrappers_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class FlowType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    UNKNOWN_TYPE: _ClassVar[FlowType]
    L3_L4: _ClassVar[FlowType]
    L7: _ClassVar[FlowType]
    SOCK: _ClassVar[FlowType]

class L7FlowType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    UNKNOWN_L7_TYPE: _ClassVar[L7FlowType]
    REQUEST: _ClassVar[L7FlowType]
    RESPONSE: _ClassVar[L7FlowType]
    SAMPLE: _ClassVar[L7FlowType]

class IPVersion(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    IP_NOT_USED: _ClassVar[IPVersion]
    IPv4: _ClassVar[IPVersion]
    IPv6: _ClassVar[IPVersion]

class TrafficDirection(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TRAFFIC_DIRECTION_UNKNOWN: _ClassVar[TrafficDirection]
    INGRESS: _ClassVar[TrafficDirection]
    EGRESS: _ClassVar[TrafficDirection]

class Verdict(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    VERDICT_UNKNOWN: _ClassVar[Verdict]
    FORWARDED: _ClassVar[Verdict]
    DROPPED: _ClassVar[Verdict]
    ERROR: _ClassVar[Verdict]
    AUDIT: _ClassVar[Verdict]
    REDIRECTED: _ClassVar[Verdict]
    TRACED: _ClassVar[Verdict]
    TRANSLATED: _ClassVar[Verdict]

class DropReason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DROP_REASON_UNKNOWN: _ClassVar[DropReason]
    INVALID_SOURCE_MAC: _ClassVar[DropReason]
    INVALID_DESTINATION_MAC: _ClassVar[DropReason]
    INVALID_SOURCE_IP: _ClassVar[DropReason]
    POLICY_DENIED: _ClassVar[DropReason]
    INVALID_PACKET_DROPPED: _ClassVar[DropReason]
    CT_TRUNCATED_OR_INVALID_HEADER: _ClassVar[DropReason]
    CT_MISSING_TCP_ACK_FLAG: _ClassVar[DropReason]
    CT_UNKNOWN_L4_PROTOCOL: _ClassVar[DropReason]
    CT_CANNOT_CREATE_ENTRY_FROM_PACKET: _ClassVar[DropReason]
    UNSUPPORTED_L3_PROTOCOL: _ClassVar[DropReason]
    MISSED_TAIL_CALL: _ClassVar[DropReason]
    ERROR_WRITING_TO_PACKET: _ClassVar[DropReason]
    UNKNOWN_L4_PROTOCOL: _ClassVar[DropReason]
    UNKNOWN_ICMPV4_CODE: _ClassVar[DropReason]
    UNKNOWN_ICMPV4_TYPE: _ClassVar[DropReason]
    UNKNOWN_ICMPV6_CODE: _ClassVar[DropReason]
    UNKNOWN_ICMPV6_TYPE: _ClassVar[DropReason]
    ERROR_RETRIEVING_TUNNEL_KEY: _ClassVar[DropReason]
    ERROR_RETRIEVING_TUNNEL_OPTIONS: _ClassVar[DropReason]
    INVALID_GENEVE_OPTION: _ClassVar[DropReason]
    UNKNOWN_L3_TARGET_ADDRESS: _ClassVar[DropReason]
    STALE_OR_UNROUTABLE_IP: _ClassVar[DropReason]
    NO_MATCHING_LOCAL_CONTAINER_FOUND: _ClassVar[DropReason]
    ERROR_WHILE_CORRECTING_L3_CHECKSUM: _ClassVar[DropReason]
    ERROR_WHILE_CORRECTING_L4_CHECKSUM: _ClassVar[DropReason]
    CT_MAP_INSERTION_FAILED: _ClassVar[DropReason]
    INVALID_IPV6_EXTENSION_HEADER: _ClassVar[DropReason]
    IP_FRAGMENTATION_NOT_SUPPORTED: _ClassVar[DropReason]
    SERVICE_BACKEND_NOT_FOUND: _ClassVar[DropReason]
    NO_TUNNEL_OR_ENCAPSULATION_ENDPOINT: _ClassVar[DropReason]
    FAILED_TO_INSERT_INTO_PROXYMAP: _ClassVar[DropReason]
    REACHED_EDT_RATE_LIMITING_DROP_HORIZON: _ClassVar[DropReason]
    UNKNOWN_CONNECTION_TRACKING_STATE: _ClassVar[DropReason]
    LOCAL_HOST_IS_UNREACHABLE: _ClassVar[DropReason]
    NO_CONFIGURATION_AVAILABLE_TO_PERFORM_POLICY_DECISION: _ClassVar[DropReason]
    UNSUPPORTED_L2_PROTOCOL: _ClassVar[DropReason]
    NO_MAPPING_FOR_NAT_MASQUERADE: _ClassVar[DropReason]
    UNSUPPORTED_PROTOCOL_FOR_NAT_MASQUERADE: _ClassVar[DropReason]
    FIB_LOOKUP_FAILED: _ClassVar[DropReason]
    ENCAPSULATION_TRAFFIC_IS_PROHIBITED: _ClassVar[DropReason]
    INVALID_IDENTITY: _ClassVar[DropReason]
    UNKNOWN_SENDER: _ClassVar[DropReason]
    NAT_NOT_NEEDED: _ClassVar[DropReason]
    IS_A_CLUSTERIP: _ClassVar[DropReason]
    FIRST_LOGICAL_DATAGRAM_FRAGMENT_NOT_FOUND: _ClassVar[DropReason]
    FORBIDDEN_ICMPV6_MESSAGE: _ClassVar[DropReason]
    DENIED_BY_LB_SRC_RANGE_CHECK: _ClassVar[DropReason]
    SOCKET_LOOKUP_FAILED: _ClassVar[DropReason]
    SOCKET_ASSIGN_FAILED: _ClassVar[DropReason]
    PROXY_REDIRECTION_NOT_SUPPORTED_FOR_PROTOCOL: _ClassVar[DropReason]
    POLICY_DENY: _ClassVar[DropReason]
    VLAN_FILTERED: _ClassVar[DropReason]
    INVALID_VNI: _ClassVar[DropReason]
    INVALID_TC_BUFFER: _ClassVar[DropReason]
    NO_SID: _ClassVar[DropReason]
    MISSING_SRV6_STATE: _ClassVar[DropReason]
    NAT46: _ClassVar[DropReason]
    NAT64: _ClassVar[DropReason]
    AUTH_REQUIRED: _ClassVar[DropReason]
    CT_NO_MAP_FOUND: _ClassVar[DropReason]
    SNAT_NO_MAP_FOUND: _ClassVar[DropReason]
    INVALID_CLUSTER_ID: _ClassVar[DropReason]
    UNSUPPORTED_PROTOCOL_FOR_DSR_ENCAP: _ClassVar[DropReason]
    NO_EGRESS_GATEWAY: _ClassVar[DropReason]
    UNENCRYPTED_TRAFFIC: _ClassVar[DropReason]
    TTL_EXCEEDED: _ClassVar[DropReason]
    NO_NODE_ID: _ClassVar[DropReason]
    DROP_RATE_LIMITED: _ClassVar[DropReason]
    IGMP_HANDLED: _ClassVar[DropReason]
    IGMP_SUBSCRIBED: _ClassVar[DropReason]
    MULTICAST_HANDLED: _ClassVar[DropReason]
    DROP_HOST_NOT_READY: _ClassVar[DropReason]
    DROP_EP_NOT_READY: _ClassVar[DropReason]
    DROP_NO_EGRESS_IP: _ClassVar[DropReason]
    DROP_PUNT_PROXY: _ClassVar[DropReason]

class LostEventSource(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    UNKNOWN_LOST_EVENT_SOURCE: _ClassVar[LostEventSource]
    PERF_EVENT_RING_BUFFER: _ClassVar[LostEventSource]
    OBSERVER_EVENTS_QUEUE: _ClassVar[LostEventSource]
    HUBBLE_RING_BUFFER: _ClassVar[LostEventSource]
UNKNOWN_TYPE: FlowType
L3_L4: FlowType
L7: FlowType
SOCK: FlowType
UNKNOWN_L7_TYPE: L7FlowType
REQUEST: L7FlowType
RESPONSE: L7FlowType
SAMPLE: L7FlowType
IP_NOT_USED: IPVersion
IPv4: IPVersion
IPv6: IPVersion
TRAFFIC_DIRECTION_UNKNOWN: TrafficDirection
INGRESS: TrafficDirection
EGRESS: TrafficDirection
VERDICT_UNKNOWN: Verdict
FORWARDED: Verdict
DROPPED: Verdict
ERROR: Verdict
AUDIT: Verdict
REDIRECTED: Verdict
TRACED: Verdict
TRANSLATED: Verdict
DROP_REASON_UNKNOWN: DropReason
INVALID_SOURCE_MAC: DropReason
INVALID_DESTINATION_MAC: DropReason
INVALID_SOURCE_IP: DropReason
POLICY_DENIED: DropReason
INVALID_PACKET_DROPPED: DropReason
CT_TRUNCATED_OR_INVALID_HEADER: DropReason
CT_MISSING_TCP_ACK_FLAG: DropReason
CT_UNKNOWN_L4_PROTOCOL: DropReason
CT_CANNOT_CREATE_ENTRY_FROM_PACKET: DropReason
UNSUPPORTED_L3_PROTOCOL: DropReason
MISSED_TAIL_CALL: DropReason
ERROR_WRITING_TO_PACKET: DropReason
UNKNOWN_L4_PROTOCOL: DropReason
UNKNOWN_ICMPV4_CODE: DropReason
UNKNOWN_ICMPV4_TYPE: DropReason
UNKNOWN_ICMPV6_CODE: DropReason
UNKNOWN_ICMPV6_TYPE: DropReason
ERROR_RETRIEVING_TUNNEL_KEY: DropReason
ERROR_RETRIEVING_TUNNEL_OPTIONS: DropReason
INVALID_GENEVE_OPTION: DropReason
UNKNOWN_L3_TARGET_ADDRESS: DropReason
STALE_OR_UNROUTABLE_IP: DropReason
NO_MATCHING_LOCAL_CONTAINER_FOUND: DropReason
ERROR_WHILE_CORRECTING_L3_CHECKSUM: DropReason
ERROR_WHILE_CORRECTING_L4_CHECKSUM: DropReason
CT_MAP_INSERTION_FAILED: DropReason
INVALID_IPV6_EXTENSION_HEADER: DropReason
IP_FRAGMENTATION_NOT_SUPPORTED: DropReason
SERVICE_BACKEND_NOT_FOUND: DropReason
NO_TUNNEL_OR_ENCAPSULATION_ENDPOINT: DropReason
FAILED_TO_INSERT_INTO_PROXYMAP: DropReason
REACHED_EDT_RATE_LIMITING_DROP_HORIZON: DropReason
UNKNOWN_CONNECTION_TRACKING_STATE: DropReason
LOCAL_HOST_IS_UNREACHABLE: DropReason
NO_CONFIGURATION_AVAILABLE_TO_PERFORM_POLICY_DECISION: DropReason
UNSUPPORTED_L2_PROTOCOL: DropReason
NO_MAPPING_FOR_NAT_MASQUERADE: DropReason
UNSUPPORTED_PROTOCOL_FOR_NAT_MASQUERADE: DropReason
FIB_LOOKUP_FAILED: DropReason
ENCAPSULATION_TRAFFIC_IS_PROHIBITED: DropReason
INVALID_IDENTITY: DropReason
UNKNOWN_SENDER: DropReason
NAT_NOT_NEEDED: DropReason
IS_A_CLUSTERIP: DropReason
FIRST_LOGICAL_DATAGRAM_FRAGMENT_NOT_FOUND: DropReason
FORBIDDEN_ICMPV6_MESSAGE: DropReason
DENIED_BY_LB_SRC_RANGE_CHECK: DropReason
SOCKET_LOOKUP_FAILED: DropReason
SOCKET_ASSIGN_FAILED: DropReason
PROXY_REDIRECTION_NOT_SUPPORTED_FOR_PROTOCOL: DropReason
POLICY_DENY: DropReason
VLAN_FILTERED: DropReason
INVALID_VNI: DropReason
INVALID_TC_BUFFER: DropReason
NO_SID: DropReason
MISSING_SRV6_STATE: DropReason
NAT46: DropReason
NAT64: DropReason
AUTH_REQUIRED: DropReason
CT_NO_MAP_FOUND: DropReason
SNAT_NO_MAP_FOUND: DropReason
INVALID_CLUSTER_ID: DropReason
UNSUPPORTED_PROTOCOL_FOR_DSR_ENCAP: DropReason
NO_EGRESS_GATEWAY: DropReason
UNENCRYPTED_TRAFFIC: DropReason
TTL_EXCEEDED: DropReason
NO_NODE_ID: DropReason
DROP_RATE_LIMITED: DropReason
IGMP_HANDLED: DropReason
IGMP_SUBSCRIBED: DropReason
MULTICAST_HANDLED: DropReason
DROP_HOST_NOT_READY: DropReason
DROP_EP_NOT_READY: DropReason
DROP_NO_EGRESS_IP: DropReason
DROP_PUNT_PROXY: DropReason
UNKNOWN_LOST_EVENT_SOURCE: LostEventSource
PERF_EVENT_RING_BUFFER: LostEventSource
OBSERVER_EVENTS_QUEUE: LostEventSource
HUBBLE_RING_BUFFER: LostEventSource

class Flow(_message.Message):
    __slots__ = ("time", "uuid", "verdict", "drop_reason", "IP", "l4", "source", "destination", "Type", "node_name", "source_names", "destination_names", "l7", "reply", "event_type", "traffic_direction", "drop_reason_desc", "is_reply", "egress_allowed_by", "ingress_allowed_by", "egress_denied_by", "ingress_denied_by")
    TIME_FIELD_NUMBER: _ClassVar[int]
    UUID_FIELD_NUMBER: _ClassVar[int]
    VERDICT_FIELD_NUMBER: _ClassVar[int]
    DROP_REASON_FIELD_NUMBER: _ClassVar[int]
    IP_FIELD_NUMBER: _ClassVar[int]
    L4_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    DESTINATION_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    NODE_NAME_FIELD_NUMBER: _ClassVar[int]
    SOURCE_NAMES_FIELD_NUMBER: _ClassVar[int]
    DESTINATION_NAMES_FIELD_NUMBER: _ClassVar[int]
    L7_FIELD_NUMBER: _ClassVar[int]
    REPLY_FIELD_NUMBER: _ClassVar[int]
    EVENT_TYPE_FIELD_NUMBER: _ClassVar[int]
    TRAFFIC_DIRECTION_FIELD_NUMBER: _ClassVar[int]
    DROP_REASON_DESC_FIELD_NUMBER: _ClassVar[int]
    IS_REPLY_FIELD_NUMBER: _ClassVar[int]
    EGRESS_ALLOWED_BY_FIELD_NUMBER: _ClassVar[int]
    INGRESS_ALLOWED_BY_FIELD_NUMBER: _ClassVar[int]
    EGRESS_DENIED_BY_FIELD_NUMBER: _ClassVar[int]
    INGRESS_DENIED_BY_FIELD_NUMBER: _ClassVar[int]
    time: _timestamp_pb2.Timestamp
    uuid: str
    verdict: Verdict
    drop_reason: int
    IP: IP
    l4: Layer4
    source: Endpoint
    destination: Endpoint
    Type: FlowType
    node_name: str
    source_names: _containers.RepeatedScalarFieldContainer[str]
    destination_names: _containers.RepeatedScalarFieldContainer[str]
    l7: Layer7
    reply: bool
    event_type: CiliumEventType
    traffic_direction: TrafficDirection
    drop_reason_desc: DropReason
    is_reply: _wrappers_pb2.BoolValue
    egress_allowed_by: _containers.RepeatedCompositeFieldContainer[Policy]
    ingress_allowed_by: _containers.RepeatedCompositeFieldContainer[Policy]
    egress_denied_by: _containers.RepeatedCompositeFieldContainer[Policy]
    ingress_denied_by: _containers.RepeatedCompositeFieldContainer[Policy]
    def __init__(self, time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., uuid: _Optional[str] = ..., verdict: _Optional[_Union[Verdict, str]] = ..., drop_reason: _Optional[int] = ..., IP: _Optional[_Union[IP, _Mapping]] = ..., l4: _Optional[_Union[Layer4, _Mapping]] = ..., source: _Optional[_Union[Endpoint, _Mapping]] = ..., destination: _Optional[_Union[Endpoint, _Mapping]] = ..., Type: _Optional[_Union[FlowType, str]] = ..., node_name: _Optional[str] = ..., source_names: _Optional[_Iterable[str]] = ..., destination_names: _Optional[_Iterable[str]] = ..., l7: _Optional[_Union[Layer7, _Mapping]] = ..., reply: _Optional[bool] = ..., event_type: _Optional[_Union[CiliumEventType, _Mapping]] = ..., traffic_direction: _Optional[_Union[TrafficDirection, str]] = ..., drop_reason_desc: _Optional[_Union[DropReason, str]] = ..., is_reply: _Optional[_Union[_wrappers_pb2.BoolValue, _Mapping]] = ..., egress_allowed_by: _Optional[_Iterable[_Union[Policy, _Mapping]]] = ..., ingress_allowed_by: _Optional[_Iterable[_Union[Policy, _Mapping]]] = ..., egress_denied_by: _Optional[_Iterable[_Union[Policy, _Mapping]]] = ..., ingress_denied_by: _Optional[_Iterable[_Union[Policy, _Mapping]]] = ...) -> None: ...

class Layer4(_message.Message):
    __slots__ = ("TCP", "UDP", "ICMPv4", "ICMPv6", "SCTP", "VRRP", "IGMP")
    TCP_FIELD_NUMBER: _ClassVar[int]
    UDP_FIELD_NUMBER: _ClassVar[int]
    ICMPV4_FIELD_NUMBER: _ClassVar[int]
    ICMPV6_FIELD_NUMBER: _ClassVar[int]
    SCTP_FIELD_NUMBER: _ClassVar[int]
    VRRP_FIELD_NUMBER: _ClassVar[int]
    IGMP_FIELD_NUMBER: _ClassVar[int]
    TCP: TCP
    UDP: UDP
    ICMPv4: ICMPv4
    ICMPv6: ICMPv6
    SCTP: SCTP
    VRRP: VRRP
    IGMP: IGMP
    def __init__(self, TCP: _Optional[_Union[TCP, _Mapping]] = ..., UDP: _Optional[_Union[UDP, _Mapping]] = ..., ICMPv4: _Optional[_Union[ICMPv4, _Mapping]] = ..., ICMPv6: _Optional[_Union[ICMPv6, _Mapping]] = ..., SCTP: _Optional[_Union[SCTP, _Mapping]] = ..., VRRP: _Optional[_Union[VRRP, _Mapping]] = ..., IGMP: _Optional[_Union[IGMP, _Mapping]] = ...) -> None: ...

class Layer7(_message.Message):
    __slots__ = ("type", "latency_ns", "dns", "http")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    LATENCY_NS_FIELD_NUMBER: _ClassVar[int]
    DNS_FIELD_NUMBER: _ClassVar[int]
    HTTP_FIELD_NUMBER: _ClassVar[int]
    type: L7FlowType
    latency_ns: int
    dns: DNS
    http: HTTP
    def __init__(self, type: _Optional[_Union[L7FlowType, str]] = ..., latency_ns: _Optional[int] = ..., dns: _Optional[_Union[DNS, _Mapping]] = ..., http: _Optional[_Union[HTTP, _Mapping]] = ...) -> None: ...

class Endpoint(_message.Message):
    __slots__ = ("ID", "identity", "cluster_name", "namespace", "labels", "pod_name")
    ID_FIELD_NUMBER: _ClassVar[int]
    IDENTITY_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_NAME_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    POD_NAME_FIELD_NUMBER: _ClassVar[int]
    ID: int
    identity: int
    cluster_name: str
    namespace: str
    labels: _containers.RepeatedScalarFieldContainer[str]
    pod_name: str
    def __init__(self, ID: _Optional[int] = ..., identity: _Optional[int] = ..., cluster_name: _Optional[str] = ..., namespace: _Optional[str] = ..., labels: _Optional[_Iterable[str]] = ..., pod_name: _Optional[str] = ...) -> None: ...

class TCP(_message.Message):
    __slots__ = ("source_port", "destination_port", "flags")
    SOURCE_PORT_FIELD_NUMBER: _ClassVar[int]
    DESTINATION_PORT_FIELD_NUMBER: _ClassVar[int]
    FLAGS_FIELD_NUMBER: _ClassVar[int]
    source_port: int
    destination_port: int
    flags: TCPFlags
    def __init__(self, source_port: _Optional[int] = ..., destination_port: _Optional[int] = ..., flags: _Optional[_Union[TCPFlags, _Mapping]] = ...) -> None: ...

class TCPFlags(_message.Message):
    __slots__ = ("FIN", "SYN", "RST", "PSH", "ACK", "URG", "ECE", "CWR", "NS")
    FIN_FIELD_NUMBER: _ClassVar[int]
    SYN_FIELD_NUMBER: _ClassVar[int]
    RST_FIELD_NUMBER: _ClassVar[int]
    PSH_FIELD_NUMBER: _ClassVar[int]
    ACK_FIELD_NUMBER: _ClassVar[int]
    URG_FIELD_NUMBER: _ClassVar[int]
    ECE_FIELD_NUMBER: _ClassVar[int]
    CWR_FIELD_NUMBER: _ClassVar[int]
    NS_FIELD_NUMBER: _ClassVar[int]
    FIN: bool
    SYN: bool
    RST: bool
    PSH: bool
    ACK: bool
    URG: bool
    ECE: bool
    CWR: bool
    NS: bool
    def __init__(self, FIN: _Optional[bool] = ..., SYN: _Optional[bool] = ..., RST: _Optional[bool] = ..., PSH: _Optional[bool] = ..., ACK: _Optional[bool] = ..., URG: _Optional[bool] = ..., ECE: _Optional[bool] = ..., CWR: _Optional[bool] = ..., NS: _Optional[bool] = ...) -> None: ...

class IP(_message.Message):
    __slots__ = ("source", "destination", "ipVersion")
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    DESTINATION_FIELD_NUMBER: _ClassVar[int]
    IPVERSION_FIELD_NUMBER: _ClassVar[int]
    source: str
    destination: str
    ipVersion: IPVersion
    def __init__(self, source: _Optional[str] = ..., destination: _Optional[str] = ..., ipVersion: _Optional[_Union[IPVersion, str]] = ...) -> None: ...

class UDP(_message.Message):
    __slots__ = ("source_port", "destination_port")
    SOURCE_PORT_FIELD_NUMBER: _ClassVar[int]
    DESTINATION_PORT_FIELD_NUMBER: _ClassVar[int]
    source_port: int
    destination_port: int
    def __init__(self, source_port: _Optional[int] = ..., destination_port: _Optional[int] = ...) -> None: ...

class SCTP(_message.Message):
    __slots__ = ("source_port", "destination_port")
    SOURCE_PORT_FIELD_NUMBER: _ClassVar[int]
    DESTINATION_PORT_FIELD_NUMBER: _ClassVar[int]
    source_port: int
    destination_port: int
    def __init__(self, source_port: _Optional[int] = ..., destination_port: _Optional[int] = ...) -> None: ...

class ICMPv4(_message.Message):
    __slots__ = ("type", "code")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    type: int
    code: int
    def __init__(self, type: _Optional[int] = ..., code: _Optional[int] = ...) -> None: ...

class ICMPv6(_message.Message):
    __slots__ = ("type", "code")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    type: int
    code: int
    def __init__(self, type: _Optional[int] = ..., code: _Optional[int] = ...) -> None: ...

class VRRP(_message.Message):
    __slots__ = ("type", "vrid", "priority")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    VRID_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    type: int
    vrid: int
    priority: int
    def __init__(self, type: _Optional[int] = ..., vrid: _Optional[int] = ..., priority: _Optional[int] = ...) -> None: ...

class IGMP(_message.Message):
    __slots__ = ("type", "group_address")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    GROUP_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    type: int
    group_address: str
    def __init__(self, type: _Optional[int] = ..., group_address: _Optional[str] = ...) -> None: ...

class Policy(_message.Message):
    __slots__ = ("name", "namespace", "labels", "revision", "kind")
    NAME_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    name: str
    namespace: str
    labels: _containers.RepeatedScalarFieldContainer[str]
    revision: int
    kind: str
    def __init__(self, name: _Optional[str] = ..., namespace: _Optional[str] = ..., labels: _Optional[_Iterable[str]] = ..., revision: _Optional[int] = ..., kind: _Optional[str] = ...) -> None: ...

class CiliumEventType(_message.Message):
    __slots__ = ("type", "sub_type")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    SUB_TYPE_FIELD_NUMBER: _ClassVar[int]
    type: int
    sub_type: int
    def __init__(self, type: _Optional[int] = ..., sub_type: _Optional[int] = ...) -> None: ...

class FlowFilter(_message.Message):
    __slots__ = ("source_pod", "destination_pod", "verdict", "drop_reason_desc")
    SOURCE_POD_FIELD_NUMBER: _ClassVar[int]
    DESTINATION_POD_FIELD_NUMBER: _ClassVar[int]
    VERDICT_FIELD_NUMBER: _ClassVar[int]
    DROP_REASON_DESC_FIELD_NUMBER: _ClassVar[int]
    source_pod: _containers.RepeatedScalarFieldContainer[str]
    destination_pod: _containers.RepeatedScalarFieldContainer[str]
    verdict: _containers.RepeatedScalarFieldContainer[Verdict]
    drop_reason_desc: _containers.RepeatedScalarFieldContainer[DropReason]
    def __init__(self, source_pod: _Optional[_Iterable[str]] = ..., destination_pod: _Optional[_Iterable[str]] = ..., verdict: _Optional[_Iterable[_Union[Verdict, str]]] = ..., drop_reason_desc: _Optional[_Iterable[_Union[DropReason, str]]] = ...) -> None: ...

class DNS(_message.Message):
    __slots__ = ("query", "ips", "ttl", "cnames", "observation_source", "rcode", "qtypes", "rrtypes")
    QUERY_FIELD_NUMBER: _ClassVar[int]
    IPS_FIELD_NUMBER: _ClassVar[int]
    TTL_FIELD_NUMBER: _ClassVar[int]
    CNAMES_FIELD_NUMBER: _ClassVar[int]
    OBSERVATION_SOURCE_FIELD_NUMBER: _ClassVar[int]
    RCODE_FIELD_NUMBER: _ClassVar[int]
    QTYPES_FIELD_NUMBER: _ClassVar[int]
    RRTYPES_FIELD_NUMBER: _ClassVar[int]
    query: str
    ips: _containers.RepeatedScalarFieldContainer[str]
    ttl: int
    cnames: _containers.RepeatedScalarFieldContainer[str]
    observation_source: str
    rcode: int
    qtypes: _containers.RepeatedScalarFieldContainer[str]
    rrtypes: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, query: _Optional[str] = ..., ips: _Optional[_Iterable[str]] = ..., ttl: _Optional[int] = ..., cnames: _Optional[_Iterable[str]] = ..., observation_source: _Optional[str] = ..., rcode: _Optional[int] = ..., qtypes: _Optional[_Iterable[str]] = ..., rrtypes: _Optional[_Iterable[str]] = ...) -> None: ...

class HTTP(_message.Message):
    __slots__ = ("code", "method", "url", "protocol")
    CODE_FIELD_NUMBER: _ClassVar[int]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    code: int
    method: str
    url: str
    protocol: str
    def __init__(self, code: _Optional[int] = ..., method: _Optional[str] = ..., url: _Optional[str] = ..., protocol: _Optional[str] = ...) -> None: ...

class LostEvent(_message.Message):
    __slots__ = ("source", "num_events_lost", "cpu")
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    NUM_EVENTS_LOST_FIELD_NUMBER: _ClassVar[int]
    CPU_FIELD_NUMBER: _ClassVar[int]
    source: LostEventSource
    num_events_lost: int
    cpu: _wrappers_pb2.Int32Value
    def __init__(self, source: _Optional[_Union[LostEventSource, str]] = ..., num_events_lost: _Optional[int] = ..., cpu: _Optional[_Union[_wrappers_pb2.Int32Value, _Mapping]] = ...) -> None: ...
