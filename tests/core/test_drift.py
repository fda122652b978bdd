"""How the cluster drifted away from the applied policies (``cpg_core._review.drift``), as plain
values: the policies and evidence cpg made from one capture, the flows of a later one, the
drift out. The CLI is tested in tests/cli/test_drift_cli.py."""

from __future__ import annotations

from typing import Any

import pytest

from conftest import endpoint, flow_dict, jsonl
from cpg_core import PolicyEvidence, generate
from cpg_core._base.flow import Flow
from cpg_core._flows.parse import parse_flow
from cpg_core._review.drift import DriftJudge
from cpg_core.cilium import load_one

RULE = "ingress:ep:shop/app=frontend:TCP:8080"


def flow(**fields: Any) -> Flow:
    parsed = parse_flow(flow_dict(**fields))
    assert isinstance(parsed, Flow)
    return parsed


@pytest.fixture(scope="module")
def applied() -> tuple[dict[str, Any], dict[str, PolicyEvidence]]:
    """cpg's policy for shop/cart and its evidence, made from one drop on 2026-11-02."""
    cart = endpoint("shop", "cart", "k8s:version=v1", pod_name="cart-1")
    made = generate(jsonl([flow_dict(endpoint("shop", "frontend"), cart)]).splitlines())
    policy = load_one(made.policies["shop/cart"], "cart.yaml")
    assert isinstance(policy, dict)
    return policy, {f"shop/{policy['metadata']['name']}": made.evidence["shop/cart"]}


def test_a_policy_drop_of_a_selected_workload_needs_a_rule(applied: Any) -> None:
    policy, evidence = applied
    judge = DriftJudge([policy], evidence)
    judge.add(flow(src=endpoint("shop", "admin"), tcp=9090))
    drift = judge.drift("2026-11-03T00:00:00Z", 30)
    (needs,) = drift.needs_rule
    assert needs.policy == "shop/cpg-cart" and needs.drop_reason == "POLICY_DENIED"
    assert (needs.traffic.source, needs.traffic.port) == ("shop/admin", 9090)
    assert "app: admin" in needs.rule_yaml and drift.drifted


def test_pods_with_labels_the_evidence_never_showed_are_unseen(applied: Any) -> None:
    policy, evidence = applied
    judge = DriftJudge([policy], evidence)
    v2 = endpoint("shop", "cart", "k8s:version=v2", pod_name="cart-2")
    judge.add(flow(dst=v2, verdict="FORWARDED", reason=None))
    (unseen,) = judge.drift("2026-11-03T00:00:00Z", 30).unseen_pods
    assert unseen.selector == {"app": "cart"} and unseen.unseen == {"version": "v2"}
    assert unseen.pods == ("cart-2",) and unseen.flows == 1
    same = DriftJudge([policy], evidence)
    same.add(flow(dst=endpoint("shop", "cart", "k8s:version=v1"), verdict="FORWARDED", reason=None))
    assert not same.drift("2026-11-03T00:00:00Z", 30).unseen_pods


def test_a_rule_idle_longer_than_stale_after_is_stale_unless_the_capture_uses_it(
    applied: Any,
) -> None:
    policy, evidence = applied
    judge = DriftJudge([policy], evidence)
    other = endpoint("shop", "search")  # traffic the rule does not carry: judged, unused
    judge.add(flow(dst=other, verdict="FORWARDED", reason=None))
    idle = judge.drift("2026-12-20T00:00:00Z", 30)
    assert [(s.rule, s.idle_days) for s in idle.stale_rules] == [(RULE, 47.6)]
    # no flow judged: no rule's use seen, nothing stale (cannot judge)
    unjudged = DriftJudge([policy], evidence).drift("2026-12-20T00:00:00Z", 30)
    assert not unjudged.stale_rules and unjudged.verdict == "cannot_judge"
    assert not DriftJudge([policy], evidence).drift("2026-11-20T00:00:00Z", 30).stale_rules
    used = DriftJudge([policy], evidence)
    used.add(flow(verdict="FORWARDED", reason=None))  # frontend → cart 8080 still flows
    assert not used.drift("2026-12-20T00:00:00Z", 30).stale_rules


def test_a_policy_without_evidence_is_named_and_judged_for_drops_only(applied: Any) -> None:
    policy, _ = applied
    judge = DriftJudge([policy], {})
    judge.add(
        flow(dst=endpoint("shop", "cart", "k8s:version=v9"), verdict="FORWARDED", reason=None)
    )
    drift = judge.drift("2026-12-20T00:00:00Z", 30)
    assert drift.without_evidence == ("shop/cpg-cart",)
    assert not drift.unseen_pods and not drift.stale_rules and not drift.drifted


def test_replies_and_infrastructure_drops_need_no_rule(applied: Any) -> None:
    policy, evidence = applied
    judge = DriftJudge([policy], evidence)
    judge.add(flow(src=endpoint("shop", "admin"), tcp=9090, reply=True))
    judge.add(flow(src=endpoint("shop", "admin"), tcp=9090, reason="CT_MAP_INSERTION_FAILED"))
    drift = judge.drift("2026-11-03T00:00:00Z", 30)
    assert drift.flows == 2 and not drift.needs_rule


def test_a_drift_judge_with_a_cap_on_kinds_counts_the_drops_past_it(applied: Any) -> None:
    policy, evidence = applied
    judge = DriftJudge([policy], evidence, max_kinds=3)
    for i in range(8):
        judge.add(flow(src=endpoint("shop", f"admin-{i}"), tcp=9090))
    drift = judge.drift("2026-11-03T00:00:00Z", 30)
    assert len(drift.needs_rule) == 3
    assert (drift.unjudged_flows, drift.max_kinds) == (5, 3)


def test_a_drift_snapshot_is_judged_apart_from_what_arrives_after_it(applied: Any) -> None:
    policy, evidence = applied
    judge = DriftJudge([policy], evidence)
    judge.add(flow(src=endpoint("shop", "admin"), tcp=9090))
    copied = judge.snapshot()
    judge.add(flow(src=endpoint("shop", "ops"), tcp=22))
    assert len(copied.drift("2026-11-03T00:00:00Z", 30).needs_rule) == 1
    assert len(judge.drift("2026-11-03T00:00:00Z", 30).needs_rule) == 2
