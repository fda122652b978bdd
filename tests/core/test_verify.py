"""verify (``cpg_core._review.verify``) as plain values: do these policies admit every candidate
flow cpg can express, and no explicitly denied one? The command is tested in
tests/cli/test_verify_cli.py."""

from __future__ import annotations

from typing import Any

from conftest import WORLD, endpoint, flow_dict
from cpg_core._base.flow import Flow
from cpg_core._flows.parse import parse_flow
from cpg_core._review.verify import verify_flows


def flow(**fields: Any) -> Flow:
    parsed = parse_flow(flow_dict(**fields))
    assert isinstance(parsed, Flow)
    return parsed


CART = {
    "apiVersion": "cilium.io/v2",
    "kind": "CiliumNetworkPolicy",
    "metadata": {"name": "cpg-cart", "namespace": "shop"},
    "spec": {
        "endpointSelector": {"matchLabels": {"app": "cart"}},
        "ingress": [
            {
                "fromEndpoints": [{"matchLabels": {"app": "frontend"}}],
                "toPorts": [{"ports": [{"port": "8080", "protocol": "TCP"}]}],
            }
        ],
    },
}


def test_each_kind_of_candidate_is_checked_once_with_its_count() -> None:
    again = flow(time="2026-11-02T10:01:00Z")
    report = verify_flows([flow(), again, flow(src=endpoint("shop", "admin"))], [CART])
    assert [(c.kind, c.traffic, c.flows, c.allowed) for c in report.checks] == [
        ("candidate", "ingress shop/admin → shop/cart TCP/8080", 1, False),
        ("candidate", "ingress shop/frontend → shop/cart TCP/8080", 2, True),
    ]
    assert not report.passed


def test_an_explicitly_denied_flow_the_policies_admit_fails_the_check() -> None:
    denied = flow(reason="POLICY_DENY")  # a deny rule dropped it; CART would admit it
    (check,) = verify_flows([denied], [CART]).checks
    assert (check.kind, check.allowed) == ("explicit_deny", True)
    assert not verify_flows([denied], [CART]).passed
    assert verify_flows([flow()], [CART]).passed


def test_a_pod_hubble_called_world_is_judged_as_that_pod() -> None:
    frontend = endpoint("shop", "frontend", pod_name="frontend-1")
    seen = flow(src=frontend, src_ip="10.0.0.7")
    as_world = flow(src=WORLD, src_ip="10.0.0.7", time="2026-11-02T10:01:00Z")
    report = verify_flows([seen, as_world], [CART])
    assert [c.allowed for c in report.checks] == [True, True]  # the rule for frontend admits it
    assert report.passed and report.unexpressible == 0
    alone = verify_flows([as_world], [CART])  # no pod has that address: a world peer
    assert [c.allowed for c in alone.checks] == [False]


def test_infrastructure_drops_and_forwarded_flows_are_not_checked() -> None:
    report = verify_flows(
        [flow(reason="CT_MAP_INSERTION_FAILED"), flow(verdict="FORWARDED", reason=None)], [CART]
    )
    assert report.checks == () and not report.passed and report.verdict == "cannot_judge"
