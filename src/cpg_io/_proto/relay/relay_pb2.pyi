from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class NodeState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    UNKNOWN_NODE_STATE: _ClassVar[NodeState]
    NODE_CONNECTED: _ClassVar[NodeState]
    NODE_UNAVAILABLE: _ClassVar[NodeState]
    NODE_GONE: _ClassVar[NodeState]
    NODE_ERROR: _ClassVar[NodeState]
UNKNOWN_NODE_STATE: NodeState
NODE_CONNECTED: NodeState
NODE_UNAVAILABLE: NodeState
NODE_GONE: NodeState
NODE_ERROR: NodeState

class NodeStatusEvent(_message.Message):
    __slots__ = ("state_change", "node_names", "message")
    STATE_CHANGE_FIELD_NUMBER: _ClassVar[int]
    NODE_NAMES_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    state_change: NodeState
    node_names: _containers.RepeatedScalarFieldContainer[str]
    message: str
    def __init__(self, state_change: _Optional[_Union[NodeState, str]] = ..., node_names: _Optional[_Iterable[str]] = ..., message: _Optional[str] = ...) -> None: ...
