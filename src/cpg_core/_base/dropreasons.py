"""The DropReason table: every Hubble drop reason, its number and the class cpg gives it.

Classes decide what a drop means for policy generation: only ``policy`` (and the
unknown/absent reason) can ever become an allow rule; the others are reported.
"""

from __future__ import annotations

from enum import StrEnum

from cpg_core.text import shown


class DropClass(StrEnum):
    POLICY = "policy"
    INFRA = "infra"
    TRANSIENT = "transient"
    NOISE = "noise"
    UNKNOWN = "unknown"


# Cilium v1.19.4 flow.proto DropReason values. Bumped when the table changes.
CLASSIFIER_VERSION = "1.0.0-cilium1.19.4"

_P, _I, _T, _N, _U = (
    DropClass.POLICY,
    DropClass.INFRA,
    DropClass.TRANSIENT,
    DropClass.NOISE,
    DropClass.UNKNOWN,
)

# code -> (enum name, class). Reason 0 means "no reason given": it is ``unknown`` on
# purpose (ARCHITECTURE §D1), so such drops are candidates flagged as unclassified.
DROP_REASONS: dict[int, tuple[str, DropClass]] = {
    0: ("DROP_REASON_UNKNOWN", _U),
    130: ("INVALID_SOURCE_MAC", _I),
    131: ("INVALID_DESTINATION_MAC", _I),
    132: ("INVALID_SOURCE_IP", _I),
    133: ("POLICY_DENIED", _P),
    134: ("INVALID_PACKET_DROPPED", _I),
    135: ("CT_TRUNCATED_OR_INVALID_HEADER", _I),
    136: ("CT_MISSING_TCP_ACK_FLAG", _I),
    137: ("CT_UNKNOWN_L4_PROTOCOL", _I),
    138: ("CT_CANNOT_CREATE_ENTRY_FROM_PACKET", _I),
    139: ("UNSUPPORTED_L3_PROTOCOL", _I),
    140: ("MISSED_TAIL_CALL", _I),
    141: ("ERROR_WRITING_TO_PACKET", _I),
    142: ("UNKNOWN_L4_PROTOCOL", _I),
    143: ("UNKNOWN_ICMPV4_CODE", _I),
    144: ("UNKNOWN_ICMPV4_TYPE", _I),
    145: ("UNKNOWN_ICMPV6_CODE", _I),
    146: ("UNKNOWN_ICMPV6_TYPE", _I),
    147: ("ERROR_RETRIEVING_TUNNEL_KEY", _I),
    148: ("ERROR_RETRIEVING_TUNNEL_OPTIONS", _I),
    149: ("INVALID_GENEVE_OPTION", _I),
    150: ("UNKNOWN_L3_TARGET_ADDRESS", _I),
    151: ("STALE_OR_UNROUTABLE_IP", _T),
    152: ("NO_MATCHING_LOCAL_CONTAINER_FOUND", _T),
    153: ("ERROR_WHILE_CORRECTING_L3_CHECKSUM", _I),
    154: ("ERROR_WHILE_CORRECTING_L4_CHECKSUM", _I),
    155: ("CT_MAP_INSERTION_FAILED", _I),
    156: ("INVALID_IPV6_EXTENSION_HEADER", _I),
    157: ("IP_FRAGMENTATION_NOT_SUPPORTED", _I),
    158: ("SERVICE_BACKEND_NOT_FOUND", _I),
    160: ("NO_TUNNEL_OR_ENCAPSULATION_ENDPOINT", _I),
    161: ("FAILED_TO_INSERT_INTO_PROXYMAP", _I),
    162: ("REACHED_EDT_RATE_LIMITING_DROP_HORIZON", _I),
    163: ("UNKNOWN_CONNECTION_TRACKING_STATE", _I),
    164: ("LOCAL_HOST_IS_UNREACHABLE", _I),
    165: ("NO_CONFIGURATION_AVAILABLE_TO_PERFORM_POLICY_DECISION", _T),
    166: ("UNSUPPORTED_L2_PROTOCOL", _I),
    167: ("NO_MAPPING_FOR_NAT_MASQUERADE", _I),
    168: ("UNSUPPORTED_PROTOCOL_FOR_NAT_MASQUERADE", _I),
    169: ("FIB_LOOKUP_FAILED", _I),
    170: ("ENCAPSULATION_TRAFFIC_IS_PROHIBITED", _I),
    171: ("INVALID_IDENTITY", _T),
    172: ("UNKNOWN_SENDER", _T),
    173: ("NAT_NOT_NEEDED", _N),
    174: ("IS_A_CLUSTERIP", _N),
    175: ("FIRST_LOGICAL_DATAGRAM_FRAGMENT_NOT_FOUND", _I),
    176: ("FORBIDDEN_ICMPV6_MESSAGE", _I),
    177: ("DENIED_BY_LB_SRC_RANGE_CHECK", _P),
    178: ("SOCKET_LOOKUP_FAILED", _I),
    179: ("SOCKET_ASSIGN_FAILED", _I),
    180: ("PROXY_REDIRECTION_NOT_SUPPORTED_FOR_PROTOCOL", _I),
    181: ("POLICY_DENY", _P),
    182: ("VLAN_FILTERED", _I),
    183: ("INVALID_VNI", _I),
    184: ("INVALID_TC_BUFFER", _I),
    185: ("NO_SID", _I),
    186: ("MISSING_SRV6_STATE", _I),
    187: ("NAT46", _I),
    188: ("NAT64", _I),
    189: ("AUTH_REQUIRED", _P),
    190: ("CT_NO_MAP_FOUND", _I),
    191: ("SNAT_NO_MAP_FOUND", _I),
    192: ("INVALID_CLUSTER_ID", _I),
    193: ("UNSUPPORTED_PROTOCOL_FOR_DSR_ENCAP", _I),
    194: ("NO_EGRESS_GATEWAY", _I),
    195: ("UNENCRYPTED_TRAFFIC", _I),
    196: ("TTL_EXCEEDED", _T),
    197: ("NO_NODE_ID", _I),
    198: ("DROP_RATE_LIMITED", _I),
    199: ("IGMP_HANDLED", _N),
    200: ("IGMP_SUBSCRIBED", _N),
    201: ("MULTICAST_HANDLED", _N),
    202: ("DROP_HOST_NOT_READY", _T),
    203: ("DROP_EP_NOT_READY", _T),
    204: ("DROP_NO_EGRESS_IP", _I),
    205: ("DROP_PUNT_PROXY", _N),
}

REASON_CODES: dict[str, int] = {name: code for code, (name, _) in DROP_REASONS.items()}

POLICY_DENIED = 133
POLICY_DENY = 181
AUTH_REQUIRED = 189
DENIED_BY_LB_SRC_RANGE_CHECK = 177

# Sentinel for a reason given only as a name this table does not know.
UNRECOGNISED_REASON = -1


def classify_reason(code: int) -> DropClass:
    """Class of a DropReason number; numbers missing from the table are ``unknown``."""
    entry = DROP_REASONS.get(code)
    return entry[1] if entry is not None else DropClass.UNKNOWN


def reason_name(code: int) -> str:
    """Enum name of a DropReason number, or ``DROP_REASON_<n>`` for numbers cpg does not know."""
    entry = DROP_REASONS.get(code)
    if entry is not None:
        return entry[0]
    return "DROP_REASON_UNRECOGNISED" if code == UNRECOGNISED_REASON else f"DROP_REASON_{code}"


def is_known_reason(code: int) -> bool:
    return code in DROP_REASONS


REMEDIATION: dict[str, str] = {
    "CT_MAP_INSERTION_FAILED": "https://docs.cilium.io/en/stable/operations/troubleshooting/#handling-drop-ct-map-insertion-failed",
    "SERVICE_BACKEND_NOT_FOUND": "https://docs.cilium.io/en/stable/operations/troubleshooting/#service-backend-not-found",
    "FIB_LOOKUP_FAILED": "https://docs.cilium.io/en/stable/operations/troubleshooting/#fib-lookup-failed",
    "UNENCRYPTED_TRAFFIC": "https://docs.cilium.io/en/stable/operations/encryption/",
    "NO_EGRESS_GATEWAY": "https://docs.cilium.io/en/stable/network/egress-gateway/egress-gateway-troubleshooting/",
    "DROP_NO_EGRESS_IP": "https://docs.cilium.io/en/stable/network/egress-gateway/egress-gateway-troubleshooting/",
}
DROP_REASON_DOCS = "https://docs.cilium.io/en/stable/observability/hubble/#dropreason"


def remediation(code: int) -> str:
    """A link to the fix for a drop reason, or "" when there is no specific one."""
    return REMEDIATION.get(reason_name(code), "")


def levenshtein(a: str, b: str) -> int:
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        previous = current
    return previous[-1]


def suggest_reasons(text: str, limit: int = 5) -> list[str]:
    """The reason names closest to a misspelt one, nearest first."""
    wanted = text.strip().upper()
    threshold = min(10, len(wanted.encode("utf-8")) // 2 + 2)
    scored = sorted((levenshtein(wanted, name), name) for name in REASON_CODES)
    return [name for distance, name in scored if distance <= threshold][:limit]


def parse_reason_name(text: str) -> int:
    """The code of a DropReason name (any case); ValueError with suggestions when unknown."""
    code = REASON_CODES.get(text.strip().upper())
    if code is not None:
        return code
    close = suggest_reasons(text)
    hint = f"did you mean {', '.join(close)}? " if close else ""
    raise ValueError(
        f"unknown drop reason {shown(text)}; {hint}see {DROP_REASON_DOCS} for the full list"
    )
