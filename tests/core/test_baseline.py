"""Shared egress rules in the Baseline tier (``cpg_core._synthesis.baseline``): only for workloads whose
egress the tier can hold whole, kept default-deny by a Baseline deny of everything else."""

from __future__ import annotations

from typing import Any

import yaml

from conftest import WORLD, endpoint, flow_dict
from cpg_core._base.rules import EGRESS, INGRESS, CidrPeer, EndpointPeer, EntityPeer, Rule
from cpg_core._flows.parse import parse_flow
from cpg_core._flows.synthesis import PolicyTarget
from cpg_core._policy.matcher import match_flow
from cpg_core._policy.tiers import BASELINE, tier_verdict
from cpg_core._synthesis._aggregate_base import PolicyPlan
from cpg_core._synthesis.baseline import (
    DEFAULT_DENY,
    BaselinePolicy,
    member_view,
    move_to_baseline,
    read_baseline,
    render_baseline,
    with_baseline_rules,
)
from cpg_core._synthesis.render import render_policy
from cpg_core._synthesis.sharing import render_shared, share_rules

DNS = Rule(EGRESS, EndpointPeer("kube-system", (("app", "kube-dns"),)), ports=((53, "UDP"),))
S3 = Rule(EGRESS, CidrPeer("198.51.100.7/32"), ports=((443, "TCP"),))
API = Rule(EGRESS, EntityPeer("kube-apiserver"), ports=((443, "TCP"),))
SCRAPE = Rule(INGRESS, EndpointPeer("monitoring", (("app", "prometheus"),)), ports=((9090, "TCP"),))
OWN = Rule(EGRESS, EndpointPeer("ns-0", (("app", "db"),)), ports=((5432, "TCP"),))


def _plan(namespace: str, app: str, *rules: Rule) -> PolicyPlan:
    return PolicyPlan(
        target=PolicyTarget(namespace, (("app", app),)),
        workload=app,
        name=f"cpg-{app}",
        rules=tuple(rules),
    )


LEAVES = [_plan(f"ns-{n}", f"leaf-{i}", DNS, S3, SCRAPE) for n in range(2) for i in range(5)]
"""Ten workloads whose egress is all shared and all sayable: the Baseline tier can hold it."""
CLUSTER = [
    *LEAVES,
    _plan("ns-0", "web", DNS, S3, OWN),  # an egress rule of its own: Cilium polices its egress
    _plan("ns-1", "ctl", DNS, S3, API),  # the API server is an entity: no ClusterNetworkPolicy
]


def _split(
    policed: dict[PolicyTarget, bool] | None = None,
) -> tuple[Any, tuple[BaselinePolicy, ...]]:
    return move_to_baseline(share_rules(CLUSTER, 10), policed or {})


def test_only_workloads_whose_egress_the_tier_holds_whole_move() -> None:
    sharing, baseline = _split()
    leaves = frozenset(p.target for p in LEAVES)
    by_rule = {p.rule: p for p in baseline}
    assert by_rule[DNS].members == leaves and by_rule[S3].members == leaves
    assert by_rule[None].members == leaves  # and they are kept default-deny
    # web and ctl keep the same rules in Cilium's shared policies; ingress is never moved
    cilium = {p.rule: p.members for p in sharing.shared}
    assert cilium[DNS] == {CLUSTER[-2].target, CLUSTER[-1].target}
    assert cilium[SCRAPE] == leaves
    # a workload a Cilium policy outside this run polices for egress stays too
    _sharing, baseline = _split({LEAVES[0].target: True})
    assert LEAVES[0].target not in {m for p in baseline for m in p.members}


def _docs(sharing: Any, baseline: tuple[BaselinePolicy, ...]) -> list[dict[str, Any]]:
    texts = [render_policy(p.name, p.namespace, p.target.selector, p.rules) for p in sharing.plans]
    texts += [render_shared(p) for p in sharing.shared]
    docs = [yaml.safe_load(t) for t in texts]
    for policy in baseline:
        docs += list(yaml.safe_load_all(render_baseline(policy)))
    return docs


def _pod(namespace: str, app: str, identity: int, *more: str) -> dict[str, Any]:
    return endpoint(namespace, app, *more, identity=identity, pod_name=f"{app}-0")


def test_every_egress_verdict_is_the_same_and_the_rest_is_denied() -> None:
    """The per-workload policies against the Baseline split, for each workload's egress to
    DNS, the shared address, a pod and an address none of them may reach; and the Baseline
    deny refuses what no Accept allows, for the members only."""
    before = [
        yaml.safe_load(render_policy(p.name, p.namespace, p.target.selector, p.rules))
        for p in CLUSTER
    ]
    after = _docs(*_split())
    dns = _pod("kube-system", "kube-dns", 53)
    other = _pod("ns-0", "db", 77)
    for i, plan in enumerate(CLUSTER):
        me = _pod(plan.namespace, dict(plan.target.selector)["app"], 1000 + i)
        flows = [
            flow_dict(me, dns, direction="EGRESS", tcp=None, udp=53),
            flow_dict(me, WORLD, direction="EGRESS", tcp=443, dst_ip="198.51.100.7"),
            flow_dict(me, WORLD, direction="EGRESS", tcp=443, dst_ip="203.0.113.9"),
            flow_dict(me, other, direction="EGRESS", tcp=5432),
        ]
        for record in flows:
            flow = parse_flow(record)
            assert match_flow(after, flow).allowed == match_flow(before, flow).allowed, (
                plan.workload,
                record,
            )
            verdict = tier_verdict(after, BASELINE, flow)
            if plan in LEAVES and not match_flow(after, flow).allowed:
                assert verdict is not None and verdict.action == "Deny"
                assert verdict.policy.startswith(DEFAULT_DENY)
    stranger = parse_flow(
        flow_dict(_pod("ns-0", "stranger", 9), WORLD, direction="EGRESS", dst_ip="203.0.113.9")
    )
    assert tier_verdict(after, BASELINE, stranger) is None


def test_what_cpg_wrote_reads_back_as_the_same_policy() -> None:
    _sharing, baseline = _split()
    mixed = BaselinePolicy(  # two namespaces with different apps: two documents
        DNS,
        frozenset({PolicyTarget("a", (("app", "x"),)), PolicyTarget("b", (("app", "y"),))}),
    )
    for policy in (*baseline, mixed):
        text = render_baseline(policy)
        docs = list(yaml.safe_load_all(text))
        assert read_baseline(docs) == policy
        assert all(d["apiVersion"] == "policy.networking.k8s.io/v1alpha2" for d in docs)
    assert len(list(yaml.safe_load_all(render_baseline(mixed)))) == 2
    changed = list(yaml.safe_load_all(render_baseline(baseline[0])))
    changed[0]["spec"]["tier"] = "Admin"
    assert read_baseline(changed) is None


def test_a_workload_leaving_the_tier_takes_its_baseline_rules_along() -> None:
    """Once a workload has an egress rule of its own, Cilium polices its egress and the
    Baseline tier no longer applies to it: the rules it held there must come back."""
    _sharing, baseline = _split()
    later = _plan("ns-0", "leaf-0", OWN)  # leaf-0 now calls db too
    (plan,) = with_baseline_rules([later], baseline)
    assert set(plan.rules) == {OWN, DNS, S3}


def test_reports_see_a_baseline_policy_at_each_member() -> None:
    _sharing, baseline = _split()
    dns = next(p for p in baseline if p.rule == DNS)
    view = member_view(next(yaml.safe_load_all(render_baseline(dns))))
    assert view["kind"] == "CiliumClusterwideNetworkPolicy"
    assert len(view["specs"]) == len(dns.members)
    deny = next(p for p in baseline if p.rule is None)
    denied = member_view(next(yaml.safe_load_all(render_baseline(deny))))
    assert all("egressDeny" in spec for spec in denied["specs"])
