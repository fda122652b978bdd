"""The flow model, for adapters that build flows from another wire format (cpg_io's protobuf
converter) rather than from JSON lines."""

from cpg_core._base.flow import (
    EMPTY_ENDPOINT,
    Direction,
    DNSInfo,
    Endpoint,
    EntryKey,
    Flow,
    HTTPInfo,
    L7Info,
    LostEvents,
    OtherRecord,
    PolicyRef,
    Record,
    Verdict,
    endpoint_of,
)
from cpg_core._flows.numbers import EndpointNumbers, QuickKey
from cpg_core._flows.quickline import quick_decision

__all__ = [
    "EMPTY_ENDPOINT",
    "DNSInfo",
    "Direction",
    "Endpoint",
    "EndpointNumbers",
    "EntryKey",
    "Flow",
    "HTTPInfo",
    "L7Info",
    "LostEvents",
    "OtherRecord",
    "PolicyRef",
    "QuickKey",
    "Record",
    "Verdict",
    "endpoint_of",
    "quick_decision",
]
