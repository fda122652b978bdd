from __future__ import annotations

import pytest

from conftest import flow_dict
from cpg_core._decide import DecideOptions, Decision, decide
from cpg_core._parse import parse_flow


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({}, Decision.CANDIDATE),
        ({"reason": None}, Decision.CANDIDATE),  # no reason given
        ({"reason": "SOME_FUTURE_REASON", "drop_reason": 250}, Decision.CANDIDATE),
        ({"reason": "POLICY_DENY"}, Decision.EXPLICIT_DENY),
        ({"reason": "AUTH_REQUIRED"}, Decision.AUTH_REQUIRED),
        ({"reason": "DENIED_BY_LB_SRC_RANGE_CHECK"}, Decision.LB_SOURCE_RANGE),
        ({"reason": "CT_MAP_INSERTION_FAILED"}, Decision.INFRA),
        ({"reason": "SERVICE_BACKEND_NOT_FOUND"}, Decision.INFRA),
        ({"reason": "DROP_EP_NOT_READY"}, Decision.TRANSIENT),
        ({"reason": "IS_A_CLUSTERIP"}, Decision.NOISE),
        ({"reply": True}, Decision.REPLY),
        ({"verdict": "FORWARDED", "reason": None}, Decision.NOT_A_DROP),
        ({"verdict": "REDIRECTED", "reason": None}, Decision.NOT_A_DROP),
        ({"verdict": "TRACED", "reason": None}, Decision.NOT_A_DROP),
        ({"verdict": "ERROR", "reason": None}, Decision.NOT_A_DROP),
        ({"verdict": "AUDIT", "reason": None}, Decision.NOT_A_DROP),
    ],
)
def test_each_decision(kwargs: dict[str, object], expected: Decision) -> None:
    assert decide(parse_flow(flow_dict(**kwargs))) is expected  # type: ignore[arg-type]


def test_audit_is_a_candidate_only_with_include_audit() -> None:
    flow = parse_flow(flow_dict(verdict="AUDIT", reason=None))
    assert decide(flow, DecideOptions(include_audit=True)) is Decision.CANDIDATE
    assert decide(flow, DecideOptions()) is Decision.NOT_A_DROP


def test_an_explicit_deny_is_never_a_candidate_whatever_else_holds() -> None:
    for reply in (True, False, None):
        flow = parse_flow(flow_dict(reason="POLICY_DENY", reply=reply))
        assert decide(flow, DecideOptions(include_audit=True)) is Decision.EXPLICIT_DENY


def test_a_reply_drop_is_never_a_candidate() -> None:
    assert decide(parse_flow(flow_dict(reply=True, reason=None))) is Decision.REPLY


def test_infra_wins_over_reply() -> None:
    flow = parse_flow(flow_dict(reply=True, reason="CT_MAP_INSERTION_FAILED"))
    assert decide(flow) is Decision.INFRA


def test_ignore_protocol() -> None:
    options = DecideOptions(ignore_protocols=frozenset({"icmpv4"}))
    assert decide(parse_flow(flow_dict(icmp4=8)), options) is Decision.IGNORED_PROTOCOL
    assert decide(parse_flow(flow_dict(tcp=80)), options) is Decision.CANDIDATE
    # Forwarded flows stay context, whatever their protocol.
    forwarded = parse_flow(flow_dict(icmp4=8, verdict="FORWARDED", reason=None))
    assert decide(forwarded, options) is Decision.NOT_A_DROP
