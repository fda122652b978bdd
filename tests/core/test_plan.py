"""The plan (``cpg_core._review.plan``): what applying proposed policies changes, judged on a capture
with every verdict, as plain values: flows in, a Plan out. What the CLI adds (flags, exit
codes, files) is tested in tests/cli/test_plan_cli.py."""

from __future__ import annotations

import copy
from typing import Any

import attrs

from conftest import endpoint, flow_dict
from cpg_core._base.flow import Flow
from cpg_core._flows.parse import parse_flow
from cpg_core._policy.agent import AgentSettings
from cpg_core._review.plan import PlanJudge, plan

CLUSTER = "k8s:io.cilium.k8s.policy.cluster="


def flow(**fields: Any) -> Flow:
    parsed = parse_flow(flow_dict(**fields))
    assert isinstance(parsed, Flow)
    return parsed


def works(**fields: Any) -> Flow:
    """A flow that is forwarded today."""
    return flow(verdict="FORWARDED", reason=None, **fields)


def cnp(name: str, app: str, **sections: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"endpointSelector": {"matchLabels": {"app": app}}, **sections}
    return {
        "apiVersion": "cilium.io/v2",
        "kind": "CiliumNetworkPolicy",
        "metadata": {"name": name, "namespace": "shop"},
        "spec": spec,
    }


def from_app(app: str, port: int) -> dict[str, Any]:
    return {
        "fromEndpoints": [{"matchLabels": {"app": app}}],
        "toPorts": [{"ports": [{"port": str(port), "protocol": "TCP"}]}],
    }


CART = cnp("cpg-cart", "cart", ingress=[from_app("frontend", 8080)])
"""Admits shop/frontend → shop/cart TCP/8080 and nothing else into cart."""
DENIED = flow()  # shop/frontend → shop/cart TCP/8080, POLICY_DENIED at cart's ingress
FRONTEND = works()  # the same traffic, forwarded
ADMIN = works(src=endpoint("shop", "admin"), tcp=9090)


def test_traffic_that_works_and_no_rule_admits_would_break_with_its_rule() -> None:
    result = plan([DENIED, FRONTEND, ADMIN], [CART], [])
    assert result.verdict == "breaks"
    assert (result.candidates, result.fixed, result.forwarded_flows) == (1, 1, 2)
    (item,) = result.would_break
    traffic = item.traffic
    assert (traffic.direction, traffic.source, traffic.destination) == (
        "ingress",
        "shop/admin",
        "shop/cart",
    )
    assert (traffic.protocol, traffic.port, traffic.flows) == ("TCP", 9090, 1)
    assert item.policy == "shop/cpg-cart" and item.endpoint == "shop/cart"
    assert "would put it in default-deny" in item.why
    assert "app: admin" in item.rule_yaml and 'port: "9090"' in item.rule_yaml
    (newly,) = result.newly_enforced
    assert (newly.workload, newly.direction, newly.forwarded_flows) == ("cart", "ingress", 2)
    assert result.policies[0].would_break == 1 and result.policies[0].fixes == 1


def test_a_proposal_that_admits_all_working_traffic_breaks_nothing() -> None:
    wider = cnp("cpg-cart", "cart", ingress=[from_app("frontend", 8080), from_app("admin", 9090)])
    result = plan([DENIED, FRONTEND, ADMIN], [wider], [])
    assert result.verdict == "nothing_breaks" and not result.would_break
    assert result.fixed == result.candidates == 1


def test_a_capture_of_drops_alone_cannot_say_nothing_breaks() -> None:
    result = plan([DENIED], [CART], [])
    assert result.verdict == "cannot_judge" and not result.can_judge
    assert result.fixed == 1


def test_without_the_current_policies_a_drop_shows_the_endpoint_is_policed_today() -> None:
    # cart dropped traffic by policy, so something polices it already: what works today was
    # admitted by that unknown policy, and the proposal cannot be said to break it.
    inferred = plan([DENIED, FRONTEND, ADMIN], [CART], None)
    assert inferred.verdict == "nothing_breaks" and not inferred.newly_enforced
    assert plan([DENIED, FRONTEND, ADMIN], [CART], []).verdict == "breaks"


def test_a_proposed_policy_replaces_the_applied_one_of_the_same_name() -> None:
    applied = cnp(
        "cpg-cart", "cart", ingress=[{"fromEndpoints": [{"matchLabels": {"app": "admin"}}]}]
    )
    result = plan([ADMIN, FRONTEND], [CART], [applied])
    assert [item.traffic.source for item in result.would_break] == ["shop/admin"]
    (diff,) = result.diffs
    assert diff.status == "changed"
    assert diff.added == ("ingress from endpoints app=frontend TCP/8080",)
    assert diff.removed == ("ingress from endpoints app=admin any port",)


def test_the_nodes_own_traffic_breaks_only_when_allow_localhost_is_policy() -> None:
    probe = works(src={"identity": 1, "labels": ["reserved:host"]}, src_ip="10.0.0.9", tcp=8081)
    always = plan([FRONTEND, probe], [CART], [])
    assert always.verdict == "nothing_breaks" and always.node_flows == 1
    assert any("allow-localhost: always" in note for note in always.notes)
    policed = plan([FRONTEND, probe], [CART], [], agent=AgentSettings(allow_localhost=False))
    assert [item.traffic.source for item in policed.would_break] == ["host"]


def test_a_denied_probe_in_the_capture_shows_the_agents_police_the_node() -> None:
    probe = {"identity": 1, "labels": ["reserved:host"]}
    denied = flow(src=probe, src_ip="10.0.0.9", tcp=8081)
    working = works(src=probe, src_ip="10.0.0.9", tcp=8082)
    result = plan([FRONTEND, denied, working], [CART], [])
    assert any("allow-localhost: policy" in note for note in result.notes)
    assert [item.traffic.port for item in result.would_break] == [8082]


def test_replies_never_break() -> None:
    reply = works(src=endpoint("shop", "admin"), tcp=9090, reply=True)
    result = plan([FRONTEND, reply], [CART], [])
    assert result.verdict == "nothing_breaks" and result.forwarded_flows == 1


def test_traffic_seen_at_one_end_is_judged_at_the_other() -> None:
    # Seen at cart's ingress; the proposal puts frontend's egress into default-deny.
    egress = cnp(
        "cpg-frontend",
        "frontend",
        egress=[
            {
                "toEndpoints": [{"matchLabels": {"app": "db"}}],
                "toPorts": [{"ports": [{"port": "5432", "protocol": "TCP"}]}],
            }
        ],
    )
    result = plan([FRONTEND], [egress], [])
    (item,) = result.would_break
    assert (item.traffic.direction, item.policy) == ("egress", "shop/cpg-frontend")
    # and a drop the proposal admits at cart is not fixed while frontend cannot send it
    to_db = works(
        src=endpoint("shop", "frontend"), dst=endpoint("shop", "db"), direction="EGRESS", tcp=5432
    )
    blocked = plan([DENIED, to_db], [CART, egress], [])
    assert (blocked.candidates, blocked.fixed) == (1, 0)
    assert [t.source for t in blocked.not_fixed] == ["shop/frontend"]


def test_a_selector_without_a_cluster_selects_the_local_cluster_only() -> None:
    def pod(cluster: str, app: str) -> dict[str, Any]:
        return endpoint("shop", app, f"{CLUSTER}{cluster}", cluster_name=cluster)

    remote = works(src=pod("west", "frontend"), dst=pod("east", "cart"))
    assert plan([remote], [CART], []).verdict == "breaks"
    before_119 = plan([remote], [CART], [], agent=AgentSettings(default_local_cluster=False))
    assert before_119.verdict == "nothing_breaks"
    assert any("policy-default-local-cluster off" in note for note in before_119.notes)


def test_the_judge_answers_as_the_plan_of_the_flows_so_far() -> None:
    flows = [DENIED, FRONTEND, ADMIN, works(src=endpoint("shop", "admin"), tcp=9090)]
    judge = PlanJudge([CART], [])
    for count, each in enumerate(flows, 1):
        judge.add(each)
        assert judge.plan() == plan(flows[:count], [CART], []), count
    assert judge.flows == 4
    assert judge.plan().would_break[0].traffic.flows == 2  # one kind of traffic, counted


def test_a_verdict_kept_between_plans_is_judged_again_once_dns_names_a_peer() -> None:
    """The judge keeps each kind of traffic's verdict from one plan to the next, but a name
    DNS gives an address later can change it (a toFQDNs rule): the next plan judges again."""
    egress = [
        {
            "toFQDNs": [{"matchName": "api.example.com"}],
            "toPorts": [{"ports": [{"port": "443", "protocol": "TCP"}]}],
        }
    ]
    policy = cnp("cpg-cart", "cart", egress=egress)
    out = works(
        src=endpoint("shop", "cart"),
        dst={"identity": 2, "labels": ["reserved:world"]},
        dst_ip="1.2.3.4",
        direction="EGRESS",
        tcp=443,
    )
    answer = works(
        src=endpoint("shop", "cart"),
        dst=endpoint("kube-system", "kube-dns"),
        direction="EGRESS",
        tcp=None,
        udp=53,
        l7={"type": "RESPONSE", "dns": {"query": "api.example.com.", "ips": ["1.2.3.4"]}},
    )
    judge = PlanJudge([policy], [])
    judge.add(out)
    before = judge.plan()
    assert [(b.traffic.destination, b.traffic.port) for b in before.would_break] == [("world", 443)]
    judge.add(answer)
    after = judge.plan()
    assert after == plan([out, answer], [policy], [])
    assert ("world", 443) not in [
        (b.traffic.destination, b.traffic.port) for b in after.would_break
    ]


def _callers(count: int) -> list[Flow]:
    """Forwarded traffic into cart from ``count`` workloads: a kind of traffic each."""
    return [works(src=endpoint("shop", f"caller-{i}"), tcp=8080) for i in range(count)]


def test_a_judge_with_a_cap_on_kinds_counts_the_rest_and_cannot_say_nothing_breaks() -> None:
    open_door = cnp("cpg-cart", "cart", ingress=[{"fromEntities": ["cluster"]}])
    judge = PlanJudge([open_door], [], max_kinds=10)
    for item in _callers(25):
        judge.add(item)
    result = judge.plan()
    assert not result.would_break and result.forwarded_flows == 10
    assert result.unjudged_flows == 15 and judge.kept.unjudged == 15
    assert result.verdict == "cannot_judge"  # 15 flows were never judged
    assert any("15 flows" in note and "10 kinds" in note for note in result.notes)
    # A kind already kept is still counted once the cap is reached.
    judge.add(_callers(1)[0])
    assert judge.plan().forwarded_flows == 11 and judge.kept.unjudged == 15
    uncapped = PlanJudge([open_door], [])
    for item in _callers(25):
        uncapped.add(item)
    assert uncapped.plan().verdict == "nothing_breaks" and uncapped.plan().unjudged_flows == 0


def test_a_snapshot_plans_what_was_added_before_it_and_shares_what_planning_learns() -> None:
    judge = PlanJudge([CART], [])
    for item in [DENIED, FRONTEND, ADMIN]:
        judge.add(item)
    copied = judge.snapshot()
    judge.add(works(src=endpoint("shop", "ops"), tcp=22))  # after the copy: not in its plan
    planned = copied.plan()
    assert planned == plan([DENIED, FRONTEND, ADMIN], [CART], [])
    judge.keep_memos(copied)
    assert judge.memos is copied.memos and judge.memos.diffs_found is not None
    later = judge.plan()
    assert {b.traffic.port for b in later.would_break} == {9090, 22}


def test_a_judge_changes_its_stream_as_flows_arrive_and_its_memos_as_it_plans() -> None:
    """What :meth:`add` changes is the stream alone and what planning learns the memos
    alone (the policies, their indexes and caches stay the same objects), so a snapshot
    copies one value and takes back the other."""
    judge = PlanJudge([CART], [])
    held = dict(vars(judge))
    for item in [DENIED, FRONTEND, ADMIN]:
        judge.add(item)
    assert {k for k, v in vars(judge).items() if v is not held[k]} == set()
    stream = _state(judge.stream)
    memos = judge.memos
    judge.plan()
    assert _state(judge.stream) == stream and judge.memos is memos
    assert judge.memos.diffs_found is not None and judge.memos.verdicts
    copied = judge.snapshot()
    judge.add(works(src=endpoint("shop", "ops"), tcp=22))
    assert _state(copied.stream) == stream and _state(judge.stream) != stream
    assert copied.memos == judge.memos and copied.memos is not judge.memos


def _state(stream: Any) -> dict[str, Any]:
    """What a stream holds, as plain values (a copy: the stream goes on changing)."""
    fields = attrs.asdict(stream, recurse=False)
    kept = fields.pop("kept")
    for name in ("groups", "mirrored", "undirected"):
        fields[name] = {key: (g.first, g.flows) for key, g in fields[name].items()}
    return copy.deepcopy({**fields, "kept": (kept.cap, kept.unjudged)})
