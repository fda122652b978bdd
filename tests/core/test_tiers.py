"""Kubernetes ClusterNetworkPolicy tiers in the one matcher (``cpg_core._policy.tiers``): the Admin
tier, then the namespaced (Cilium) policies, then the Baseline tier, as the network-policy-api
defines them. Each test says which part of that definition it holds cpg to."""

from __future__ import annotations

from typing import Any

from conftest import endpoint, flow_dict
from cpg_core._base.flow import Flow
from cpg_core._flows.parse import parse_flow
from cpg_core._policy.matcher import judge_flow, match_flow
from cpg_core._policy.tiers import tier_verdict
from cpg_core._review.plan import plan

WEB = endpoint("shop", "web")
API = endpoint("shop", "api")
DEBUG = endpoint("tools", "debug")


def _flow(src: dict[str, Any] = WEB, dst: dict[str, Any] = API, **fields: Any) -> Flow:
    parsed = parse_flow(flow_dict(src, dst, **fields))
    assert isinstance(parsed, Flow)
    return parsed


def cnp(
    name: str,
    tier: str,
    priority: int,
    *ingress: dict[str, Any],
    subject: dict[str, Any] | None = None,
    egress: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "tier": tier,
        "priority": priority,
        "subject": subject
        or {"namespaces": {"matchLabels": {"kubernetes.io/metadata.name": "shop"}}},
    }
    if ingress:
        spec["ingress"] = list(ingress)
    if egress:
        spec["egress"] = egress
    return {
        "apiVersion": "policy.networking.k8s.io/v1alpha2",
        "kind": "ClusterNetworkPolicy",
        "metadata": {"name": name},
        "spec": spec,
    }


def rule(action: str, *peers: dict[str, Any], port: int | None = None) -> dict[str, Any]:
    found: dict[str, Any] = {"action": action, "from": list(peers) or [{"namespaces": {}}]}
    if port is not None:
        found["protocols"] = [{"tcp": {"destinationPort": {"number": port}}}]
    return found


FROM_SHOP = {"namespaces": {"matchLabels": {"kubernetes.io/metadata.name": "shop"}}}
FROM_WEB = {
    "pods": {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "shop"}},
        "podSelector": {"matchLabels": {"app": "web"}},
    }
}


def api_allows_web(**extra: Any) -> dict[str, Any]:
    """A namespaced Cilium policy: shop/api admits shop/web on TCP/8080 (and nothing else)."""
    return {
        "apiVersion": "cilium.io/v2",
        "kind": "CiliumNetworkPolicy",
        "metadata": {"name": "api", "namespace": "shop"},
        "spec": {
            "endpointSelector": {"matchLabels": {"app": "api"}},
            "ingress": [
                {
                    "fromEndpoints": [{"matchLabels": {"app": "web"}}],
                    "toPorts": [{"ports": [{"port": "8080", "protocol": "TCP"}]}],
                }
            ],
            **extra,
        },
    }


def test_an_admin_deny_beats_a_namespaced_allow() -> None:
    """ "The Admin tier takes precedence over all other policies … If Admin tier has made a
    final decision (Accept or Deny) on a connection, then no further evaluation is done":
    the namespaced policy that admits web → api never gets a say."""
    deny = cnp("lockdown", "Admin", 10, rule("Deny", FROM_WEB, port=8080))
    allowed = match_flow([api_allows_web()], _flow())
    assert allowed.allowed
    result = match_flow([api_allows_web(), deny], _flow())
    assert not result.allowed and result.denied and result.policy == "lockdown"
    assert "Admin tier" in result.reason and "ingress[0]" in result.reason
    assert not judge_flow([api_allows_web(), deny], _flow()).allowed
    # a port the Deny does not name is the namespaced policy's to judge again
    assert not match_flow([api_allows_web(), deny], _flow(tcp=9090)).denied


def test_an_admin_accept_beats_a_namespaced_deny_and_default_deny() -> None:
    """ "Accept: Accepts the selected traffic … No further ClusterNetworkPolicy or
    NetworkPolicy rules will be processed": even an explicit Cilium deny rule, and the
    default-deny of a pod its policy selects, give way."""
    deny_rule = {"ingressDeny": [{"fromEndpoints": [{"matchLabels": {"app": "debug"}}]}]}
    debug = _flow(src=DEBUG, tcp=22)
    policies = [api_allows_web(**deny_rule)]
    assert not judge_flow(policies, debug).allowed  # policed, and no rule admits it
    accept = cnp(
        "ops-access",
        "Admin",
        5,
        rule("Accept", {"namespaces": {"matchLabels": {"kubernetes.io/metadata.name": "tools"}}}),
    )
    judged = judge_flow([*policies, accept], debug)
    assert judged.allowed and "accepted by ClusterNetworkPolicy ops-access" in judged.result.reason


def test_pass_hands_the_connection_down_to_the_namespaced_policies() -> None:
    """ "Pass: Skips all further ClusterNetworkPolicy rules in the current tier for the
    selected traffic, and passes evaluation to the next tier": a Pass at priority 5 makes a
    Deny at priority 10 of the same tier irrelevant, and the namespaced policy decides."""
    passing = cnp("delegate-shop", "Admin", 5, rule("Pass", FROM_SHOP))
    deny = cnp("deny-all", "Admin", 10, rule("Deny", {"namespaces": {}}))
    assert match_flow([api_allows_web(), deny], _flow()).denied
    assert match_flow([api_allows_web(), passing, deny], _flow()).allowed
    # …and what the namespaced policy does not admit stays denied (its default-deny)
    assert not judge_flow([api_allows_web(), passing, deny], _flow(tcp=9090)).allowed


def test_priorities_order_the_admin_tier_lower_numbers_first() -> None:
    """ "Policies with lower priority values have higher precedence, and are checked before
    policies with higher priority values in the same tier", whatever their order in the
    folder."""
    accept = cnp("b-accept", "Admin", 1, rule("Accept", FROM_WEB))
    deny = cnp("a-deny", "Admin", 2, rule("Deny", FROM_WEB))
    for order in ([accept, deny], [deny, accept]):
        assert match_flow(order, _flow()).policy == "b-accept"
    later = cnp("b-accept", "Admin", 3, rule("Accept", FROM_WEB))
    assert match_flow([later, deny], _flow()).policy == "a-deny"


def test_a_baseline_allow_under_a_namespaced_default_deny_does_nothing() -> None:
    """ "NetworkPolicy tier … always makes a final decision for selected pods. Further
    evaluation only happens for Pods not selected by a v1.NetworkPolicy": shop/api, which a
    namespaced policy selects for ingress, stays in its default-deny for debug's traffic
    though the Baseline accepts it; a pod no policy selects gets the Baseline's verdict."""
    accept = cnp("baseline-ops", "Baseline", 100, rule("Accept", {"namespaces": {}}))
    deny = cnp("baseline-deny", "Baseline", 100, rule("Deny", {"namespaces": {}}))
    debug_to_api = _flow(src=DEBUG, tcp=22)
    assert not judge_flow([api_allows_web(), accept], debug_to_api).allowed
    unpoliced = _flow(src=DEBUG, dst=endpoint("shop", "cart"), tcp=22)
    assert judge_flow([api_allows_web(), accept], unpoliced).allowed
    result = match_flow([api_allows_web(), deny], unpoliced)
    assert result.denied and "Baseline tier" in result.reason
    # with no Baseline rule either, Kubernetes' default allows it
    assert judge_flow([api_allows_web()], unpoliced).allowed


def test_an_admin_pass_reaches_the_baseline_for_a_pod_nothing_else_selects() -> None:
    passing = cnp("delegate", "Admin", 1, rule("Pass", {"namespaces": {}}))
    deny = cnp("baseline-deny", "Baseline", 1, rule("Deny", {"namespaces": {}}))
    to_cart = _flow(dst=endpoint("shop", "cart"))
    assert match_flow([passing, deny], to_cart).policy == "baseline-deny"


def test_subjects_peers_networks_and_protocols_select_as_written() -> None:
    """Subjects and peers select pods by their namespace's labels (the namespace's name is
    always one) and their own; ``networks`` select addresses, pods' included ("cluster-
    internal traffic will be checked against the rule as well"); protocols name ports or
    ranges."""
    labelled_web = endpoint("shop", "web", "k8s:io.cilium.k8s.namespace.labels.team=payments")
    by_team = cnp(
        "team",
        "Admin",
        1,
        rule("Deny", {"namespaces": {"matchLabels": {"team": "payments"}}}),
    )
    assert match_flow([by_team], _flow(src=labelled_web)).denied
    assert not match_flow([by_team], _flow()).denied  # web without that namespace label
    ranged = cnp(
        "ranged",
        "Admin",
        1,
        {
            "action": "Deny",
            "from": [{"namespaces": {}}],
            "protocols": [{"tcp": {"destinationPort": {"range": {"start": 8000, "end": 8100}}}}],
        },
    )
    assert match_flow([ranged], _flow(tcp=8080)).denied
    assert not match_flow([ranged], _flow(tcp=9090)).denied
    assert not match_flow([ranged], _flow(tcp=None, udp=8080)).denied
    egress = cnp(
        "no-metadata",
        "Admin",
        1,
        subject={"pods": {"namespaceSelector": {}, "podSelector": {"matchLabels": {"app": "web"}}}},
        egress=[{"action": "Deny", "to": [{"networks": ["10.0.0.0/24"]}]}],
    )
    out = _flow(dst=API, direction="EGRESS", dst_ip="10.0.0.2")
    assert match_flow([egress], out).denied  # a pod's address is in the network
    assert not match_flow([egress], _flow(dst=API, direction="EGRESS", dst_ip="10.9.0.2")).denied
    # the subject is web: api's egress is not this policy's
    assert (
        tier_verdict(
            [egress], "Admin", _flow(src=API, dst=WEB, direction="EGRESS", dst_ip="10.0.0.2")
        )
        is None
    )


def test_a_peer_of_an_unknown_kind_fails_closed() -> None:
    """ "If an implementation sees no fields are set … it should fail closed": an Accept rule
    with such a peer matches nothing, a Deny rule everything."""
    unknown = {"someFuturePeer": {"x": 1}}
    accept = cnp("future-accept", "Admin", 1, rule("Accept", unknown))
    deny = cnp("future-deny", "Admin", 1, rule("Deny", unknown))
    assert match_flow([accept], _flow()).allowed is False
    assert match_flow([deny], _flow()).denied


def test_the_plan_says_what_a_proposed_admin_deny_would_break() -> None:
    """Traffic that works today and that a proposed Admin Deny selects would break, whatever
    the namespaced policies say; the plan names the ClusterNetworkPolicy and its rule."""
    works = [
        _flow(verdict="FORWARDED", reason=None, time=f"2026-11-02T10:00:0{i}Z") for i in range(3)
    ]
    deny = cnp("lockdown", "Admin", 10, rule("Deny", FROM_WEB, port=8080))
    planned = plan(works, [deny], None, current_source="flows")
    (item,) = planned.would_break
    assert item.policy == "lockdown" and item.traffic.flows == 3
    assert "Admin tier" in item.why and "lockdown" in item.fix
    assert plan(works, [], None, current_source="flows").would_break == ()


def test_pods_and_namespaces_peers_are_the_local_clusters_only() -> None:
    """Cilium scopes a ClusterNetworkPolicy's ``pods`` and ``namespaces`` peers to the local
    cluster: a Baseline Accept of every namespace admits no pod of another ClusterMesh
    cluster, and an Admin Deny of them denies none."""
    local = {**WEB, "cluster_name": "default"}
    remote = {**WEB, "cluster_name": "west"}
    target = {**API, "cluster_name": "default"}
    accept = cnp("baseline", "Baseline", 10, rule("Accept", {"namespaces": {}}))
    by_pods = cnp("baseline", "Baseline", 10, rule("Accept", {"pods": {"podSelector": {}}}))
    for policy in (accept, by_pods):
        assert tier_verdict([policy], "Baseline", _flow(local, target)) is not None
        assert tier_verdict([policy], "Baseline", _flow(remote, target)) is None
    deny = cnp("admin", "Admin", 10, rule("Deny", {"namespaces": {}}))
    assert tier_verdict([deny], "Admin", _flow(remote, target)) is None
    assert tier_verdict([deny], "Admin", _flow(local, target)) is not None
