from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings, strategies as st

from conftest import WORLD, endpoint, flow_dict
from cpg_core._base.rules import CidrPeer, EndpointPeer, EntityPeer
from cpg_core._flows.decide import Decision, decide
from cpg_core._flows.parse import parse_flow
from cpg_core._flows.synthesis import PolicyTarget, Resolved, Resolver, Unhandled, Unresolved
from cpg_core._synthesis.aggregate import AggregateOptions, Aggregator


def resolve(**kwargs: Any) -> Resolved | Unresolved:
    return Resolver().resolve(parse_flow(flow_dict(**kwargs)))


def test_ingress_targets_the_destination_and_egress_the_source() -> None:
    src, dst = endpoint("shop", "frontend"), endpoint("payments", "api")
    ingress = resolve(src=src, dst=dst, direction="INGRESS")
    egress = resolve(src=src, dst=dst, direction="EGRESS")
    assert isinstance(ingress, Resolved) and isinstance(egress, Resolved)
    assert ingress.target == PolicyTarget("payments", (("app", "api"),))
    assert ingress.atom.peer == EndpointPeer("shop", (("app", "frontend"),))
    assert ingress.atom.direction == "ingress"
    assert egress.target == PolicyTarget("shop", (("app", "frontend"),))
    assert egress.atom.peer == EndpointPeer("payments", (("app", "api"),))
    assert egress.atom.direction == "egress"


@pytest.mark.parametrize(
    ("peer", "ip", "expected"),
    [
        (WORLD, "8.8.8.8", CidrPeer("8.8.8.8/32")),
        (WORLD, "2001:db8::1", CidrPeer("2001:db8::1/128")),
        ({"identity": 9, "labels": ["reserved:world-ipv4"]}, "1.1.1.1", CidrPeer("1.1.1.1/32")),
        (
            {"identity": 10, "labels": ["reserved:world-ipv6"]},
            "2001:db8::2",
            CidrPeer("2001:db8::2/128"),
        ),
        (
            {"identity": 16777217, "labels": ["cidr:1.2.3.0/24", "reserved:world"]},
            "1.2.3.4",
            CidrPeer("1.2.3.4/32"),
        ),
        ({"identity": 1, "labels": ["reserved:host"]}, "10.0.0.1", EntityPeer("host")),
        (
            {"identity": 6, "labels": ["reserved:remote-node"]},
            "10.0.0.1",
            EntityPeer("remote-node"),
        ),
        (
            {"identity": 7, "labels": ["reserved:kube-apiserver", "reserved:world"]},
            "1.1.1.1",
            EntityPeer("kube-apiserver"),
        ),
        ({"identity": 4, "labels": ["reserved:health"]}, "10.0.0.1", EntityPeer("health")),
        ({"identity": 8, "labels": ["reserved:ingress"]}, "10.0.0.1", EntityPeer("ingress")),
        ({"identity": 5}, "10.0.0.1", EntityPeer("init")),
    ],
)
def test_reserved_peers(peer: dict[str, Any], ip: str, expected: object) -> None:
    result = resolve(src=endpoint("shop", "app"), dst=peer, direction="EGRESS", dst_ip=ip)
    assert isinstance(result, Resolved)
    assert result.atom.peer == expected


@pytest.mark.parametrize(
    ("kwargs", "reason", "subject"),
    [
        (
            {"src": endpoint("shop", None, pod_name="debug-shell")},
            Unhandled.UNSELECTABLE,
            "shop/debug-shell (peer)",
        ),
        (
            {"dst": endpoint("shop", None, "k8s:pod-template-hash=1", pod_name="x-1")},
            Unhandled.UNSELECTABLE,
            "shop/x-1 (target)",
        ),
        ({"dst": {"labels": ["k8s:app=x"]}}, Unhandled.NO_NAMESPACE, None),
        ({"dst": {"identity": 1, "labels": ["reserved:host"]}}, Unhandled.RESERVED_TARGET, None),
        ({"src": WORLD, "src_ip": ""}, Unhandled.WORLD_NO_IP, None),
        ({"direction": "TRAFFIC_DIRECTION_UNKNOWN"}, Unhandled.UNKNOWN_DIRECTION, None),
        ({"tcp": None}, Unhandled.NO_L4, None),
        ({"tcp": 0}, Unhandled.NO_PORT, None),
        ({"udp": 0}, Unhandled.NO_PORT, None),
        ({"tcp": None, "l4": {"IGMP": {"type": 22}}}, Unhandled.UNSUPPORTED_PROTOCOL, None),
    ],
)
def test_flows_that_cannot_become_a_precise_rule(
    kwargs: dict[str, Any], reason: Unhandled, subject: str | None
) -> None:
    result = resolve(**kwargs)
    assert isinstance(result, Unresolved)
    assert result.reason is reason
    if subject is not None:
        assert result.subject == subject


def test_a_label_less_peer_never_becomes_an_empty_selector() -> None:
    agg = Aggregator()
    agg.add(parse_flow(flow_dict(src={"namespace": "shop", "pod_name": "xwing"})))
    assert agg.plans() == []
    assert agg.unhandled[Unhandled.UNSELECTABLE] == 1
    (finding,) = agg.findings.values()
    assert finding.kind == "unselectable" and "xwing" in finding.subject


def test_namespace_filter_is_on_the_policy_target() -> None:
    agg = Aggregator(AggregateOptions(namespaces=frozenset({"payments"})))
    # shop -> payments ingress: target payments (kept); egress: target shop (filtered)
    agg.add(
        parse_flow(
            flow_dict(src=endpoint("shop", "a"), dst=endpoint("payments", "b"), direction="INGRESS")
        )
    )
    agg.add(
        parse_flow(
            flow_dict(src=endpoint("shop", "a"), dst=endpoint("payments", "b"), direction="EGRESS")
        )
    )
    assert [p.namespace for p in agg.plans()] == ["payments"]
    assert agg.filtered_namespace == 1


def test_same_labels_in_two_namespaces_are_two_peers() -> None:
    agg = Aggregator()
    dst = endpoint("payments", "ledger")
    agg.add(parse_flow(flow_dict(src=endpoint("shop", "worker"), dst=dst, tcp=5432)))
    agg.add(parse_flow(flow_dict(src=endpoint("payments", "worker"), dst=dst, tcp=5432)))
    (plan,) = agg.plans()
    assert [r.peer for r in plan.rules] == [
        EndpointPeer("payments", (("app", "worker"),)),
        EndpointPeer("shop", (("app", "worker"),)),
    ]


def test_colliding_workload_names_get_distinct_names() -> None:
    agg = Aggregator()
    agg.add(parse_flow(flow_dict(dst=endpoint("shop", None, "k8s:app.kubernetes.io/name=web"))))
    agg.add(parse_flow(flow_dict(dst=endpoint("shop", None, "k8s:app=web"))))
    plans = agg.plans()
    assert len(plans) == 2
    assert len({p.workload for p in plans}) == 2
    assert len({p.name for p in plans}) == 2


# --- the aggregator's fast path must agree with decide() + Resolver.resolve() ---------------

endpoints = st.sampled_from(
    [
        endpoint("shop", "a"),
        endpoint("shop", "b"),
        endpoint("pay", "a"),
        endpoint("shop", None, pod_name="bare"),
        endpoint(None, "nons"),
        WORLD,
        {"identity": 1, "labels": ["reserved:host"]},
        {"identity": 7, "labels": ["reserved:kube-apiserver"]},
        {},
    ]
)


@settings(max_examples=400, deadline=None)
@given(
    src=endpoints,
    dst=endpoints,
    direction=st.sampled_from(["INGRESS", "EGRESS", "TRAFFIC_DIRECTION_UNKNOWN"]),
    verdict=st.sampled_from(["DROPPED", "FORWARDED", "AUDIT"]),
    reason=st.sampled_from([None, "POLICY_DENIED", "POLICY_DENY", "CT_MAP_INSERTION_FAILED"]),
    reply=st.sampled_from([None, True, False]),
    l4=st.sampled_from(
        [{"tcp": 80}, {"tcp": 0}, {"udp": 53}, {"icmp4": 8}, {"icmp6": 128}, {"tcp": None}]
    ),
    ip=st.sampled_from(["8.8.8.8", "", "2001:db8::1", "bogus"]),
)
def test_fast_path_agrees_with_the_reference(
    src: Any,
    dst: Any,
    direction: str,
    verdict: str,
    reason: str | None,
    reply: bool | None,
    l4: dict[str, Any],
    ip: str,
) -> None:
    flow = parse_flow(
        flow_dict(
            src=src,
            dst=dst,
            direction=direction,
            verdict=verdict,
            reason=reason,
            reply=reply,
            src_ip=ip,
            dst_ip=ip,
            **l4,
        )
    )
    agg = Aggregator()
    decision = agg.add(flow)
    assert decision is decide(flow)
    if decision is not Decision.CANDIDATE:
        assert not agg.atoms
        return
    expected = Resolver().resolve(flow)
    if isinstance(expected, Resolved):
        assert agg.atoms == {expected.target: {expected.atom}}
    else:
        assert not agg.atoms
        assert agg.unhandled == {expected.reason: 1}


@pytest.mark.parametrize(
    ("key", "value", "valid"),
    [
        ("app", "web", True),
        ("app.kubernetes.io/name", "web-v2.1", True),
        ("app", "", True),
        ("app", "web\nVerify", False),
        ("app", "x" * 64, False),
        ("app", "-web", False),
        ("Bad_Prefix/app", "web", False),
        ("app name", "web", False),
    ],
)
def test_label_problem_follows_kubernetes(key: str, value: str, valid: bool) -> None:
    from cpg_core._base.labels import label_problem

    assert (label_problem(key, value) is None) is valid


def test_a_label_kubernetes_would_refuse_is_a_finding_not_a_rule() -> None:
    from conftest import endpoint, flow_dict, jsonl
    from cpg_core import generate

    odd = endpoint("shop", "web\ninjected: true", pod_name="web-1")
    api = endpoint("shop", "api", pod_name="api-1")
    result = generate(jsonl([flow_dict(odd, api), flow_dict(api, odd)]).splitlines())
    assert not any("injected" in text for text in result.policies.values())
    kinds = {finding.kind for finding in result.health.findings}
    assert "invalid_label" in kinds


def test_what_the_ingress_proxy_sends_a_backend_is_the_backends_ingress_rule() -> None:
    """Cilium's Ingress/Gateway proxy (``reserved:ingress``) sending to a backend was called
    a node-level target with a nodeSelector fix; the backend needs ``fromEntities:
    [ingress]``, whichever end Hubble saw the drop at."""
    proxy = {"identity": 8, "labels": ["reserved:ingress"]}
    backend = endpoint("shop", "api")
    for direction, src, dst in (("EGRESS", proxy, backend), ("INGRESS", proxy, backend)):
        result = resolve(src=src, dst=dst, direction=direction)
        assert isinstance(result, Resolved), result
        assert result.target == PolicyTarget("shop", (("app", "api"),))
        assert result.atom.direction == "ingress" and result.atom.peer == EntityPeer("ingress")
    to_world = resolve(src=proxy, dst=WORLD, dst_ip="8.8.8.8", direction="EGRESS")
    assert isinstance(to_world, Unresolved) and to_world.reason == Unhandled.RESERVED_TARGET


def test_names_kubernetes_would_refuse_are_findings_not_selectors() -> None:
    """Found by mutating real records: a peer whose namespace was 70,000 characters (or a
    control character) was written into a selector's namespace label, and a DNS query of
    70,000 characters into a DNS rule; Cilium would refuse both documents whole."""
    bad_ns = endpoint("sh\u202eop", "frontend")
    result = resolve(src=bad_ns, dst=endpoint("shop", "cart"))
    assert isinstance(result, Unresolved) and result.reason == Unhandled.INVALID_LABEL
    assert "not a Kubernetes namespace name" in result.subject
    target = resolve(src=endpoint("shop", "frontend"), dst=endpoint("x" * 70, "cart"))
    assert isinstance(target, Unresolved) and target.reason == Unhandled.INVALID_LABEL
    mesh = {**endpoint("shop", "frontend"), "cluster_name": "we st"}
    peer = resolve(src=mesh, dst={**endpoint("shop", "cart"), "cluster_name": "east"})
    assert isinstance(peer, Unresolved) and "cluster name" in peer.subject
    agg = Aggregator(AggregateOptions(l7=True))
    for query in ("x" * 300 + ".example.com.", "api!.example.com."):
        agg.add(
            parse_flow(
                flow_dict(
                    src=endpoint("shop", "api"),
                    dst=endpoint("kube-system", None, "k8s:k8s-app=kube-dns"),
                    direction="EGRESS",
                    udp=53,
                    l7={"type": "REQUEST", "dns": {"query": query, "ips": ["1.2.3.4"]}},
                )
            )
        )
    rules = [str(rule) for plan in agg.plans() for rule in plan.rules]
    assert rules and not any("example.com" in rule for rule in rules)
