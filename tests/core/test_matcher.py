"""The policy matcher, rule type by rule type: one flow that a rule admits, one it does not."""

from __future__ import annotations

from typing import Any

import pytest

from conftest import WORLD, endpoint, flow_dict
from cpg_core._flows.parse import parse_flow
from cpg_core._policy.agent import AgentSettings
from cpg_core._policy.matcher import dns_names, match_flow, selector_matches


def cnp(namespace: str, selector: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "cilium.io/v2",
        "kind": "CiliumNetworkPolicy",
        "metadata": {"name": "p", "namespace": namespace},
        "spec": {"endpointSelector": selector, **spec},
    }


CART = {"matchLabels": {"app": "cart"}}
TCP_8080 = [{"ports": [{"port": "8080", "protocol": "TCP"}]}]


def allowed(policies: list[dict[str, Any]], **flow: Any) -> bool:
    return match_flow(policies, parse_flow(flow_dict(**flow))).allowed


def test_endpoint_selector_match_labels_and_expressions() -> None:
    policy = cnp("shop", CART, ingress=[{"fromEndpoints": [{}]}])
    assert allowed([policy])
    assert not allowed(
        [cnp("shop", {"matchLabels": {"app": "web"}}, ingress=[{"fromEndpoints": [{}]}])]
    )
    exists = cnp(
        "shop",
        {"matchExpressions": [{"key": "app", "operator": "In", "values": ["cart", "x"]}]},
        ingress=[{"fromEndpoints": [{}]}],
    )
    assert allowed([exists])
    not_in = cnp(
        "shop",
        {"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["cart"]}]},
        ingress=[{"fromEndpoints": [{}]}],
    )
    assert not allowed([not_in])
    labels = {"app": "cart", "io.kubernetes.pod.namespace": "shop"}
    assert selector_matches(
        {"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]}, labels, None
    )
    assert not selector_matches(
        {"matchExpressions": [{"key": "k8s:app", "operator": "Exists"}]}, {}, None
    )
    assert selector_matches({"matchLabels": {"k8s:app": "cart"}}, labels, None)


def test_a_policy_applies_only_in_its_namespace() -> None:
    assert not allowed([cnp("other", CART, ingress=[{"fromEndpoints": [{}]}])])


def test_peer_selectors_have_an_implicit_namespace() -> None:
    same_ns = cnp("shop", CART, ingress=[{"fromEndpoints": [{"matchLabels": {"app": "frontend"}}]}])
    assert allowed([same_ns], src=endpoint("shop", "frontend"))
    assert not allowed([same_ns], src=endpoint("pay", "frontend"))
    cross = cnp(
        "shop",
        CART,
        ingress=[
            {
                "fromEndpoints": [
                    {"matchLabels": {"app": "frontend", "io.kubernetes.pod.namespace": "pay"}}
                ]
            }
        ],
    )
    assert allowed([cross], src=endpoint("pay", "frontend"))
    assert not allowed([cross], src=endpoint("shop", "frontend"))


def test_to_endpoints_for_egress() -> None:
    policy = cnp(
        "shop",
        {"matchLabels": {"app": "frontend"}},
        egress=[{"toEndpoints": [CART], "toPorts": TCP_8080}],
    )
    assert allowed([policy], direction="EGRESS")
    assert not allowed([policy], direction="EGRESS", tcp=9090)
    assert not allowed([policy], direction="INGRESS"), "egress rules never admit ingress"


@pytest.mark.parametrize(
    ("entities", "peer", "ip", "expected"),
    [
        (["host"], {"identity": 1, "labels": ["reserved:host"]}, "10.0.0.1", True),
        (["remote-node"], {"identity": 1, "labels": ["reserved:host"]}, "10.0.0.1", False),
        (["world"], WORLD, "8.8.8.8", True),
        (["world"], endpoint("shop", "frontend"), "10.0.0.1", False),
        (["cluster"], endpoint("pay", "api"), "10.0.0.1", True),
        (["cluster"], WORLD, "8.8.8.8", False),
        (["all"], WORLD, "8.8.8.8", True),
    ],
)
def test_entities(entities: list[str], peer: dict[str, Any], ip: str, expected: bool) -> None:
    policy = cnp("shop", CART, ingress=[{"fromEntities": entities}])
    flow = parse_flow(flow_dict(src=peer, src_ip=ip))
    # the rules alone: the node's allow-localhost pass is tested on its own (test_fixes)
    assert (
        match_flow([policy], flow, agent=AgentSettings(allow_localhost=False)).allowed is expected
    )


def test_cidr_and_cidr_set_with_except() -> None:
    plain = cnp("shop", CART, ingress=[{"fromCIDR": ["203.0.113.0/24"]}])
    assert allowed([plain], src=WORLD, src_ip="203.0.113.9")
    assert not allowed([plain], src=WORLD, src_ip="198.51.100.9")
    assert not allowed([plain], src=endpoint("shop", "frontend"), src_ip="203.0.113.9"), (
        "CIDR rules select world only"
    )
    with_except = cnp(
        "shop",
        CART,
        ingress=[{"fromCIDRSet": [{"cidr": "203.0.113.0/24", "except": ["203.0.113.128/25"]}]}],
    )
    assert allowed([with_except], src=WORLD, src_ip="203.0.113.9")
    assert not allowed([with_except], src=WORLD, src_ip="203.0.113.200")
    v6 = cnp("shop", CART, ingress=[{"fromCIDR": ["2001:db8::/32"]}])
    assert allowed([v6], src=WORLD, src_ip="2001:db8::5")


def test_to_fqdns_uses_names_learned_from_dns() -> None:
    policy = cnp(
        "shop",
        CART,
        egress=[
            {"toFQDNs": [{"matchName": "api.example.com"}, {"matchPattern": "*.cdn.example.org"}]}
        ],
    )
    flow = parse_flow(
        flow_dict(
            src=endpoint("shop", "cart"), dst=WORLD, dst_ip="1.2.3.4", direction="EGRESS", tcp=443
        )
    )
    assert not match_flow([policy], flow).allowed
    assert match_flow([policy], flow, {"1.2.3.4": ["api.example.com"]}).allowed
    assert match_flow([policy], flow, {"1.2.3.4": ["img.cdn.example.org"]}).allowed
    assert not match_flow([policy], flow, {"1.2.3.4": ["example.org"]}).allowed
    named = parse_flow(
        flow_dict(
            src=endpoint("shop", "cart"),
            dst=WORLD,
            dst_ip="1.2.3.4",
            direction="EGRESS",
            destination_names=["api.example.com"],
        )
    )
    assert match_flow([policy], named).allowed
    response = parse_flow(
        flow_dict(
            verdict="FORWARDED",
            reason=None,
            l7={"type": "RESPONSE", "dns": {"query": "api.example.com.", "ips": ["1.2.3.4"]}},
        )
    )
    assert dns_names([response]) == {"1.2.3.4": ["api.example.com"]}


@pytest.mark.parametrize(
    ("port", "flow_port", "protocol", "flow_kwargs", "expected"),
    [
        ({"port": "8080", "protocol": "TCP"}, 8080, "TCP", {}, True),
        ({"port": "8080", "protocol": "TCP"}, 8081, "TCP", {}, False),
        ({"port": "8080", "protocol": "UDP"}, 8080, "TCP", {}, False),
        ({"port": "8080", "protocol": "ANY"}, 8080, "UDP", {"udp": 8080}, True),
        ({"port": "8000", "endPort": 8100, "protocol": "TCP"}, 8080, "TCP", {}, True),
        ({"port": "8000", "endPort": 8050, "protocol": "TCP"}, 8080, "TCP", {}, False),
        ({"port": "3868", "protocol": "SCTP"}, 3868, "SCTP", {"sctp": 3868}, True),
    ],
)
def test_to_ports(
    port: dict[str, Any], flow_port: int, protocol: str, flow_kwargs: dict[str, Any], expected: bool
) -> None:
    policy = cnp("shop", CART, ingress=[{"fromEndpoints": [{}], "toPorts": [{"ports": [port]}]}])
    kwargs = flow_kwargs or {"tcp": flow_port}
    assert allowed([policy], **kwargs) is expected


def test_icmps() -> None:
    policy = cnp(
        "shop",
        CART,
        ingress=[{"fromEndpoints": [{}], "icmps": [{"fields": [{"family": "IPv4", "type": 8}]}]}],
    )
    assert allowed([policy], icmp4=8)
    assert not allowed([policy], icmp4=0)
    assert not allowed([policy], icmp6=8)
    assert not allowed([policy], tcp=8), "an ICMP rule admits no port"


def test_l7_http_rules() -> None:
    policy = cnp(
        "shop",
        CART,
        ingress=[
            {
                "fromEndpoints": [{}],
                "toPorts": [
                    {
                        "ports": [{"port": "8080", "protocol": "TCP"}],
                        "rules": {"http": [{"method": "GET", "path": "^/api/v1/users$"}]},
                    }
                ],
            }
        ],
    )
    get = {"type": "REQUEST", "http": {"method": "GET", "url": "http://cart/api/v1/users?page=2"}}
    post = {"type": "REQUEST", "http": {"method": "POST", "url": "/api/v1/users"}}
    assert allowed([policy], l7=get)
    assert not allowed([policy], l7=post)
    assert allowed([policy]), "an L4 flow to an L7 port reaches the proxy"


def test_l7_dns_rules() -> None:
    policy = cnp(
        "shop",
        CART,
        egress=[
            {
                "toEndpoints": [{}],
                "toPorts": [
                    {
                        "ports": [{"port": "53", "protocol": "UDP"}],
                        "rules": {"dns": [{"matchPattern": "*.example.com"}]},
                    }
                ],
            }
        ],
    )
    ok = {"type": "REQUEST", "dns": {"query": "api.example.com."}}
    bad = {"type": "REQUEST", "dns": {"query": "evil.org."}}
    kwargs = {
        "src": endpoint("shop", "cart"),
        "dst": endpoint("shop", "dns"),
        "direction": "EGRESS",
        "udp": 53,
    }
    assert allowed([policy], l7=ok, **kwargs)
    assert not allowed([policy], l7=bad, **kwargs)


def test_default_deny_only_where_a_policy_selects_the_endpoint() -> None:
    other = cnp("shop", {"matchLabels": {"app": "web"}}, ingress=[{"fromEndpoints": [{}]}])
    result = match_flow([other], parse_flow(flow_dict()))
    assert not result.allowed and "no policy selects" in result.reason
    egress_only = cnp("shop", CART, egress=[{"toEntities": ["world"]}])
    result = match_flow([egress_only], parse_flow(flow_dict()))
    assert not result.allowed and "no ingress rule selects the peer" in result.reason


def test_deny_rules_win() -> None:
    allow = cnp("shop", CART, ingress=[{"fromEndpoints": [{}]}])
    deny = cnp(
        "shop", CART, ingressDeny=[{"fromEndpoints": [{"matchLabels": {"app": "frontend"}}]}]
    )
    result = match_flow([allow, deny], parse_flow(flow_dict()))
    assert not result.allowed and "denied by shop/p ingressDeny[0]" in result.reason


def test_reasons_name_the_rule() -> None:
    policy = cnp("shop", CART, ingress=[{"fromEndpoints": [{}], "toPorts": TCP_8080}])
    ok = match_flow([policy], parse_flow(flow_dict()))
    assert ok.allowed and ok.reason == "allowed by shop/p ingress[0]" and ok.rule == 0
    miss = match_flow([policy], parse_flow(flow_dict(tcp=9090)))
    assert miss.reason == "shop/p ingress[0] selects the peer but not TCP/9090"


def test_one_selector_object_is_read_anew_for_each_namespace_and_cluster() -> None:
    """The terms of a selector are kept per object, but what Cilium adds to them depends on
    the policy's namespace, whether it is clusterwide and the local cluster: one selector
    shared by several policies must keep those apart."""
    selector = {"matchLabels": {"app": "db"}}
    in_a = {"app": "db", "io.kubernetes.pod.namespace": "a", "io.cilium.k8s.policy.cluster": "c1"}
    assert selector_matches(selector, in_a, "a")
    assert not selector_matches(selector, in_a, "b")
    assert selector_matches(selector, in_a, None, clusterwide=True)
    assert not selector_matches(selector, {"app": "db"}, None, clusterwide=True)  # no namespace
    assert selector_matches(selector, {"app": "db"}, None)  # as an endpointSelector
    assert selector_matches(selector, in_a, "a", local_cluster="c1")
    assert not selector_matches(selector, in_a, "a", local_cluster="c2")
    assert selector_matches(selector, in_a, "a")  # and the first answer again
