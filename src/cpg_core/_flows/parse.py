"""Turn one decoded Hubble JSON object into a :class:`Flow` (or a non-flow record).

Accepts what ``hubble observe -o jsonpb`` writes and what other protojson writers produce:
``{"flow": {...}}`` responses and bare flows, snake_case and lowerCamelCase keys, enum names
and numbers (including names this version does not know), uint64 values as strings, and
unknown fields (ignored). Anything else raises :class:`FlowParseError` naming the field.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from cpg_core._base.dropreasons import REASON_CODES, UNRECOGNISED_REASON
from cpg_core._base.errors import FlowParseError
from cpg_core._base.flow import (
    EMPTY_ENDPOINT,
    ICMP_PROTOCOLS,
    L4_PROTOCOLS,
    PORT_PROTOCOLS,
    DNSInfo,
    Endpoint,
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

_VERDICTS = {v.name: int(v) for v in Verdict}
_DIRECTIONS = {"TRAFFIC_DIRECTION_UNKNOWN": 0, "INGRESS": 1, "EGRESS": 2}
_OTHER_RESPONSES = (
    "node_status",
    "nodeStatus",
    "agent_event",
    "agentEvent",
    "debug_event",
    "debugEvent",
)
# Keys whose presence marks a bare (unwrapped) Flow object.
_FLOW_KEYS = frozenset(
    {
        "verdict",
        "source",
        "destination",
        "IP",
        "l4",
        "l7",
        "Type",
        "traffic_direction",
        "trafficDirection",
        "drop_reason_desc",
        "dropReasonDesc",
        "event_type",
        "eventType",
        "Summary",
    }
)
_ENDPOINT_CACHE_LIMIT = 16384
_T = TypeVar("_T")
_NO_IP: dict[str, str] = {}
# Fields most flows lack: looked up only when one of them is there.
_RARE_KEYS = frozenset(
    {
        "l7",
        "source_names",
        "destination_names",
        "ingress_denied_by",
        "egress_denied_by",
        "ingress_allowed_by",
        "egress_allowed_by",
    }
)
# The protojson JSON names that differ from the proto names cpg reads.
_CAMEL_TO_SNAKE = {
    "dropReasonDesc": "drop_reason_desc",
    "dropReason": "drop_reason",
    "trafficDirection": "traffic_direction",
    "nodeName": "node_name",
    "isReply": "is_reply",
    "sourceNames": "source_names",
    "destinationNames": "destination_names",
    "ingressDeniedBy": "ingress_denied_by",
    "egressDeniedBy": "egress_denied_by",
    "ingressAllowedBy": "ingress_allowed_by",
    "egressAllowedBy": "egress_allowed_by",
    "eventType": "event_type",
    "subType": "sub_type",
    "podName": "pod_name",
    "clusterName": "cluster_name",
    "destinationPort": "destination_port",
    "sourcePort": "source_port",
    "latencyNs": "latency_ns",
    "policyMatchType": "policy_match_type",
}
_CAMEL_MARKERS = frozenset(
    {
        "dropReasonDesc",
        "dropReason",
        "trafficDirection",
        "nodeName",
        "isReply",
        "eventType",
        "sourceNames",
        "destinationNames",
        "ingressDeniedBy",
        "egressDeniedBy",
        "ingressAllowedBy",
        "egressAllowedBy",
    }
)


def _kind(value: object) -> str:
    if value is None:
        return "null"
    return {
        bool: "a boolean",
        int: "a number",
        float: "a number",
        str: "a string",
        list: "a list",
        dict: "an object",
    }.get(type(value), type(value).__name__)


def _bad(field: str, expected: str, value: object) -> FlowParseError:
    return FlowParseError(f"field {field!r} must be {expected}, got {_kind(value)}")


def _as_str(value: object, field: str) -> str:
    if value is None:
        return ""
    if type(value) is str:
        return value
    raise _bad(field, "a string", value)


MAX_COUNT = 2**63 - 1
"""The largest count or identifier cpg accepts (a signed 64-bit integer, as JSON readers
and writers everywhere can hold)."""
MAX_PORT = 65535
MAX_ICMP_TYPE = 255


def _as_int(value: object, field: str, maximum: int = MAX_COUNT) -> int:
    """Integers arrive as JSON numbers or, for 64-bit values, as decimal strings; anything
    outside 0..maximum makes the record malformed (never the run)."""
    if value is None:
        return 0
    if type(value) is int:
        number = value
    elif type(value) is str:
        try:
            number = int(value, 10)
        except ValueError:
            shown = value if len(value) <= 40 else value[:40] + "…"
            raise FlowParseError(f"field {field!r} must be an integer, got {shown!r}") from None
    elif type(value) is float and value.is_integer():
        number = int(value)
    else:
        raise _bad(field, "an integer", value)
    if not 0 <= number <= maximum:
        raise FlowParseError(f"field {field!r} must be between 0 and {maximum}, got {value!r}")
    return number


def _as_str_tuple(value: object, field: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if type(value) is not list and type(value) is not tuple:
        raise _bad(field, "a list of strings", value)
    for item in value:
        if type(item) is not str:
            raise _bad(f"{field}[]", "a string", item)
    return tuple(value)


def _as_obj(value: object, field: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if type(value) is dict:
        return value
    raise _bad(field, "an object", value)


def _enum(value: object, names: Mapping[str, int], field: str) -> int:
    if value is None:
        return 0
    if type(value) is str:
        code = names.get(value)
        if code is not None:
            return code
        # A name from a newer Hubble: protojson would reject it; we keep going as "unknown".
        return 0
    if type(value) is int:
        if not 0 <= value <= 2**31 - 1:
            raise FlowParseError(f"field {field!r} is not an enum number: {value}")
        return value
    raise _bad(field, "an enum name or number", value)


def _get(obj: Mapping[str, Any], snake: str, camel: str) -> Any:
    value = obj.get(snake)
    if value is None:
        value = obj.get(camel)
    return value


class FlowParser:
    """Parses decoded JSON objects into records. Keeps a bounded cache of endpoints so that
    repeated endpoints are built once; results are plain values either way."""

    __slots__ = ("_endpoints", "_shared")

    def __init__(self) -> None:
        self._endpoints: dict[tuple[object, ...], Endpoint] = {}
        self._shared: dict[object, object] = {}
        """One copy of each label set and namespace: a workload's pods share them, so a pod
        costs its name and little more (§D56)."""

    def parse(self, obj: object) -> Record:
        """Parse one decoded JSON value. Raises FlowParseError when it is not a Hubble record."""
        if type(obj) is not dict:
            raise FlowParseError(f"expected a JSON object, got {_kind(obj)}")
        inner = obj.get("flow")
        if inner is not None:
            if type(inner) is not dict:
                raise _bad("flow", "an object", inner)
            return self._flow(inner, obj)
        lost = _get(obj, "lost_events", "lostEvents")
        if lost is not None:
            lost = _as_obj(lost, "lost_events")
            source = lost.get("source")
            return LostEvents(
                count=_as_int(_get(lost, "num_events_lost", "numEventsLost"), "num_events_lost"),
                source="" if source is None else str(source),
            )
        for key in _OTHER_RESPONSES:
            if key in obj:
                return OtherRecord(kind=key)
        if _FLOW_KEYS.isdisjoint(obj):
            raise FlowParseError(
                "not a Hubble flow record: expected a 'flow' object (hubble observe -o jsonpb) "
                "or a bare flow with fields such as 'verdict' and 'source'"
            )
        return self._flow(obj, obj)

    def endpoint(
        self, namespace: str, labels: tuple[str, ...], identity: int, pod_name: str, cluster: str
    ) -> Endpoint:
        """The endpoint of these (already checked) values: the same instance this parser gives
        every flow with them, so that keys holding it compare by identity."""
        key = (namespace, labels, identity, pod_name, cluster)
        cached = self._endpoints.get(key)
        if cached is None:
            cached = self._remember(
                key,
                endpoint_of(
                    self._share(namespace), self._share(labels), identity, pod_name, cluster
                ),
            )
        return cached

    def _share(self, value: _T) -> _T:
        shared = self._shared.setdefault(value, value)
        if len(self._shared) >= _ENDPOINT_CACHE_LIMIT:
            self._shared.clear()
        return shared  # type: ignore[return-value]

    def _remember(self, key: tuple[object, ...], endpoint: Endpoint) -> Endpoint:
        if len(self._endpoints) >= _ENDPOINT_CACHE_LIMIT:
            self._endpoints.clear()
        self._endpoints[key] = endpoint
        return endpoint

    def _endpoint(self, value: object, field: str) -> Endpoint:
        if value is None:
            return EMPTY_ENDPOINT
        if type(value) is not dict:
            raise _bad(field, "an object", value)
        namespace = value.get("namespace", "")
        labels = value.get("labels", ())
        identity = value.get("identity", 0)
        # lowerCamelCase input was already rewritten to these names (see _CAMEL_MARKERS).
        pod_name = value.get("pod_name", "")
        cluster = value.get("cluster_name", "")
        if type(labels) is list:
            labels = tuple(labels)
        key = (namespace, labels, identity, pod_name, cluster)
        try:
            cached = self._endpoints.get(key)
        except TypeError:  # an unhashable value where a scalar belongs
            cached = None
        if cached is not None:
            return cached
        endpoint = endpoint_of(
            self._share(_as_str(namespace, f"{field}.namespace")),
            self._share(_as_str_tuple(labels, f"{field}.labels")),
            _as_int(identity, f"{field}.identity"),
            _as_str(pod_name, f"{field}.pod_name"),
            _as_str(cluster, f"{field}.cluster_name"),
        )
        return self._remember(key, endpoint)

    def _unlisted_reason(self, f: Mapping[str, Any], desc: str) -> int:
        """The number of a drop reason whose name cpg does not list: the number Hubble gave
        beside it, else the event's sub-type, else UNRECOGNISED_REASON."""
        reason = _as_int(f.get("drop_reason"), "drop_reason")
        if reason == 0:
            reason = self._sub_type_reason(f)
        return reason or UNRECOGNISED_REASON

    def _flow(self, f: Mapping[str, Any], outer: Mapping[str, Any]) -> Flow:
        if "traffic_direction" not in f and not _CAMEL_MARKERS.isdisjoint(f):
            f = _snake_case(f)
        get = f.get
        time = get("time")
        if time is None:
            time = outer.get("time", "")
        raw = get("verdict", 0)
        verdict = _VERDICTS.get(raw) if type(raw) is str else None
        if verdict is None:
            verdict = _enum(raw, _VERDICTS, "verdict")
        raw = get("traffic_direction", 0)
        direction = _DIRECTIONS.get(raw) if type(raw) is str else None
        if direction is None:
            direction = _enum(raw, _DIRECTIONS, "traffic_direction")

        reason_text = ""
        desc = get("drop_reason_desc")
        if desc is None:
            reason = _as_int(get("drop_reason"), "drop_reason")
        elif type(desc) is str:
            code = REASON_CODES.get(desc)
            if code is None:
                reason, reason_text = self._unlisted_reason(f, desc), desc
            else:
                reason = code
        else:
            reason = _as_int(desc, "drop_reason_desc")

        ip = get("IP") or _NO_IP
        if type(ip) is not dict:
            raise _bad("IP", "an object", ip)
        l4 = get("l4")
        protocol, port, source_port, flags = _l4_of(l4) if l4 else _NO_L4

        is_reply = get("is_reply")
        if is_reply is None:
            is_reply = True if get("reply") is True else None
        elif type(is_reply) is not bool:
            raise _bad("is_reply", "a boolean", is_reply)
        node = get("node_name")
        if node is None:
            node = _get(outer, "node_name", "nodeName") or ""

        src_ip = ip.get("source", "")
        dst_ip = ip.get("destination", "")
        uuid = get("uuid", "")
        if (
            type(time) is not str
            or type(uuid) is not str
            or type(src_ip) is not str
            or type(dst_ip) is not str
            or type(node) is not str
        ):
            # A null where a string belongs is an absent field; another type is malformed.
            time = _as_str(time, "time")
            uuid = _as_str(uuid, "uuid")
            src_ip = _as_str(src_ip, "IP.source")
            dst_ip = _as_str(dst_ip, "IP.destination")
            node = _as_str(node, "node_name")
        l7_raw = src_names = dst_names = in_denied = eg_denied = in_allowed = eg_allowed = None
        if not f.keys().isdisjoint(_RARE_KEYS):
            l7_raw = get("l7")
            src_names = get("source_names")
            dst_names = get("destination_names")
            in_denied = get("ingress_denied_by")
            eg_denied = get("egress_denied_by")
            in_allowed = get("ingress_allowed_by")
            eg_allowed = get("egress_allowed_by")
        return Flow(
            time=time,
            uuid=uuid,
            verdict=verdict,
            drop_reason=reason,
            direction=direction,
            source=self._endpoint(get("source"), "source"),
            destination=self._endpoint(get("destination"), "destination"),
            source_ip=src_ip,
            destination_ip=dst_ip,
            protocol=protocol,
            port=port,
            is_reply=is_reply,
            source_port=source_port,
            tcp_flags=flags,
            node_name=node,
            source_names=_as_str_tuple(src_names, "source_names") if src_names else (),
            destination_names=_as_str_tuple(dst_names, "destination_names") if dst_names else (),
            l7=_l7(l7_raw) if l7_raw else None,
            ingress_denied_by=_policies(in_denied, "ingress_denied_by") if in_denied else (),
            egress_denied_by=_policies(eg_denied, "egress_denied_by") if eg_denied else (),
            drop_reason_text=reason_text,
            ingress_allowed_by=_policies(in_allowed, "ingress_allowed_by") if in_allowed else (),
            egress_allowed_by=_policies(eg_allowed, "egress_allowed_by") if eg_allowed else (),
        )

    @staticmethod
    def _sub_type_reason(f: Mapping[str, Any]) -> int:
        event = _as_obj(_get(f, "event_type", "eventType"), "event_type")
        if _as_int(event.get("type"), "event_type.type") == 1:  # a drop event carries the reason
            return _as_int(_get(event, "sub_type", "subType"), "event_type.sub_type")
        return 0


_NO_L4: tuple[str, int, int, tuple[str, ...]] = ("", 0, 0, ())


def _l4_of(l4: object) -> tuple[str, int, int, tuple[str, ...]]:
    """A flow's protocol, destination port, source port and TCP flags."""
    if type(l4) is not dict:
        raise _bad("l4", "an object", l4)
    body = l4.get("TCP")
    if body is not None and type(body) is dict:
        raw = body.get("destination_port")
        if raw is None:
            raw = body.get("destinationPort", 0)
        port = (
            raw
            if type(raw) is int and 0 <= raw <= MAX_PORT
            else _as_int(raw, "l4.TCP.destination_port", MAX_PORT)
        )
        source_port, flags = _tcp_extra(body)
        return "TCP", port, source_port, flags
    protocol, port = _other_l4(l4)
    return protocol, port, _source_port(l4, protocol), ()


def _tcp_extra(body: Mapping[str, Any]) -> tuple[int, tuple[str, ...]]:
    """The source port and the flags set of a TCP header. Both are hints (telling replies
    from requests), so a value of the wrong shape reads as absent rather than refusing a
    flow the quick reader accepts."""
    port = body.get("source_port")
    if type(port) is not int or not 0 <= port <= MAX_PORT:
        port = _port_hint(_get(body, "source_port", "sourcePort"))
    flags = body.get("flags")
    if type(flags) is not dict or not flags:
        return port, ()
    key = tuple(flags.items())
    if len(key) > 4 or not all(type(v) is bool for _, v in key):
        return port, tuple(sorted(str(name) for name, on in key if on is True))
    names = _FLAG_NAMES.get(key)
    if names is None:
        names = tuple(sorted(str(name) for name, on in key if on is True))
        if len(_FLAG_NAMES) < 256:
            _FLAG_NAMES[key] = names
    return port, names


_FLAG_NAMES: dict[tuple[tuple[str, Any], ...], tuple[str, ...]] = {}
"""The few flag sets a capture has, read once each (the hot path parses millions)."""


def _source_port(l4: Mapping[str, Any], protocol: str) -> int:
    body = l4.get(protocol) if protocol in PORT_PROTOCOLS else None
    return _port_hint(_get(body, "source_port", "sourcePort")) if type(body) is dict else 0


def _port_hint(raw: Any) -> int:
    if type(raw) is str and raw.isdigit():
        raw = int(raw)
    return raw if type(raw) is int and 0 <= raw <= MAX_PORT else 0


def _other_l4(l4: Mapping[str, Any]) -> tuple[str, int]:
    for protocol in L4_PROTOCOLS:
        body = l4.get(protocol)
        if body is None:
            continue
        if type(body) is not dict:
            raise _bad(f"l4.{protocol}", "an object", body)
        if protocol in ICMP_PROTOCOLS:
            return protocol, _as_int(body.get("type"), f"l4.{protocol}.type", MAX_ICMP_TYPE)
        if protocol in PORT_PROTOCOLS:
            return protocol, _as_int(
                _get(body, "destination_port", "destinationPort"),
                f"l4.{protocol}.destination_port",
                MAX_PORT,
            )
        return protocol, 0
    return "", 0


def _snake_case(value: Any) -> Any:
    """A copy of a lowerCamelCase protojson object with the snake_case keys Hubble writes."""
    if type(value) is dict:
        return {_CAMEL_TO_SNAKE.get(k, k): _snake_case(v) for k, v in value.items()}
    if type(value) is list:
        return [_snake_case(v) for v in value]
    return value


def _l7(value: object) -> L7Info:
    body = _as_obj(value, "l7")
    l7_type = body.get("type")
    http_raw = body.get("http")
    dns_raw = body.get("dns")
    http = None
    dns = None
    if http_raw is not None:
        h = _as_obj(http_raw, "l7.http")
        http = HTTPInfo(
            method=_as_str(h.get("method"), "l7.http.method"),
            url=_as_str(h.get("url"), "l7.http.url"),
            code=_as_int(h.get("code"), "l7.http.code", MAX_PORT),
        )
    if dns_raw is not None:
        d = _as_obj(dns_raw, "l7.dns")
        dns = DNSInfo(
            query=_as_str(d.get("query"), "l7.dns.query"),
            ips=_as_str_tuple(d.get("ips"), "l7.dns.ips"),
            rcode=_as_int(d.get("rcode"), "l7.dns.rcode", MAX_PORT),
        )
    return L7Info(
        type=l7_type if type(l7_type) is str else str(_as_int(l7_type, "l7.type")),
        http=http,
        dns=dns,
    )


def _policies(value: object, field: str) -> tuple[PolicyRef, ...]:
    if type(value) is not list:
        raise _bad(field, "a list of policies", value)
    refs = []
    for item in value:
        p = _as_obj(item, f"{field}[]")
        refs.append(
            PolicyRef(
                name=_as_str(p.get("name"), f"{field}[].name"),
                namespace=_as_str(p.get("namespace"), f"{field}[].namespace"),
                kind=_as_str(p.get("kind"), f"{field}[].kind"),
            )
        )
    return tuple(refs)


_DEFAULT_PARSER = FlowParser()


def parse_record(obj: object) -> Record:
    """Parse one decoded JSON value into a Flow, LostEvents or OtherRecord."""
    return _DEFAULT_PARSER.parse(obj)


def parse_flow(obj: object) -> Flow:
    """Parse one decoded JSON value that must hold a flow."""
    record = _DEFAULT_PARSER.parse(obj)
    if not isinstance(record, Flow):
        raise FlowParseError(f"expected a flow record, got a {type(record).__name__} record")
    return record
