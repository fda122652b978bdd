"""Hubble protobuf messages to cpg_core records: the same values the JSON parser gives for
the same flow (a test checks it on real captures)."""

from __future__ import annotations

import time as _clock
from typing import Any

from cpg_core import Decision, Endpoint, Flow, FlowParseError, LostEvents, OtherRecord
from cpg_core.model import (
    EMPTY_ENDPOINT,
    DNSInfo,
    EndpointNumbers,
    EntryKey,
    HTTPInfo,
    L7Info,
    PolicyRef,
    QuickKey,
    Record,
    endpoint_of,
    quick_decision,
)
from cpg_io._proto.flow import flow_pb2
from cpg_io._proto.observer import observer_pb2

FLOW_FIELDS = (
    "time",
    "uuid",
    "verdict",
    "drop_reason",
    "drop_reason_desc",
    "IP.source",
    "IP.destination",
    "l4",
    *(
        f"{side}.{field}"
        for side in ("source", "destination")
        for field in ("namespace", "labels", "identity", "pod_name", "cluster_name")
    ),
    "node_name",
    "source_names",
    "destination_names",
    "l7",
    "reply",
    "is_reply",
    "traffic_direction",
    "ingress_denied_by",
    "egress_denied_by",
    "ingress_allowed_by",
    "egress_allowed_by",
)
"""The flow fields cpg reads: with a field mask, a relay sends only these (about half the
bytes of a full flow, and less for cpg to decode)."""

_L7_TYPES = {v.number: v.name for v in flow_pb2.L7FlowType.DESCRIPTOR.values}
_LOST_SOURCES = {v.number: v.name for v in flow_pb2.LostEventSource.DESCRIPTOR.values}


def _partial_response_class(read: set[str]) -> Any:
    """GetFlowsResponse as the live path decodes it: of a flow, only the fields in ``read``,
    with the two endpoints left encoded (their bytes are the endpoint cache's key, so a
    known endpoint costs no decoding at all); other responses decode as nothing (their kind
    is then read from the whole message). Built from the real descriptors, so the field
    numbers and types are Hubble's."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    field_type = descriptor_pb2.FieldDescriptorProto
    flow_file = descriptor_pb2.FileDescriptorProto()
    flow_pb2.DESCRIPTOR.CopyToProto(flow_file)
    partial = descriptor_pb2.FileDescriptorProto(
        name="cpg_io/_proto/partial_flow.proto",
        package="cpg_partial",
        syntax="proto3",
        dependency=[*flow_file.dependency, flow_file.name],
    )
    flow = partial.message_type.add(name="Flow")
    whole = next(m for m in flow_file.message_type if m.name == "Flow")
    for field in whole.field:
        if field.name not in read:
            continue
        copy = flow.field.add()
        copy.CopyFrom(field)
        copy.ClearField("oneof_index")
        if field.name in ("source", "destination"):
            copy.type = field_type.TYPE_BYTES
            copy.ClearField("type_name")
    response = partial.message_type.add(name="GetFlowsResponse")
    response.oneof_decl.add(name="response_types")
    response_file = descriptor_pb2.FileDescriptorProto()
    observer_pb2.DESCRIPTOR.CopyToProto(response_file)
    numbers = {
        f.name: f
        for f in next(m for m in response_file.message_type if m.name == "GetFlowsResponse").field
    }
    response.field.add(
        name="flow",
        number=numbers["flow"].number,
        type=field_type.TYPE_MESSAGE,
        type_name=".cpg_partial.Flow",
        oneof_index=0,
    )
    for name in ("node_name", "time"):
        copy = response.field.add()
        copy.CopyFrom(numbers[name])
    pool = descriptor_pool.DescriptorPool()  # its own: nothing is added to protobuf's default
    for needed in (*flow_file.dependency, flow_file.name):
        found = descriptor_pb2.FileDescriptorProto()
        descriptor_pool.Default().FindFileByName(needed).CopyToProto(found)
        pool.Add(found)
    pool.Add(partial)
    return message_factory.GetMessageClass(
        pool.FindMessageTypeByName("cpg_partial.GetFlowsResponse")
    )


PartialResponse = _partial_response_class({path.split(".")[0] for path in FLOW_FIELDS})
"""A received message as the live path decodes it first (see :func:`_partial_response_class`)."""


def _refs(policies: Any) -> tuple[PolicyRef, ...]:
    if not policies:
        return ()
    return tuple(PolicyRef(p.name, p.namespace, p.kind) for p in policies)


_ENDPOINT_CACHE_LIMIT = 16384
"""Endpoints remembered at most: a pod that is gone leaves with the next clearing."""


class ProtoConverter:
    """Converts GetFlowsResponse messages; caches endpoints like the JSON parser does."""

    __slots__ = ("_endpoints", "_labels", "_numbered", "_numbers", "_second")

    def __init__(self) -> None:
        self._endpoints: dict[bytes, Endpoint] = {}
        self._labels: dict[tuple[str, ...], tuple[str, ...]] = {}
        """One copy of each label set: a workload's pods share it."""
        self._second: tuple[int | None, str] = (None, "")
        # The numbers of QuickKey, by the endpoint's encoding (only the stream's thread
        # uses them).
        self._numbered = EndpointNumbers()
        self._numbers = self._numbered.by_raw

    def record(self, response: Any) -> Record:
        kind = response.WhichOneof("response_types")
        if kind == "flow":
            return self.flow(response.flow, response)
        if kind == "lost_events":
            lost = response.lost_events
            return LostEvents(
                count=lost.num_events_lost, source=_LOST_SOURCES.get(lost.source, str(lost.source))
            )
        return OtherRecord(kind=kind or "")

    def _time(self, stamp: Any) -> str:
        """The time as protojson writes it (what Hubble's JSON holds), the date part
        formatted once per distinct second. Safe from two threads (the flusher converts kept
        samples while the stream converts new flows): the second and its text are one value."""
        seconds = stamp.seconds
        second, text = self._second
        if seconds != second:
            if not 0 <= seconds < 253402300800:  # years 1970-9999 only
                return _outside_epoch(stamp)
            try:
                text = _clock.strftime("%Y-%m-%dT%H:%M:%S", _clock.gmtime(seconds))
            except (OverflowError, ValueError, OSError):
                return _outside_epoch(stamp)  # outside what the C library can format
            self._second = (seconds, text)
        nanos = stamp.nanos  # as protojson (and so Hubble's JSON) writes it: 0, 3, 6 or 9 digits
        if not nanos:
            return f"{text}Z"
        if not nanos % 1_000_000:
            return f"{text}.{nanos // 1_000_000:03d}Z"
        if not nanos % 1_000:
            return f"{text}.{nanos // 1_000:06d}Z"
        return f"{text}.{nanos:09d}Z"

    def _time_key(self, stamp: Any) -> str:
        """The time as the aggregator's key (nine fractional digits): what the fast path
        compares, made here once instead of from :meth:`_time`'s text for every flow."""
        seconds = stamp.seconds
        second, text = self._second
        if seconds != second:
            made = self._time(stamp)  # formats the new second
            second, text = self._second
            if seconds != second:  # outside 1970-9999 (or another thread's second since)
                return made  # the aggregator makes the key of the text
        return f"{text}.{stamp.nanos:09d}Z"

    def _endpoints_of(self, f: Any) -> tuple[Endpoint, Endpoint]:
        """The source and destination of a flow message, whole or partial (endpoints left
        encoded: an empty encoding is an endpoint the flow does not have)."""
        source, destination = f.source, f.destination
        if type(source) is bytes:
            return self._endpoint(source), self._endpoint(destination)
        return (
            self._endpoint(source.SerializeToString()) if f.HasField("source") else EMPTY_ENDPOINT,
            self._endpoint(destination.SerializeToString())
            if f.HasField("destination")
            else EMPTY_ENDPOINT,
        )

    def _endpoint(self, encoded: bytes) -> Endpoint:
        # Keyed by the endpoint's whole encoding: as received (a partial message leaves it
        # encoded) or one C call, instead of reading five fields. The labels are part of it:
        # Cilium frees unused identity numbers and gives them to other label sets later (CIDR
        # identities especially), so a number alone could find another endpoint's labels in
        # a long capture.
        found = self._endpoints.get(encoded)
        if found is None:
            if not encoded:
                return EMPTY_ENDPOINT
            msg = flow_pb2.Endpoint.FromString(encoded)
            if len(self._endpoints) >= _ENDPOINT_CACHE_LIMIT:
                self._endpoints.clear()
                self._labels.clear()
            labels = tuple(msg.labels)
            labels = self._labels.setdefault(labels, labels)
            found = self._endpoints[encoded] = endpoint_of(
                msg.namespace, labels, msg.identity, msg.pod_name, msg.cluster_name
            )
        return found

    def quick(self, f: Any, response: Any) -> tuple[QuickKey | Decision, str] | None:
        """What a flow message is when it is of a common shape, read without building a Flow
        (as :meth:`QuickReader.read` does for JSON lines): a DROPPED POLICY_DENIED non-reply
        TCP or UDP flow with a port, by its :data:`QuickKey` (:meth:`entry_key` gives the
        allow-entry key), or a flow that only adds context (a reply to such a drop; a verdict
        other than DROPPED and AUDIT), by its decision. None for anything else (L7 records
        and DNS names included), which :meth:`flow` converts. The time comes as the
        aggregator's time key (nine fractional digits)."""
        if f.HasField("l7") or f.destination_names:
            return None
        if f.HasField("time"):
            stamp = f.time
        elif response.HasField("time"):
            stamp = response.time
        else:
            return None
        reply = f.is_reply.value if f.HasField("is_reply") else f.reply
        decision = quick_decision(f.verdict, f.drop_reason_desc or f.drop_reason, reply)
        if decision is not Decision.CANDIDATE:
            return None if decision is None else (decision, self._time_key(stamp))
        direction = f.traffic_direction
        if direction != 1 and direction != 2:
            return None
        l4 = f.l4
        protocol = l4.WhichOneof("protocol")
        if protocol == "TCP":
            port = l4.TCP.destination_port
        elif protocol == "UDP":
            port = l4.UDP.destination_port
        else:
            return None
        if not 0 < port <= 65535:
            return None
        source, destination = f.source, f.destination
        if type(source) is not bytes:  # a whole message: its endpoints encoded once more
            source = source.SerializeToString() if f.HasField("source") else b""
            destination = destination.SerializeToString() if f.HasField("destination") else b""
        numbers = self._numbers
        first = numbers.get(source)
        if first is None:
            first = self._number(source)
        second = numbers.get(destination)
        if second is None:
            second = self._number(destination)
        return (direction, first, second, protocol, port), self._time_key(stamp)

    def _number(self, encoded: bytes) -> int:
        """The number of an endpoint seen for the first time (or since the bounded caches
        were cleared)."""
        return self._numbered.number(encoded, self._endpoint(encoded))

    def entry_key(self, key: QuickKey) -> EntryKey | None:
        """The allow-entry key of a key :meth:`quick` gave lately (None once the converter
        forgot one of its endpoints: it keeps a bounded number)."""
        return self._numbered.entry_key(key)

    def flow_of(self, response: Any) -> Flow:
        """The flow of a response :meth:`quick` read (for a sample kept unconverted)."""
        return self.flow(response.flow, response)

    def flow(self, f: Any, response: Any) -> Flow:
        protocol = f.l4.WhichOneof("protocol") or ""
        port = source_port = 0
        flags: tuple[str, ...] = ()
        if protocol:
            body = getattr(f.l4, protocol)
            if protocol in ("ICMPv4", "ICMPv6"):
                port = body.type
            elif protocol in ("TCP", "UDP", "SCTP"):
                port, source_port = body.destination_port, body.source_port
                if protocol == "TCP" and body.HasField("flags"):
                    flags = tuple(sorted(d.name for d, on in body.flags.ListFields() if on))
        if f.HasField("is_reply"):
            is_reply: bool | None = f.is_reply.value
        else:
            is_reply = True if f.reply else None
        time = (
            f.time if f.HasField("time") else response.time if response.HasField("time") else None
        )
        l7 = None
        if f.HasField("l7"):
            record = f.l7.WhichOneof("record")
            http = dns = None
            if record == "http":
                h = f.l7.http
                http = HTTPInfo(method=h.method, url=h.url, code=h.code)
            elif record == "dns":
                d = f.l7.dns
                dns = DNSInfo(query=d.query, ips=tuple(d.ips), rcode=d.rcode)
            l7 = L7Info(type=_L7_TYPES.get(f.l7.type, str(f.l7.type)), http=http, dns=dns)
        reason = f.drop_reason_desc or f.drop_reason
        source, destination = self._endpoints_of(f)
        return Flow(
            time=self._time(time) if time is not None else "",
            uuid=f.uuid,
            verdict=f.verdict,
            drop_reason=reason,
            direction=f.traffic_direction,
            source=source,
            destination=destination,
            source_ip=f.IP.source,
            destination_ip=f.IP.destination,
            protocol=protocol,
            port=port,
            is_reply=is_reply,
            source_port=source_port,
            tcp_flags=flags,
            node_name=f.node_name or response.node_name,
            source_names=tuple(f.source_names) if f.source_names else (),
            destination_names=tuple(f.destination_names) if f.destination_names else (),
            l7=l7,
            ingress_denied_by=_refs(f.ingress_denied_by),
            egress_denied_by=_refs(f.egress_denied_by),
            ingress_allowed_by=_refs(f.ingress_allowed_by),
            egress_allowed_by=_refs(f.egress_allowed_by),
        )


def _outside_epoch(stamp: Any) -> str:
    """A time before 1970 or after 9999 as protojson writes it; FlowParseError when protojson
    cannot write it either (a relay that sends year 10000 sends a malformed flow)."""
    try:
        return str(stamp.ToJsonString())
    except (ValueError, OverflowError) as exc:
        raise FlowParseError(f"field 'time' is out of range ({exc})") from None
