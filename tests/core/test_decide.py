from __future__ import annotations

import pytest

from conftest import flow_dict
from cpg_core._flows.decide import DecideOptions, Decision, decide
from cpg_core._flows.parse import parse_flow


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


# What the quick paths rely on, walked over every decision option: a new option without a
# sample value below fails the first test, so nobody adds one the quick path silently ignores.

OPTION_SAMPLES: dict[str, list[object]] = {
    "include_audit": [True],
    "ignore_protocols": [frozenset({"tcp"}), frozenset({"icmpv4"}), frozenset({"sctp"})],
    "ignore_reasons": [frozenset({133}), frozenset({181}), frozenset({133, 5})],
    "learn": [True],
    "learn_allowed": [True],
    "allow_localhost": [False],
}
"""A non-default value (or several) of every DecideOptions field."""


def _option_sets() -> list[DecideOptions]:
    import itertools

    singles = [
        DecideOptions(**{name: value})  # type: ignore[arg-type]
        for name, values in OPTION_SAMPLES.items()
        for value in values
    ]
    pairs = [
        DecideOptions(**{a: OPTION_SAMPLES[a][0], b: OPTION_SAMPLES[b][0]})  # type: ignore[arg-type]
        for a, b in itertools.combinations(OPTION_SAMPLES, 2)
    ]
    return [DecideOptions(), *singles, *pairs]


def _policy_denied(reply: bool) -> list[object]:
    """DROPPED POLICY_DENIED flows that differ in everything but their verdict, reason and
    reply flag: protocols, ends (the host, Cilium's noise identities, the world), IPs, an
    allowed-by list, TCP flags that look like a reply."""
    from conftest import WORLD, endpoint

    host = {"identity": 1, "labels": ["reserved:host"]}
    health = {"identity": 4, "labels": ["reserved:health"]}
    variants: list[dict[str, object]] = [
        {},
        {"udp": 53},
        {"icmp4": 8},
        {"icmp6": 128},
        {"sctp": 3868},
        {"src": host},
        {"src": health},
        {"src": WORLD, "src_ip": "8.8.8.8"},
        {"dst": endpoint("kube-system", "dns"), "direction": "EGRESS", "udp": 53},
        {"ingress_allowed_by": [{"name": "p"}]},
        {"tcp": 40000, "src_ip": "10.0.0.9"},
    ]
    return [parse_flow(flow_dict(reply=reply, **v)) for v in variants]  # type: ignore[arg-type]


def test_every_decision_option_has_a_sample() -> None:
    import attrs

    assert set(OPTION_SAMPLES) == {f.name for f in attrs.fields(DecideOptions)}


@pytest.mark.parametrize("options", _option_sets(), ids=repr)
def test_a_policy_denied_drop_is_decided_by_its_key_exactly_when_the_gate_says(
    options: DecideOptions,
) -> None:
    """``candidate_by_key`` lets the quick path count a DROPPED POLICY_DENIED flow by its
    entry key and reply flag: then every such flow is a CANDIDATE (a REPLY when it is one)
    whatever else it carries; where it says no, some such flow is decided otherwise (the
    gate is not stricter than it needs to be)."""
    from cpg_core._flows.decide import candidate_by_key

    decided = [decide(f, options) for f in _policy_denied(False)]  # type: ignore[arg-type]
    replies = [decide(f, options) for f in _policy_denied(True)]  # type: ignore[arg-type]
    uniform = all(d is Decision.CANDIDATE for d in decided) and all(
        d is Decision.REPLY for d in replies
    )
    assert candidate_by_key(options) == uniform


@pytest.mark.parametrize("options", _option_sets(), ids=repr)
def test_a_flow_that_is_no_drop_is_decided_by_its_verdict_exactly_when_the_gate_says(
    options: DecideOptions,
) -> None:
    from cpg_core._flows.decide import not_a_drop_by_verdict

    flows = [
        parse_flow(flow_dict(verdict=verdict, reason=None, **variant))  # type: ignore[arg-type]
        for verdict in ("FORWARDED", "REDIRECTED", "TRACED", "TRANSLATED", "ERROR")
        for variant in ({}, {"reply": True}, {"udp": 53}, {"src": {"identity": 1}})
    ]
    uniform = all(decide(f, options) is Decision.NOT_A_DROP for f in flows)
    assert not_a_drop_by_verdict(options) == uniform
