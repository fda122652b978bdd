"""Per-flow decision: what a flow means for policy generation (ARCHITECTURE §D1–§D5).

Every flow lands in exactly one bucket. Only ``CANDIDATE`` flows may become allow rules.
"""

from __future__ import annotations

from enum import StrEnum

import attrs

from cpg_core._dropreasons import (
    AUTH_REQUIRED,
    DENIED_BY_LB_SRC_RANGE_CHECK,
    POLICY_DENY,
    DropClass,
    classify_reason,
)
from cpg_core._flow import Flow, Verdict


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
    FILTERED = "filtered"
    """Not selected by the user's flow filters (--from-pod, --to-label…): counted, not used."""


@attrs.frozen(slots=True)
class DecideOptions:
    include_audit: bool = False
    ignore_protocols: frozenset[str] = frozenset()
    """Lower-case protocol names: tcp, udp, sctp, icmpv4, icmpv6."""
    ignore_reasons: frozenset[int] = frozenset()
    """DropReason numbers whose drops are skipped (counted, never classified)."""


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
    (Decision.OUTSIDE_WINDOW, "outside --since/--until"),
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
