"""One CRD matcher answers both verify ("does this policy admit the flow?") and merge ("does a
rule a human wrote already allow this entry?"). These are the cases where the two former
copies disagreed; each is pinned for both questions."""

from __future__ import annotations

from typing import Any

from conftest import WORLD, endpoint, flow_dict
from cpg_core._base.flow import Flow
from cpg_core._base.rules import Atom, CidrPeer, EndpointPeer, EntityPeer
from cpg_core._flows.parse import parse_flow
from cpg_core._policy.matcher import covered_by, match_flow

FRONTEND = EndpointPeer("shop", (("app", "frontend"),))
PLAIN = flow_dict()  # shop/frontend -> shop/cart, TCP/8080, ingress


def both(rule: dict[str, Any], atom: Atom, flow: dict[str, Any] = PLAIN) -> tuple[bool, bool]:
    """(merge: covered?, verify: admitted?) for one ingress or egress rule."""
    direction = atom.direction
    target = "cart" if direction == "ingress" else "frontend"
    policy = {
        "apiVersion": "cilium.io/v2",
        "kind": "CiliumNetworkPolicy",
        "metadata": {"name": "human", "namespace": "shop"},
        "spec": {"endpointSelector": {"matchLabels": {"app": target}}, direction: [rule]},
    }
    parsed = parse_flow(flow)
    assert isinstance(parsed, Flow)
    return covered_by(atom, [rule], "shop"), match_flow([policy], parsed).allowed


def test_protocols_are_matched_as_the_crd_spells_them() -> None:
    # merge did not upper-case, verify did: "tcp" is not a CRD value, so it matches nothing.
    rule = {"toPorts": [{"ports": [{"port": "8080", "protocol": "tcp"}]}]}
    assert both(rule, Atom("ingress", FRONTEND, "TCP", 8080)) == (False, False)
    rule = {"toPorts": [{"ports": [{"port": "8080", "protocol": "TCP"}]}]}
    assert both(rule, Atom("ingress", FRONTEND, "TCP", 8080)) == (True, True)


def test_a_wider_cidr_covers_the_address() -> None:
    # merge compared CIDR strings; verify checked containment.
    flow = flow_dict(
        src=endpoint("shop", "frontend"), dst=WORLD, dst_ip="10.1.2.3", direction="EGRESS"
    )
    atom = Atom("egress", CidrPeer("10.1.2.3/32"), "TCP", 8080)
    assert both({"toCIDR": ["10.0.0.0/8"]}, atom, flow) == (True, True)
    assert both({"toCIDRSet": [{"cidr": "10.0.0.0/8", "except": ["10.1.0.0/16"]}]}, atom, flow) == (
        False,
        False,
    )
    assert both({"toCIDR": ["192.168.0.0/16"]}, atom, flow) == (False, False)


def test_the_cluster_entity_covers_cluster_peers() -> None:
    # merge knew only the peer's own entity name and "all".
    assert both({"fromEntities": ["cluster"]}, Atom("ingress", FRONTEND, "TCP", 8080)) == (
        True,
        True,
    )
    host = flow_dict(src={"identity": 1, "labels": ["reserved:host"]})
    assert both(
        {"fromEntities": ["cluster"]}, Atom("ingress", EntityPeer("host"), "TCP", 8080), host
    ) == (
        True,
        True,
    )
    assert both({"fromEntities": ["world"]}, Atom("ingress", FRONTEND, "TCP", 8080)) == (
        False,
        False,
    )


def test_a_rule_without_peers_selects_every_peer() -> None:
    # merge required an endpoint selector for an endpoint peer.
    rule = {"toPorts": [{"ports": [{"port": "8080"}]}]}
    assert both(rule, Atom("ingress", FRONTEND, "TCP", 8080)) == (True, True)


def test_a_broader_selector_covers_and_an_unknown_label_does_not() -> None:
    # merge required matchLabels equal to cpg's own.
    broader = {
        "fromEndpoints": [
            {
                "matchExpressions": [
                    {"key": "app", "operator": "In", "values": ["frontend", "admin"]}
                ]
            }
        ]
    }
    assert both(broader, Atom("ingress", FRONTEND, "TCP", 8080)) == (True, True)
    # The flow's pod has every label; an entry knows only the labels cpg selected, so a
    # selector that excludes a label cpg did not select cannot be said to cover it.
    excluding = {
        "fromEndpoints": [{"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]}]
    }
    assert both(excluding, Atom("ingress", FRONTEND, "TCP", 8080)) == (False, True)


def test_l7_rules_cover_the_same_requests_only() -> None:
    # merge skipped every port rule with L7 rules; verify matched requests against them.
    http = {
        "toPorts": [
            {
                "ports": [{"port": "8080", "protocol": "TCP"}],
                "rules": {"http": [{"method": "GET", "path": "^/api$"}]},
            }
        ]
    }
    get = flow_dict(l7={"type": "REQUEST", "http": {"method": "GET", "url": "http://cart/api"}})
    same = Atom("ingress", FRONTEND, "TCP", 8080, ("http", "GET", "^/api$"))
    other = Atom("ingress", FRONTEND, "TCP", 8080, ("http", "GET", "^/admin$"))
    assert both(http, same, get) == (True, True)
    assert both(http, other, get)[0] is False
    # A connection with no L7 record reaches the proxy (admitted); an entry that allows every
    # request on the port is more than the L7 rule grants (not covered).
    assert both(http, Atom("ingress", FRONTEND, "TCP", 8080)) == (False, True)
