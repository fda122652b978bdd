import datetime

from google.protobuf import field_mask_pb2 as _field_mask_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf import wrappers_pb2 as _wrappers_pb2
from cpg_io._proto.flow import flow_pb2 as _flow_pb2
from cpg_io._proto.relay import relay_pb2 as _relay_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ServerStatusRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ServerStatusResponse(_message.Message):
    __slots__ = ("num_flows", "max_flows", "seen_flows", "uptime_ns", "num_connected_nodes", "num_unavailable_nodes", "unavailable_nodes", "version", "flows_rate")
    NUM_FLOWS_FIELD_NUMBER: _ClassVar[int]
    MAX_FLOWS_FIELD_NUMBER: _ClassVar[int]
    SEEN_FLOWS_FIELD_NUMBER: _ClassVar[int]
    UPTIME_NS_FIELD_NUMBER: _ClassVar[int]
    NUM_CONNECTED_NODES_FIELD_NUMBER: _ClassVar[int]
    NUM_UNAVAILABLE_NODES_FIELD_NUMBER: _ClassVar[int]
    UNAVAILABLE_NODES_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    FLOWS_RATE_FIELD_NUMBER: _ClassVar[int]
    num_flows: int
    max_flows: int
    seen_flows: int
    uptime_ns: int
    num_connected_nodes: _wrappers_pb2.UInt32Value
    num_unavailable_nodes: _wrappers_pb2.UInt32Value
    unavailable_nodes: _containers.RepeatedScalarFieldContainer[str]
    version: str
    flows_rate: float
    def __init__(self, num_flows: _Optional[int] = ..., max_flows: _Optional[int] = ..., seen_flows: _Optional[int] = ..., uptime_ns: _Optional[int] = ..., num_connected_nodes: _Optional[_Union[_wrappers_pb2.UInt32Value, _Mapping]] = ..., num_unavailable_nodes: _Optional[_Union[_wrappers_pb2.UInt32Value, _Mapping]] = ..., unavailable_nodes: _Optional[_Iterable[str]] = ..., version: _Optional[str] = ..., flows_rate: _Optional[float] = ...) -> None: ...

class GetFlowsRequest(_message.Message):
    __slots__ = ("number", "first", "follow", "blacklist", "whitelist", "since", "until", "field_mask")
    NUMBER_FIELD_NUMBER: _ClassVar[int]
    FIRST_FIELD_NUMBER: _ClassVar[int]
    FOLLOW_FIELD_NUMBER: _ClassVar[int]
    BLACKLIST_FIELD_NUMBER: _ClassVar[int]
    WHITELIST_FIELD_NUMBER: _ClassVar[int]
    SINCE_FIELD_NUMBER: _ClassVar[int]
    UNTIL_FIELD_NUMBER: _ClassVar[int]
    FIELD_MASK_FIELD_NUMBER: _ClassVar[int]
    number: int
    first: bool
    follow: bool
    blacklist: _containers.RepeatedCompositeFieldContainer[_flow_pb2.FlowFilter]
    whitelist: _containers.RepeatedCompositeFieldContainer[_flow_pb2.FlowFilter]
    since: _timestamp_pb2.Timestamp
    until: _timestamp_pb2.Timestamp
    field_mask: _field_mask_pb2.FieldMask
    def __init__(self, number: _Optional[int] = ..., first: _Optional[bool] = ..., follow: _Optional[bool] = ..., blacklist: _Optional[_Iterable[_Union[_flow_pb2.FlowFilter, _Mapping]]] = ..., whitelist: _Optional[_Iterable[_Union[_flow_pb2.FlowFilter, _Mapping]]] = ..., since: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., until: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., field_mask: _Optional[_Union[_field_mask_pb2.FieldMask, _Mapping]] = ...) -> None: ...

class GetFlowsResponse(_message.Message):
    __slots__ = ("flow", "node_status", "lost_events", "node_name", "time")
    FLOW_FIELD_NUMBER: _ClassVar[int]
    NODE_STATUS_FIELD_NUMBER: _ClassVar[int]
    LOST_EVENTS_FIELD_NUMBER: _ClassVar[int]
    NODE_NAME_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    flow: _flow_pb2.Flow
    node_status: _relay_pb2.NodeStatusEvent
    lost_events: _flow_pb2.LostEvent
    node_name: str
    time: _timestamp_pb2.Timestamp
    def __init__(self, flow: _Optional[_Union[_flow_pb2.Flow, _Mapping]] = ..., node_status: _Optional[_Union[_relay_pb2.NodeStatusEvent, _Mapping]] = ..., lost_events: _Optional[_Union[_flow_pb2.LostEvent, _Mapping]] = ..., node_name: _Optional[str] = ..., time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class GetNodesRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetNodesResponse(_message.Message):
    __slots__ = ("nodes",)
    NODES_FIELD_NUMBER: _ClassVar[int]
    nodes: _containers.RepeatedCompositeFieldContainer[Node]
    def __init__(self, nodes: _Optional[_Iterable[_Union[Node, _Mapping]]] = ...) -> None: ...

class Node(_message.Message):
    __slots__ = ("name", "version", "address", "state", "tls", "uptime_ns", "num_flows", "max_flows", "seen_flows")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    TLS_FIELD_NUMBER: _ClassVar[int]
    UPTIME_NS_FIELD_NUMBER: _ClassVar[int]
    NUM_FLOWS_FIELD_NUMBER: _ClassVar[int]
    MAX_FLOWS_FIELD_NUMBER: _ClassVar[int]
    SEEN_FLOWS_FIELD_NUMBER: _ClassVar[int]
    name: str
    version: str
    address: str
    state: _relay_pb2.NodeState
    tls: TLS
    uptime_ns: int
    num_flows: int
    max_flows: int
    seen_flows: int
    def __init__(self, name: _Optional[str] = ..., version: _Optional[str] = ..., address: _Optional[str] = ..., state: _Optional[_Union[_relay_pb2.NodeState, str]] = ..., tls: _Optional[_Union[TLS, _Mapping]] = ..., uptime_ns: _Optional[int] = ..., num_flows: _Optional[int] = ..., max_flows: _Optional[int] = ..., seen_flows: _Optional[int] = ...) -> None: ...

class TLS(_message.Message):
    __slots__ = ("enabled", "server_name")
    ENABLED_FIELD_NUMBER: _ClassVar[int]
    SERVER_NAME_FIELD_NUMBER: _ClassVar[int]
    enabled: bool
    server_name: str
    def __init__(self, enabled: _Optional[bool] = ..., server_name: _Optional[str] = ...) -> None: ...
