"""The commonest Hubble line read straight to its allow-entry key: no dict, no Flow.

Most of a replay's lines are DROPPED POLICY_DENIED flows between two pods, each one more flow
for an allow entry already seen. For those, decoding every field into dicts and then into a
19-field Flow is most of the cost. :class:`QuickReader` decodes a line into typed structs with
msgspec (in C, validating as it goes) and returns the entry key and the time. A line of
another meaning that decodes all the same (an infrastructure drop, an entry's first flow) is
turned into its Flow straight from the structs; only what does not decode, or is not plain
enough to build here, takes the full path (orjson and :class:`FlowParser`).

The contract that keeps both paths equal: whenever :meth:`QuickReader.read` returns a key or
a Flow, ``FlowParser().parse(orjson.loads(line))`` succeeds and gives a flow with exactly
these values (or that Flow). So the schema below covers every field of Hubble's ``Flow`` (A.5
in the API notes) with a precise type and rejects unknown fields: nothing is skipped unread (skipping would let through
bytes that orjson refuses, such as invalid UTF-8), and every number is a bounded integer (a
300-digit number orjson refuses cannot be one). A field the schema does not know, a value of
another type, a camelCase key, an L7 record or a policy list all mean "not the common shape".
"""

from __future__ import annotations

from typing import Annotated

import msgspec

from cpg_core._base.dropreasons import POLICY_DENIED, REASON_CODES
from cpg_core._base.flow import EMPTY_ENDPOINT, Endpoint, EntryKey, Flow, Verdict
from cpg_core._flows.decide import Decision
from cpg_core._flows.numbers import EndpointNumbers, QuickKey
from cpg_core._flows.parse import (
    _DIRECTIONS as _DIRECTION_NUMBERS,  # one table for both readers
    _VERDICTS as _VERDICT_NUMBERS,
    MAX_PORT,
    FlowParser,
)

U8 = Annotated[int, msgspec.Meta(ge=0, le=255)]
U16 = Annotated[int, msgspec.Meta(ge=0, le=65535)]
U32 = Annotated[int, msgspec.Meta(ge=0, le=2**32 - 1)]
I32 = Annotated[int, msgspec.Meta(ge=-(2**31), le=2**31 - 1)]
U63 = Annotated[int, msgspec.Meta(ge=0, le=2**63 - 1)]
Enum = str | Annotated[int, msgspec.Meta(ge=0, le=2**31 - 1)]
Uint64 = str | U63  # protojson writes 64-bit integers as strings (msgspec bounds stop at 2**63)


class _Struct(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    pass


class _Named(_Struct):
    name: str = ""
    version: str = ""


class _Pair(_Struct):
    source: str = ""
    destination: str = ""


class _IP(_Struct):
    source: str = ""
    source_xlated: str = ""
    destination: str = ""
    ipVersion: Enum = 0
    encrypted: bool = False


class _Flags(msgspec.Struct, forbid_unknown_fields=True, frozen=True, gc=False):
    """Frozen: hashable, so a flag set is named once (:data:`_FLAG_NAMES`)."""

    FIN: bool = False
    SYN: bool = False
    RST: bool = False
    PSH: bool = False
    ACK: bool = False
    URG: bool = False
    ECE: bool = False
    CWR: bool = False
    NS: bool = False


class _TCP(_Struct):
    source_port: U32 = 0
    destination_port: U16 | None = None
    flags: _Flags | None = None


class _Ports(_Struct):
    source_port: U32 = 0
    destination_port: U16 | None = None


class _ICMP(_Struct):
    type: U8 = 0
    code: U32 = 0


class _VRRP(_Struct):
    type: U32 = 0
    vrid: U32 = 0
    priority: U32 = 0


class _IGMP(_Struct):
    type: U32 = 0
    group_address: str = ""


class _L4(_Struct):
    TCP: _TCP | None = None
    UDP: _Ports | None = None
    ICMPv4: _ICMP | None = None
    ICMPv6: _ICMP | None = None
    SCTP: _Ports | None = None
    VRRP: _VRRP | None = None
    IGMP: _IGMP | None = None


class _Tunnel(_Struct):
    protocol: Enum = 0
    IP: _IP | None = None
    l4: _L4 | None = None
    vni: U32 = 0


class _Workload(msgspec.Struct, forbid_unknown_fields=True, frozen=True, gc=False):
    name: str = ""
    kind: str = ""


class _Endpoint(msgspec.Struct, forbid_unknown_fields=True, frozen=True, gc=False):
    """Frozen: hashable, so it is the key of the endpoint cache."""

    ID: U32 = 0
    identity: U63 = 0
    cluster_name: str = ""
    namespace: str = ""
    labels: tuple[str, ...] = ()
    pod_name: str = ""
    workloads: tuple[_Workload, ...] = ()


class _EventType(_Struct):
    type: I32 = 0
    sub_type: I32 = 0


class _Service(_Struct):
    name: str = ""
    namespace: str = ""


class _File(_Struct):
    name: str = ""
    line: U32 = 0


class _IPTraceID(_Struct):
    trace_id: Uint64 = 0
    ip_option_type: U32 = 0


class _Interface(_Struct):
    index: U32 = 0
    name: str = ""


class _TraceParent(_Struct):
    trace_id: str = ""


class _TraceContext(_Struct):
    parent: _TraceParent | None = None


class _Aggregate(_Struct):
    ingress_flow_count: U32 = 0
    egress_flow_count: U32 = 0
    unknown_direction_flow_count: U32 = 0


class _Flow(_Struct):
    """Every field of Hubble's Flow but the rare ones cpg reads (l7, source_names,
    destination_names, the *_allowed_by and *_denied_by lists) and ``extensions``: a line with
    any of those is not the common shape."""

    time: str | None = None
    uuid: str = ""
    emitter: _Named | None = None
    verdict: Enum = 0
    drop_reason: U32 = 0
    auth_type: Enum = 0
    ethernet: _Pair | None = None
    IP: _IP | None = None
    l4: _L4 | None = None
    tunnel: _Tunnel | None = None
    source: _Endpoint | None = None
    destination: _Endpoint | None = None
    Type: Enum = 0
    node_name: str | None = None
    node_labels: tuple[str, ...] = ()
    reply: bool | None = None
    event_type: _EventType | None = None
    source_service: _Service | None = None
    destination_service: _Service | None = None
    traffic_direction: Enum = 0
    policy_match_type: U32 = 0
    trace_observation_point: Enum = 0
    trace_reason: Enum = 0
    file: _File | None = None
    ip_trace_id: _IPTraceID | None = None
    drop_reason_desc: Enum = 0
    is_reply: bool | None = None
    debug_capture_point: Enum = 0
    interface: _Interface | None = None
    proxy_port: U32 = 0
    trace_context: _TraceContext | None = None
    sock_xlate_point: Enum = 0
    socket_cookie: Uint64 = 0
    cgroup_id: Uint64 = 0
    Summary: str = ""
    policy_log: tuple[str, ...] = ()
    aggregate: _Aggregate | None = None


class _Response(_Struct):
    flow: _Flow | None = None
    node_name: str | None = None
    time: str | None = None


QuickRead = tuple[QuickKey | Decision, str] | Flow | None
"""What :meth:`QuickReader.read` makes of a line."""

_DIRECTIONS = {"INGRESS": 1, "EGRESS": 2}
_FLAG_NAMES: dict[_Flags, tuple[str, ...]] = {}
"""The few flag sets a capture has, named once each."""
_DROPPED = int(Verdict.DROPPED)
_AUDIT = int(Verdict.AUDIT)


# The verdict names quick_decision makes NOT_A_DROP (every one but DROPPED and AUDIT).
_CONTEXT_VERDICTS = frozenset(v.name for v in Verdict if v not in (Verdict.DROPPED, Verdict.AUDIT))


def quick_decision(verdict: int, reason: int, reply: bool) -> Decision | None:
    """What a flow's verdict, drop reason and reply flag decide on their own, as :func:`decide`
    does: NOT_A_DROP for a verdict other than DROPPED and AUDIT (AUDIT may be a candidate with
    --include-audit), REPLY or CANDIDATE for a POLICY_DENIED drop. None for anything else,
    which takes the full path. (The aggregator declines these when options change them.)"""
    if verdict != _DROPPED:
        return None if verdict == _AUDIT else Decision.NOT_A_DROP
    if reason != POLICY_DENIED:
        return None
    return Decision.REPLY if reply else Decision.CANDIDATE


def _flag_names(flags: _Flags) -> tuple[str, ...]:
    """The flags set, sorted, as FlowParser names them."""
    names = _FLAG_NAMES.get(flags)
    if names is None:
        names = tuple(sorted(name for name in flags.__struct_fields__ if getattr(flags, name)))
        if len(_FLAG_NAMES) < 256:
            _FLAG_NAMES[flags] = names
    return names


class QuickReader:
    """Reads the allow-entry key of the commonest line, and the Flow of other plain lines
    (see the module docstring). Endpoints come from ``parser``, the same instances its flows
    hold; each also gets a number, never reused by this reader, for :data:`QuickKey`."""

    __slots__ = ("_decode", "_endpoints", "_numbers", "_parser")

    def __init__(self, parser: FlowParser) -> None:
        self._decode = msgspec.json.Decoder(_Response).decode
        self._parser = parser
        self._numbers = EndpointNumbers()
        self._endpoints = self._numbers.by_raw  # raw endpoint struct -> number

    def read(self, line: bytes | str) -> QuickRead:
        """What the line is, when it decodes: for a wrapped, snake_case flow that is either
        a DROPPED POLICY_DENIED non-reply TCP or UDP flow with a port between two endpoints,
        (its :data:`QuickKey`, its time); for such a drop's reply or a flow that was not
        dropped, (REPLY or NOT_A_DROP, its time); for any other flow, its Flow when it is
        plain enough to build here. None for any other line."""
        try:
            response = self._decode(line)
        except msgspec.DecodeError:  # also ValidationError: another shape, or not JSON
            return None
        f = response.flow
        if f is None:
            return None
        time = f.time
        if time is None:
            time = response.time
            if time is None:
                return self._flow(f, response)
        # quick_decision's rule, on the names as written (the hot path: no lookups, no call)
        verdict = f.verdict
        if verdict != "DROPPED":
            if f.drop_reason_desc == 0 and verdict in _CONTEXT_VERDICTS:
                return Decision.NOT_A_DROP, time
            return self._flow(f, response)
        if f.drop_reason_desc != "POLICY_DENIED":
            return self._flow(f, response)
        if f.is_reply is True or (f.is_reply is None and f.reply is True):
            return Decision.REPLY, time
        way = f.traffic_direction
        direction = _DIRECTIONS.get(way) if type(way) is str else None
        l4 = f.l4
        if direction is None or l4 is None or f.source is None or f.destination is None:
            return self._flow(f, response)
        body: _TCP | _Ports | None = l4.TCP
        protocol = "TCP"
        if body is None:
            body = l4.UDP
            protocol = "UDP"
            if body is None:
                return self._flow(f, response)
        port = body.destination_port
        if not port:
            return self._flow(f, response)
        numbers = self._endpoints
        source = numbers.get(f.source)
        if source is None:
            source = self._number(f.source)
        destination = numbers.get(f.destination)
        if destination is None:
            destination = self._number(f.destination)
        return (direction, source, destination, protocol, port), time

    def flow(self, line: bytes | str) -> Flow | None:
        """The Flow of a line, built from the structs: None when the line does not decode
        or is not plain enough (then FlowParser reads it)."""
        try:
            response = self._decode(line)
        except msgspec.DecodeError:
            return None
        f = response.flow
        return None if f is None else self._flow(f, response)

    def _flow(self, f: _Flow, response: _Response) -> Flow | None:
        """What FlowParser makes of the same line, for the plain cases (None for the others:
        a drop reason name cpg does not know, an ambiguous reason, an L4 header other than
        one TCP or UDP header)."""
        time = f.time
        if time is None:
            time = response.time or ""
        raw = f.verdict
        verdict = _VERDICT_NUMBERS.get(raw, 0) if isinstance(raw, str) else raw
        raw = f.traffic_direction
        way = _DIRECTION_NUMBERS.get(raw, 0) if isinstance(raw, str) else raw
        desc = f.drop_reason_desc
        reason: int
        if isinstance(desc, str):
            code = REASON_CODES.get(desc)
            if code is None:
                return None  # FlowParser keeps the name and looks further
            reason = code
        elif desc:
            reason = desc
        elif f.drop_reason:
            return None  # an absent name (use drop_reason) reads like an explicit 0 here
        else:
            reason = 0
        protocol = ""
        port = source_port = 0
        flags: tuple[str, ...] = ()
        l4 = f.l4
        if l4 is not None:
            tcp, udp = l4.TCP, l4.UDP
            if (
                l4.ICMPv4 is not None
                or l4.ICMPv6 is not None
                or l4.SCTP is not None
                or l4.VRRP is not None
                or l4.IGMP is not None
            ):
                return None
            if tcp is not None:
                protocol = "TCP"
                port = tcp.destination_port or 0
                source_port = tcp.source_port
                if tcp.flags is not None:
                    flags = _flag_names(tcp.flags)
            elif udp is not None:
                protocol = "UDP"
                port = udp.destination_port or 0
                source_port = udp.source_port
            if source_port > MAX_PORT:
                source_port = 0  # a hint only: out of range reads as absent
        is_reply = f.is_reply
        if is_reply is None:
            is_reply = True if f.reply is True else None
        node = f.node_name
        if node is None:
            node = response.node_name or ""
        ip = f.IP
        return Flow(
            time=time,
            uuid=f.uuid,
            verdict=verdict,
            drop_reason=reason,
            direction=way,
            source=self._endpoint(f.source),
            destination=self._endpoint(f.destination),
            source_ip="" if ip is None else ip.source,
            destination_ip="" if ip is None else ip.destination,
            protocol=protocol,
            port=port,
            is_reply=is_reply,
            source_port=source_port,
            tcp_flags=flags,
            node_name=node,
        )

    def entry_key(self, key: QuickKey) -> EntryKey | None:
        """The allow-entry key of a key :meth:`read` gave lately (None once the reader
        forgot one of its endpoints: it keeps at most a bounded number)."""
        return self._numbers.entry_key(key)

    def _endpoint(self, raw: _Endpoint | None) -> Endpoint:
        if raw is None:
            return EMPTY_ENDPOINT
        number = self._endpoints.get(raw)
        found = None if number is None else self._numbers.endpoint(number)
        return found if found is not None else self._register(raw)[1]

    def _number(self, raw: _Endpoint) -> int:
        return self._register(raw)[0]

    def _register(self, raw: _Endpoint) -> tuple[int, Endpoint]:
        """A raw endpoint seen for the first time (or since the bounded caches were
        cleared): its number and its endpoint."""
        endpoint = self._parser.endpoint(
            raw.namespace, raw.labels, raw.identity, raw.pod_name, raw.cluster_name
        )
        if raw.namespace == endpoint.namespace and (
            raw.labels is not endpoint.labels or raw.namespace is not endpoint.namespace
        ):  # kept with the workload's one copy of them (§D56)
            raw = msgspec.structs.replace(raw, labels=endpoint.labels, namespace=endpoint.namespace)
        return self._numbers.number(raw, endpoint), endpoint
