"""Per-flow decision: what a flow means for policy generation (ARCHITECTURE §D1–§D5).

Every flow lands in exactly one bucket. Only ``CANDIDATE`` flows may become allow rules.
"""

from __future__ import annotations

from enum import StrEnum

import attrs

from cpg_core._base.dropreasons import (
    AUTH_REQUIRED,
    DENIED_BY_LB_SRC_RANGE_CHECK,
    POLICY_DENIED,
    POLICY_DENY,
    DropClass,
    classify_reason,
)
from cpg_core._base.flow import Direction, Endpoint, Flow, Verdict


class Decision(StrEnum):
    CANDIDATE = "candidate"
    """A drop no policy allowed: the input of policy synthesis."""
    EXPLICIT_DENY = "explicit_deny"
    """A deny rule matched (POLICY_DENY, 181): never turned into an allow rule."""
    AUTH_REQUIRED = "auth_required"
    """Mutual authentication was required (189): a finding, not a missing allow rule."""
    LB_SOURCE_RANGE = "lb_source_range"
    """A LoadBalancer source-range check denied it (177): a Service setting, not a CNP."""
    INFRA = "infra"
    TRANSIENT = "transient"
    NOISE = "noise"
    REPLY = "reply"
    """A reply packet: allowing it would open the reverse direction, so it is skipped."""
    NOT_A_DROP = "not_a_drop"
    """FORWARDED, REDIRECTED, TRACED… (and AUDIT without --include-audit): context only."""
    IGNORED_PROTOCOL = "ignored_protocol"
    """Skipped by the user's --ignore-protocol."""
    IGNORED_REASON = "ignored_reason"
    """A drop skipped by the user's --ignore-drop-reason."""
    OUTSIDE_WINDOW = "outside_window"
    """Outside the user's --since/--until: counted, not used."""
    JUDGED_REPLY = "judged_reply"
    """Learning: a flow Hubble did not mark, judged a reply by its TCP flags or ports."""
    ALREADY_ALLOWED = "already_allowed"
    """Learning: a flow a policy of the cluster already allowed (``*_allowed_by``)."""
    NODE_LOCAL = "node_local"
    """Learning: the node's own traffic to its pod, admitted by allow-localhost: always."""
    FILTERED = "filtered"
    """Not selected by the user's flow filters (--from-pod, --to-label…): counted, not used."""


@attrs.frozen(slots=True)
class DecideOptions:
    """How flows are classified: audit and learned traffic as candidates, the protocols
    and drop reasons to skip."""

    include_audit: bool = False
    ignore_protocols: frozenset[str] = frozenset()
    """Lower-case protocol names: tcp, udp, sctp, icmpv4, icmpv6."""
    ignore_reasons: frozenset[int] = frozenset()
    """DropReason numbers whose drops are skipped (counted, never classified)."""
    learn: bool = False
    """FORWARDED, REDIRECTED and AUDIT flows are candidates too (learning from today's
    traffic: an audit-mode policy lets AUDIT flows through)."""
    learn_allowed: bool = False
    """With ``learn``: flows a policy already allowed are candidates too (rewriting a folder)."""
    allow_localhost: bool = True
    """Cilium's allow-localhost: always: the node's traffic to its pods needs no rule."""


_CLASS_DECISION = {
    DropClass.INFRA: Decision.INFRA,
    DropClass.TRANSIENT: Decision.TRANSIENT,
    DropClass.NOISE: Decision.NOISE,
}
_POLICY_FINDINGS = {
    POLICY_DENY: Decision.EXPLICIT_DENY,
    AUTH_REQUIRED: Decision.AUTH_REQUIRED,
    DENIED_BY_LB_SRC_RANGE_CHECK: Decision.LB_SOURCE_RANGE,
}
"""Drop reasons that are findings (never allow rules), each with its own decision; the
finding's wording and fix are in ``_advice``."""
FINDING_DECISIONS = frozenset(_POLICY_FINDINGS.values())
"""Decisions that become findings in the cluster-health report."""
DECISION_LABELS = (
    (Decision.CANDIDATE, "candidates (denied, no allow rule)"),
    (Decision.REPLY, "replies (skipped)"),
    (Decision.NOT_A_DROP, "not a drop (forwarded, traced…)"),
    (Decision.INFRA, "infrastructure drops"),
    (Decision.TRANSIENT, "transient drops"),
    (Decision.NOISE, "noise"),
    (Decision.EXPLICIT_DENY, "explicit deny (never allowed)"),
    (Decision.AUTH_REQUIRED, "auth required"),
    (Decision.LB_SOURCE_RANGE, "LB source range denied"),
    (Decision.IGNORED_PROTOCOL, "ignored protocol"),
    (Decision.IGNORED_REASON, "ignored drop reason"),
    (Decision.OUTSIDE_WINDOW, "outside the time window"),
    (Decision.JUDGED_REPLY, "replies (judged by flags/ports)"),
    (Decision.ALREADY_ALLOWED, "already allowed by a policy"),
    (Decision.NODE_LOCAL, "node to own pods (allow-localhost)"),
    (Decision.FILTERED, "not selected by the flow filters"),
)
"""Each decision as the run summary lists it, in that order."""
_DROPPED = int(Verdict.DROPPED)
_AUDIT = int(Verdict.AUDIT)
_DEFAULT = DecideOptions()


def decide(flow: Flow, options: DecideOptions = _DEFAULT) -> Decision:
    """The bucket of one flow. Order matters: verdict, user filters, drop class, findings,
    replies, then candidate."""
    verdict = flow.verdict
    if verdict == _DROPPED:
        audit = False
    elif options.learn and (verdict in _LEARNED or verdict == _AUDIT):
        # AUDIT is traffic that works today too: an audit-mode policy let it through
        return _learned(flow, options)
    elif verdict == _AUDIT and options.include_audit:
        audit = True
    else:
        return Decision.NOT_A_DROP
    if not audit and options.ignore_reasons and flow.drop_reason in options.ignore_reasons:
        return Decision.IGNORED_REASON
    if options.ignore_protocols and flow.protocol.lower() in options.ignore_protocols:
        return Decision.IGNORED_PROTOCOL
    if not audit:
        reason = flow.drop_reason
        finding = _POLICY_FINDINGS.get(reason)
        if finding is not None:
            return finding
        by_class = _CLASS_DECISION.get(classify_reason(reason))
        if by_class is not None:
            return by_class
    if flow.is_reply:
        return Decision.REPLY
    return Decision.CANDIDATE


def candidate_by_key(options: DecideOptions) -> bool:
    """Whether, under ``options``, every DROPPED POLICY_DENIED flow is a CANDIDATE when it
    is not a reply and a REPLY when it is, whatever else it carries (its protocol, its
    ends, its IPs). A quick path may then count such a flow by its allow-entry key and its
    reply flag without asking :func:`decide`. This is the one place that says which
    options break that; ``tests/core/test_decide.py`` walks every option against it."""
    return not options.ignore_protocols and POLICY_DENIED not in options.ignore_reasons


def not_a_drop_by_verdict(options: DecideOptions) -> bool:
    """Whether, under ``options``, every flow whose verdict is neither DROPPED nor AUDIT is
    NOT_A_DROP (so a quick path may count it by its time alone)."""
    return not options.learn


_LEARNED = frozenset({int(Verdict.FORWARDED), int(Verdict.REDIRECTED)})
_NOISE_LABELS = ("reserved:health", "reserved:unmanaged", "reserved:init")
EPHEMERAL_PORTS = 32768
"""Linux's default ``ip_local_port_range`` starts here: a destination port at or above it
with a lower source port is a client's port, so the flow is a reply."""
_ICMP_REPLIES = {("ICMPv4", 0), ("ICMPv6", 129)}


def _learned(flow: Flow, options: DecideOptions) -> Decision:
    """What a flow that works today means when learning (ARCHITECTURE §D27)."""
    if options.ignore_protocols and flow.protocol.lower() in options.ignore_protocols:
        return Decision.IGNORED_PROTOCOL
    if flow.is_reply:
        return Decision.REPLY
    if flow.is_reply is None and looks_like_reply(flow):
        return Decision.JUDGED_REPLY
    ingress = flow.direction == int(Direction.INGRESS)
    if not options.learn_allowed and (
        flow.ingress_allowed_by if ingress else flow.egress_allowed_by
    ):
        return Decision.ALREADY_ALLOWED
    if options.allow_localhost and ingress and _is_host(flow.source):
        return Decision.NODE_LOCAL
    if any(label in _NOISE_LABELS for label in (*flow.source.labels, *flow.destination.labels)):
        return Decision.NOISE
    return Decision.CANDIDATE


def _is_host(endpoint: Endpoint) -> bool:
    return endpoint.identity == 1 or "reserved:host" in endpoint.labels


def looks_like_reply(flow: Flow) -> bool:
    """A reply Hubble did not mark: SYN+ACK; an ICMP echo reply; else a flow from a
    well-known port to a higher one, or to an ephemeral port from a lower one."""
    flags = flow.tcp_flags
    if "SYN" in flags:
        return "ACK" in flags
    if (flow.protocol, flow.port) in _ICMP_REPLIES:
        return True
    source, destination = flow.source_port, flow.port
    if not source or not destination or flow.protocol not in ("TCP", "UDP", "SCTP"):
        return False
    if source < 1024 <= destination:
        return True
    return destination >= EPHEMERAL_PORTS > source
