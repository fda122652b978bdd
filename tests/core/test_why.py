"""Why a flow was denied and what would admit it (``cpg_core._review.why``), as plain values: a flow
and the policies judged in, the answer out. The CLI's flags and exit codes are tested in
tests/cli/test_why_cli.py."""

from __future__ import annotations

from typing import Any

import pytest

from conftest import endpoint, flow_dict
from cpg_core import RequestError
from cpg_core._base.flow import Direction, Flow
from cpg_core._flows.parse import parse_flow
from cpg_core._review.why import explain_denial, merged_answers, traced_flows


def flow(**fields: Any) -> Flow:
    parsed = parse_flow(flow_dict(**fields))
    assert isinstance(parsed, Flow)
    return parsed


def cnp(name: str, **sections: Any) -> dict[str, Any]:
    return {
        "apiVersion": "cilium.io/v2",
        "kind": "CiliumNetworkPolicy",
        "metadata": {"name": name, "namespace": "shop"},
        "spec": {"endpointSelector": {"matchLabels": {"app": "cart"}}, **sections},
    }


FROM_FRONTEND = {
    "fromEndpoints": [{"matchLabels": {"app": "frontend"}}],
    "toPorts": [{"ports": [{"port": "9090", "protocol": "TCP"}]}],
}
CART = cnp("cart", ingress=[FROM_FRONTEND])


def test_a_policy_drop_names_the_policy_the_nearest_rule_and_the_rule_to_add() -> None:
    why = explain_denial(flow(), [CART])  # shop/frontend → shop/cart TCP/8080
    assert (why.verdict, why.drop_reason, why.drop_class) == ("DROPPED", "POLICY_DENIED", "policy")
    assert (why.direction, why.subject, why.policed_by) == ("ingress", "shop/cart", ("shop/cart",))
    assert not why.allowed
    (nearest,) = why.near_misses
    assert (nearest.policy, nearest.section, nearest.index) == ("shop/cart", "ingress", 0)
    assert nearest.misses == ("port: TCP/8080 is not in TCP/9090",)
    assert 'port: "8080"' in why.admit_yaml and "app: frontend" in why.admit_yaml
    assert "no rule admits it" in why.answer


def test_the_namespace_a_rule_adds_to_its_peers_is_what_misses() -> None:
    why = explain_denial(flow(src=endpoint("other", "frontend"), tcp=9090), [CART])
    assert why.near_misses[0].misses == ("peer: wants namespace shop (the peer is in other)",)


def test_policies_that_admit_the_flow_say_which_rule() -> None:
    why = explain_denial(flow(tcp=9090), [CART])
    assert why.allowed and why.allowed_by == "allowed by shop/cart ingress[0]"
    assert why.admit_yaml == ""


def test_no_policy_selecting_the_subject_allows_everything() -> None:
    why = explain_denial(flow(), [])
    assert why.allowed and why.policed_by == ()
    assert "no policy selects shop/cart for ingress" in why.answer


def test_a_matching_deny_rule_wins_and_no_allow_rule_is_offered() -> None:
    deny = cnp(
        "deny",
        ingress=[FROM_FRONTEND],
        ingressDeny=[{"fromEndpoints": [{"matchLabels": {"app": "frontend"}}]}],
    )
    why = explain_denial(flow(tcp=9090, reason="POLICY_DENY"), [deny])
    assert not why.allowed and why.drop_class == "explicit_deny"
    (rule,) = why.deny
    assert (rule.policy, rule.section, rule.misses) == ("shop/deny", "ingressDeny", ())
    assert why.admit_yaml == "" and "no allow rule overrides a deny" in why.fix


def test_a_drop_no_policy_causes_is_named_with_its_fix() -> None:
    why = explain_denial(flow(reason="CT_MAP_INSERTION_FAILED"), [CART])
    assert why.drop_class == "infra" and why.policed_by == ()
    assert "no policy causes or fixes it" in why.answer
    assert why.fix.startswith("https://docs.cilium.io/")


def test_a_flow_described_by_hand_is_judged_at_each_pod_end() -> None:
    flows = traced_flows("shop/frontend", "shop/cart", "9090")
    assert [f.direction for f in flows] == [int(Direction.EGRESS), int(Direction.INGRESS)]
    answers = [explain_denial(f, [CART]) for f in flows]
    assert [(w.direction, w.allowed, w.verdict) for w in answers] == [
        ("egress", True, "TRACED"),
        ("ingress", True, "TRACED"),
    ]
    assert len(traced_flows("world", "shop/cart", "8080")) == 1  # the world has no egress


@pytest.mark.parametrize(
    ("source", "destination", "port", "words"),
    [
        ("world", "1.2.3.4", "80", "neither end is a pod"),
        ("shop/a", "shop/b", "80/XTP", "the protocol is TCP, UDP, SCTP, ICMP (IPv4) or ICMPv6"),
        ("shop/a", "shop/b", "http", "is not PORT/PROTOCOL"),
    ],
)
def test_a_flow_that_cannot_be_described_is_a_request_error(
    source: str, destination: str, port: str, words: str
) -> None:
    with pytest.raises(RequestError) as raised:
        traced_flows(source, destination, port)
    assert words in str(raised.value)


def test_the_same_kind_of_flow_is_answered_once_with_its_count() -> None:
    first, again = flow(), flow(time="2026-11-02T10:05:00Z")
    answered = [(f, explain_denial(f, [CART])) for f in (first, again)]
    (merged,) = merged_answers(answered)
    assert merged.flows == 2 and not merged.allowed
