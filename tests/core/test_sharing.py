"""Shared rules (``cpg_core._synthesis.sharing``): a rule many workloads need written once, in a policy
that selects exactly their pods, so every pod's verdicts stay what they were."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
import yaml

from conftest import endpoint, flow_dict
from cpg_core._base.flow import Endpoint
from cpg_core._base.rules import EGRESS, INGRESS, EndpointPeer, EntityPeer, Rule
from cpg_core._flows.parse import parse_flow
from cpg_core._flows.synthesis import PolicyTarget
from cpg_core._policy.matcher import match_flow, selecting_specs
from cpg_core._synthesis._aggregate_base import PolicyPlan
from cpg_core._synthesis.render import is_shared, render_policy
from cpg_core._synthesis.sharing import (
    read_shared,
    render_shared,
    share_rules,
    shared_evidence_plan,
)

DNS = Rule(EGRESS, EndpointPeer("kube-system", (("app", "kube-dns"),)), ports=((53, "UDP"),))
SCRAPE = Rule(INGRESS, EndpointPeer("monitoring", (("app", "prometheus"),)), ports=((9090, "TCP"),))
API = Rule(EGRESS, EntityPeer("kube-apiserver"), ports=((443, "TCP"),))


def _plan(namespace: str, app: str, *rules: Rule, **labels: str) -> PolicyPlan:
    selector = tuple(sorted({"app": app, **labels}.items()))
    return PolicyPlan(
        target=PolicyTarget(namespace, selector),
        workload=app,
        name=f"cpg-{app}",
        rules=tuple(sorted(rules, key=repr)),
    )


def _docs(texts: list[str]) -> list[dict[str, Any]]:
    return [yaml.safe_load(text) for text in texts]


def _pod(namespace: str, app: str, *more: str) -> Endpoint:
    return Endpoint(
        namespace=namespace,
        labels=(f"k8s:app={app}", *more, f"k8s:io.kubernetes.pod.namespace={namespace}"),
        identity=abs(hash((namespace, app, more))) % 60000 + 1000,
        pod_name=f"{app}-0",
    )


CLUSTER = [
    *(_plan(f"ns-{n}", app, DNS, SCRAPE) for n in range(3) for app in ("web", "api", "db")),
    _plan("ns-0", "batch", DNS, API),
    _plan("ns-1", "tool", API),
    _plan("ns-2", "solo", SCRAPE, tier="back"),
]


def test_a_rule_enough_workloads_need_leaves_their_policies_for_one_shared_policy() -> None:
    sharing = share_rules(CLUSTER, 10)
    assert {p.rule for p in sharing.shared} == {DNS, SCRAPE}
    by_rule = {p.rule: p for p in sharing.shared}
    assert len(by_rule[DNS].members) == 10  # nine app pods and batch
    assert len(by_rule[SCRAPE].members) == 10  # nine app pods and solo
    assert API not in by_rule  # two workloads need it: it stays in theirs
    reduced = {plan.target: plan for plan in sharing.plans}
    assert reduced[CLUSTER[-3].target].rules == (API,)
    assert reduced[CLUSTER[0].target].rules == ()
    # the attribution (the evidence) is not touched
    assert all(a.attribution is b.attribution for a, b in zip(CLUSTER, sharing.plans, strict=True))


def test_below_the_threshold_and_with_sharing_off_nothing_moves() -> None:
    assert share_rules(CLUSTER, 11).shared == ()
    assert share_rules(CLUSTER, 0).shared == ()
    assert share_rules(CLUSTER, 0).plans == tuple(CLUSTER)


def test_a_rule_already_shared_takes_any_workload_and_a_kept_one_none() -> None:
    earlier = share_rules(CLUSTER, 10)
    known = {p.rule: p for p in earlier.shared}
    newcomer = _plan("ns-9", "late", DNS)
    joined = share_rules([newcomer], 10, known)
    (dns,) = joined.shared
    assert newcomer.target in dns.members and len(dns.members) == 11
    assert joined.plans[0].rules == ()
    kept = share_rules(CLUSTER, 10, known, keep=[DNS])
    assert {p.rule for p in kept.shared} == {SCRAPE}
    assert all(DNS in p.rules for p in kept.plans if DNS in CLUSTER[kept.plans.index(p)].rules)


def _verdicts(
    policies: list[dict[str, Any]], pods: list[Endpoint], peers: list[Endpoint]
) -> list[tuple[Any, ...]]:
    """Per pod: the directions it is default-deny in, and for each peer and port whether the
    policies admit the flow in each direction."""
    out: list[tuple[Any, ...]] = []
    for pod in pods:
        specs = selecting_specs(policies, pod)
        enforced = tuple(d for d in (INGRESS, EGRESS) if any(s.enforces(d) for _, s, _ in specs))
        out.append((pod.namespace, pod.labels, enforced))
        for peer, port, proto in itertools.product(peers, (53, 443, 9090), ("TCP", "UDP")):
            for direction, src, dst in (("INGRESS", peer, pod), ("EGRESS", pod, peer)):
                flow = parse_flow(_flow(_flow_end(src), _flow_end(dst), direction, port, proto))
                out.append(
                    (direction, peer.labels, port, proto, match_flow(policies, flow).allowed)
                )
    return out


def _flow(
    src: dict[str, Any], dst: dict[str, Any], direction: str, port: int, proto: str
) -> dict[str, Any]:
    if proto == "UDP":
        return flow_dict(src, dst, direction=direction, tcp=None, udp=port)
    return flow_dict(src, dst, direction=direction, tcp=port)


def _flow_end(pod: Endpoint) -> dict[str, Any]:
    return endpoint(pod.namespace, None, *pod.labels, identity=pod.identity, pod_name=pod.pod_name)


def test_every_pod_is_judged_the_same_with_and_without_shared_policies() -> None:
    """The rendered per-workload policies against the reduced ones plus the shared ones, for
    the members, a canary of a member (same app, another label), a pod of another app, the
    same app in a namespace that has none, and the peers themselves."""
    before = _docs(
        [render_policy(p.name, p.namespace, p.target.selector, p.rules) for p in CLUSTER]
    )
    sharing = share_rules(CLUSTER, 10)
    after = _docs(
        [
            render_policy(p.name, p.namespace, p.target.selector, p.rules)
            for p in sharing.plans
            if p.rules
        ]
        + [render_shared(p) for p in sharing.shared]
    )
    pods = [
        *(_pod(p.namespace, dict(p.target.selector)["app"]) for p in CLUSTER),
        _pod("ns-0", "web", "k8s:version=canary"),
        _pod("ns-2", "solo"),  # solo's policy selects tier=back too: this pod is not selected
        _pod("ns-2", "solo", "k8s:tier=back"),
        _pod("ns-0", "other"),
        _pod("ns-5", "web"),
        _pod("ns-0", "solo", "k8s:tier=back"),  # solo's labels in a namespace solo is not in
    ]
    peers = [
        _pod("kube-system", "kube-dns"),
        _pod("monitoring", "prometheus"),
        _pod("ns-1", "api"),
    ]
    assert _verdicts(after, pods, peers) == _verdicts(before, pods, peers)
    assert len(after) < len(before)


def test_the_shared_policy_selects_exactly_the_members_pods() -> None:
    sharing = share_rules(CLUSTER, 10)
    dns = next(p for p in sharing.shared if p.rule == DNS)
    doc = yaml.safe_load(render_shared(dns))
    assert doc["kind"] == "CiliumClusterwideNetworkPolicy" and is_shared(doc)
    members = [_pod(p.namespace, dict(p.target.selector)["app"]) for p in CLUSTER if DNS in p.rules]
    strangers = [
        _pod("ns-1", "batch"),  # batch is a member in ns-0 only
        _pod("ns-0", "tool"),
        _pod("kube-system", "web"),
    ]
    assert all(selecting_specs([doc], pod) for pod in members)
    assert not any(selecting_specs([doc], pod) for pod in strangers)


def test_members_of_one_namespace_share_a_namespaced_policy() -> None:
    plans = [_plan("shop", f"svc-{i}", SCRAPE) for i in range(12)]
    (policy,) = share_rules(plans, 10).shared
    doc = yaml.safe_load(render_shared(policy))
    assert doc["kind"] == "CiliumNetworkPolicy"
    assert doc["metadata"]["namespace"] == "shop"
    assert doc["spec"]["endpointSelector"] == {
        "matchExpressions": [
            {"key": "app", "operator": "In", "values": sorted(f"svc-{i}" for i in range(12))}
        ]
    }
    # the peer in another namespace keeps its namespace label
    assert doc["spec"]["ingress"][0]["fromEndpoints"] == [
        {"matchLabels": {"app": "prometheus", "io.kubernetes.pod.namespace": "monitoring"}}
    ]


@pytest.mark.parametrize("min_workloads", [2, 10])
def test_what_cpg_wrote_reads_back_as_the_same_shared_policy(min_workloads: int) -> None:
    plans = [
        *CLUSTER,
        _plan("ns-3", "a", DNS, tier="x", role="y"),
        _plan("ns-3", "b", DNS, tier="z", role="w"),  # two labels vary: one spec each
    ]
    for policy in share_rules(plans, min_workloads).shared:
        text = render_shared(policy)
        assert read_shared(yaml.safe_load(text)) == policy
        assert render_shared(read_shared(yaml.safe_load(text))) == text  # type: ignore[arg-type]


def test_a_changed_shared_policy_does_not_read_as_cpgs() -> None:
    (policy,) = share_rules([_plan("shop", f"s{i}", SCRAPE) for i in range(3)], 2).shared
    doc = yaml.safe_load(render_shared(policy))
    doc["spec"]["ingress"][0]["toPorts"][0]["ports"].append({"port": "22", "protocol": "TCP"})
    assert read_shared(doc) is None
    doc = yaml.safe_load(render_shared(policy))
    doc["spec"]["endpointSelector"]["matchExpressions"][0]["operator"] = "NotIn"
    assert read_shared(doc) is None


def test_the_shared_policy_evidence_is_its_members_flows_for_its_rule() -> None:
    from cpg_core._synthesis.aggregate import AggregateOptions, Aggregator

    aggregator = Aggregator(AggregateOptions(max_samples=3))
    dns = endpoint("kube-system", "kube-dns", identity=53)
    for i in range(4):
        pod = endpoint("shop", f"s{i}", identity=100 + i)
        aggregator.admit(parse_flow(_flow(pod, dns, "EGRESS", 53, "UDP")), "drop")
        if i < 2:  # two workloads call db: that rule stays theirs
            db = endpoint("shop", "db", identity=99)
            aggregator.admit(parse_flow(_flow(pod, db, "EGRESS", 5432, "TCP")), "drop")
    plans = aggregator.plans()
    (policy,) = share_rules(plans, 3).shared
    proof = shared_evidence_plan(policy.name, policy.rule, policy.members, plans, max_samples=3)
    assert proof.rules == (policy.rule,)
    assert set(proof.attribution) == set(policy.rule.atoms())
    counts = {(a.protocol, a.port): s.count for a, s in proof.attribution.items()}
    # every member's flow, none of the db traffic; TCP/53 is DNS's other half (§D47)
    assert counts == {("UDP", 53): 4, ("TCP", 53): 0}
    assert {t.workload for t in policy.members} == {"s0", "s1", "s2", "s3"}
