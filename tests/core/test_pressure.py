"""Policy map pressure (``cpg_core._review.pressure``): the entries a pod's BPF policy map would hold
under a set of policies, estimated from the identities a capture shows."""

from __future__ import annotations

from typing import Any

import pytest

from conftest import endpoint, flow_dict
from cpg_core._base.flow import Endpoint, Flow
from cpg_core._flows.parse import parse_flow
from cpg_core._policy.agent import AgentSettings
from cpg_core._policy.model import read_rule
from cpg_core._review.plan import plan
from cpg_core._review.pressure import (
    POLICY_MAP_MAX,
    endpoint_pressure,
    policy_map_pressure,
    rule_ports,
)


def _endpoint(namespace: str, app: str, identity: int) -> Endpoint:
    return Endpoint(
        namespace=namespace,
        labels=(f"k8s:app={app}", f"k8s:io.kubernetes.pod.namespace={namespace}"),
        identity=identity,
        pod_name=f"{app}-0",
    )


CLUSTER = [_endpoint(f"ns-{i // 25}", f"app-{i % 25}", 1000 + i) for i in range(500)]
"""500 identities in 20 namespaces."""


def _policy(namespace: str, app: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "cilium.io/v2",
        "kind": "CiliumNetworkPolicy",
        "metadata": {"name": f"cpg-{app}", "namespace": namespace},
        "spec": {"endpointSelector": {"matchLabels": {"app": app}}, **spec},
    }


def _ports(*numbers: int, protocol: str = "TCP") -> list[dict[str, Any]]:
    return [{"ports": [{"port": str(n), "protocol": protocol} for n in numbers]}]


@pytest.mark.parametrize(
    ("rule", "entries"),
    [
        ({"toPorts": _ports(80)}, 1),
        ({"toPorts": _ports(80, 443)}, 2),
        ({"toPorts": [{"ports": [{"port": "53"}]}]}, 3),  # no protocol: TCP, UDP and SCTP
        ({"toPorts": [{"ports": [{"port": "53", "protocol": "ANY"}]}]}, 3),
        # 80–90 is 80–87, 88–89 and 90: three aligned blocks
        ({"toPorts": [{"ports": [{"port": "80", "endPort": 90, "protocol": "TCP"}]}]}, 3),
        ({"toPorts": [{"ports": [{"port": "1024", "endPort": 2047, "protocol": "TCP"}]}]}, 1),
        ({"icmps": [{"fields": [{"type": 8}, {"type": 0}]}]}, 2),
        ({"toEndpoints": [{}]}, 1),  # every port: one wildcard entry
    ],
)
def test_the_port_entries_of_a_rule(rule: dict[str, Any], entries: int) -> None:
    assert rule_ports(read_rule(rule, "ingress")) == entries


def test_an_entity_times_many_ports_overflows_the_map_and_says_what_to_cut() -> None:
    """toEntities: cluster selects every identity of the cluster (500 here); times 40 ports
    that is 20,000 entries, over Cilium's default 16,384."""
    ports = list(range(8000, 8040))
    wide = _policy("ns-0", "app-0", egress=[{"toEntities": ["cluster"], "toPorts": _ports(*ports)}])
    (found,) = policy_map_pressure([("ns-0/app-0", CLUSTER[0])], [wide], CLUSTER)
    assert found.endpoint == "ns-0/app-0" and found.entries == 500 * 40 and found.over
    assert found.limit == POLICY_MAP_MAX and found.share == "122 %"
    (rule,) = found.largest
    assert (rule.rule, rule.identities, rule.ports) == ("egress[0]", 500, 40)
    assert "through an entity" in found.advice[0]
    assert "bpf-policy-map-max" in found.advice[-1]


def test_a_namespaced_selector_counts_its_own_namespace_and_a_pinned_one_the_other() -> None:
    app_selector = [{"matchLabels": {"app": "app-3"}}]  # every pod app=app-3 of the policy's ns
    other = [{"matchLabels": {"app": "app-3", "io.kubernetes.pod.namespace": "ns-7"}}]
    any_app = [{"matchExpressions": [{"key": "app", "operator": "Exists"}]}]
    policies = [
        _policy(
            "ns-0",
            "app-0",
            ingress=[
                {"fromEndpoints": app_selector, "toPorts": _ports(80)},
                {"fromEndpoints": other, "toPorts": _ports(80, 81)},
                {"fromEndpoints": any_app, "toPorts": _ports(9090)},
            ],
        )
    ]
    from cpg_core._policy.matcher import selecting_specs
    from cpg_core._review.pressure import IdentityIndex

    found = endpoint_pressure(
        CLUSTER[0], "ns-0/app-0", lambda e: selecting_specs(policies, e), IdentityIndex(CLUSTER)
    )
    by_rule = {r.rule: (r.identities, r.ports, r.entries) for r in found.largest}
    assert by_rule == {
        "ingress[0]": (1, 1, 1),
        "ingress[1]": (1, 2, 2),
        "ingress[2]": (25, 1, 25),  # the 25 identities of ns-0 (the policy's namespace)
    }
    assert found.entries == 28 and not found.over


def test_a_cidr_covers_the_addresses_other_rules_made_identities_of() -> None:
    policies = [
        _policy(
            "ns-0",
            "app-0",
            egress=[{"toCIDR": ["10.0.0.0/8"], "toPorts": _ports(443)}],
        )
    ]
    addresses = [f"10.1.0.{i}" for i in range(1, 21)] + ["192.0.2.1"]
    (found,) = policy_map_pressure(
        [("ns-0/app-0", CLUSTER[0])], policies, CLUSTER, addresses=addresses, limit=20
    )
    assert found.entries == 21  # the /8 and the 20 addresses inside it
    assert found.over


def test_pods_well_under_the_limit_are_not_listed() -> None:
    policies = [_policy("ns-0", "app-0", ingress=[{"fromEndpoints": [{}], "toPorts": _ports(80)}])]
    assert policy_map_pressure([("ns-0/app-0", CLUSTER[0])], policies, CLUSTER) == ()
    # …and at 80 % of the limit they are (25 identities of ns-0 × 1 port = 25 ≥ 0.8 × 30)
    (near,) = policy_map_pressure([("ns-0/app-0", CLUSTER[0])], policies, CLUSTER, limit=30)
    assert near.entries == 25 and not near.over


def _flow(**fields: Any) -> Flow:
    parsed = parse_flow(flow_dict(**fields))
    assert isinstance(parsed, Flow)
    return parsed


def test_the_plan_names_a_pod_whose_policy_map_the_proposal_would_overflow() -> None:
    web, api = endpoint("shop", "web"), endpoint("shop", "api")
    flows = [
        _flow(src=web, dst=api, tcp=8080),
        _flow(src=web, dst=api, tcp=8080, verdict="FORWARDED", reason=None),
    ]
    flows += [
        _flow(
            src=endpoint("shop", f"client-{i}"), dst=api, tcp=8080, verdict="FORWARDED", reason=None
        )
        for i in range(30)
    ]
    ports = _ports(*range(8080, 8100))
    proposal = [_policy("shop", "api", ingress=[{"fromEntities": ["cluster"], "toPorts": ports}])]
    planned = plan(
        flows, proposal, None, current_source="flows", agent=AgentSettings(policy_map_max=500)
    )
    (found,) = planned.policy_map
    # 32 identities (web, api, 30 clients) × 20 ports
    assert found.endpoint == "shop/api" and found.entries == 32 * 20 and found.over
    assert planned.overflows and planned.policy_map_max == 500
    roomy = plan(flows, proposal, None, current_source="flows")
    assert roomy.policy_map == () and not roomy.overflows


def test_the_address_index_counts_each_address_inside_the_prefixes_once() -> None:
    import ipaddress

    from cpg_core._review.pressure import AddressIndex

    addresses = [
        ipaddress.ip_address(a) for a in ("10.0.0.1", "10.0.0.9", "10.0.1.1", "2001:db8::1")
    ]
    index = AddressIndex(addresses)
    nets = [ipaddress.ip_network(n) for n in ("10.0.0.0/24", "10.0.0.0/28", "10.0.1.0/30")]
    assert index.inside(nets) == 3  # the /28 inside the /24 adds nothing
    assert index.inside([ipaddress.ip_network("10.0.0.8/29")]) == 1
    assert index.inside([ipaddress.ip_network("2001:db8::/64")]) == 1
    assert index.inside([ipaddress.ip_network("192.0.2.0/24")]) == 0


def test_rules_with_the_same_peer_count_once_but_each_namespace_its_own() -> None:
    """A rule's identity count is kept by its peer: the same selector pinned to a namespace
    counts the same in every policy, while one that names no namespace selects in its own
    policy's namespace (ns-0 has one app-1 identity in this cluster, ns-1 has three)."""
    cluster = [
        _endpoint("ns-0", "app-1", 1),
        *(
            Endpoint(
                namespace="ns-1",
                labels=("k8s:app=app-1", f"k8s:v={v}", "k8s:io.kubernetes.pod.namespace=ns-1"),
                identity=10 + v,
            )
            for v in range(3)
        ),
    ]
    unpinned = {"toEndpoints": [{"matchLabels": {"app": "app-1"}}], "toPorts": _ports(80)}
    pinned = {
        "toEndpoints": [{"matchLabels": {"app": "app-1", "io.kubernetes.pod.namespace": "ns-1"}}],
        "toPorts": _ports(81),
    }
    policies = [
        _policy("ns-0", "web", egress=[dict(unpinned), dict(pinned)]),
        _policy("ns-1", "web", egress=[dict(unpinned), dict(pinned)]),
    ]
    web = {ns: _endpoint(ns, "web", 100 + i) for i, ns in enumerate(("ns-0", "ns-1"))}
    counted: dict[object, int] = {}
    found = policy_map_pressure(
        [(f"{ns}/web", e) for ns, e in web.items()], policies, cluster, limit=1, counted=counted
    )
    by_rule = {(p.endpoint, r.rule): r.identities for p in found for r in p.largest}
    assert by_rule[("ns-0/web", "egress[0]")] == 1
    assert by_rule[("ns-1/web", "egress[0]")] == 3
    assert by_rule[("ns-0/web", "egress[1]")] == by_rule[("ns-1/web", "egress[1]")] == 3
    # four rules, three peers counted: the unpinned one per namespace, the pinned one once
    assert sum(1 for key in counted if isinstance(key, tuple)) == 3


def test_a_shadow_judge_counts_the_pressure_again_once_new_identities_arrive() -> None:
    """``cpg shadow`` keeps the pressure between flushes while nothing new arrives; clients
    that appear later raise it, and the next plan says so."""
    from cpg_core.shadow import PlanJudge

    api = endpoint("shop", "api")
    ports = _ports(*range(8080, 8100))
    proposal = [_policy("shop", "api", ingress=[{"fromEntities": ["cluster"], "toPorts": ports}])]
    judge = PlanJudge(
        proposal, None, current_source="flows", agent=AgentSettings(policy_map_max=500)
    )
    client = {"dst": api, "tcp": 8080, "verdict": "FORWARDED", "reason": None}
    for i in range(10):
        judge.add(_flow(src=endpoint("shop", f"client-{i}"), **client))
    assert judge.plan().policy_map == ()  # 11 identities × 20 ports
    assert judge.plan().policy_map == ()
    for i in range(10, 30):
        judge.add(_flow(src=endpoint("shop", f"client-{i}"), **client))
    (found,) = judge.plan().policy_map
    assert found.entries == 31 * 20 and found.over
