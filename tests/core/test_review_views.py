"""The review report's views on plain values: edge labels that never overlap, the namespace
matrix, and coverage."""

from __future__ import annotations

import random
from typing import Any

from cpg_core._reports._coverage import coverage
from cpg_core._reports._layout import label_box, place_labels
from cpg_core._reports._matrix import namespace_matrix
from cpg_core._reports.graph import OUTSIDE, Link, Node
from cpg_core._review.plan_documents import NewlyEnforced


def _overlap(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def test_placed_labels_never_overlap_each_other_or_the_obstacles() -> None:
    rng = random.Random(3)
    for _ in range(30):
        curves = []
        for _ in range(rng.randrange(5, 120)):
            a = (rng.uniform(0, 600), rng.uniform(0, 600))
            b = (rng.uniform(0, 600), rng.uniform(0, 600))
            curves.append((a, (a[0] + 50, a[1]), (b[0] - 50, b[1]), b))
        texts = [rng.choice(["TCP/8080", "UDP/53", "TCP/9090 +3", "ICMP type 8"]) for _ in curves]
        obstacles = [
            (x, y, x + 160, y + 30)
            for x, y in ((rng.uniform(0, 600), rng.uniform(0, 600)) for _ in range(15))
        ]
        places = place_labels(curves, texts, obstacles)
        boxes = [
            label_box(x, y, t)
            for spot, t in zip(places, texts, strict=True)
            if spot
            for x, y in [spot]
        ]
        for i, box in enumerate(boxes):
            assert not any(_overlap(box, o) for o in obstacles)
            assert not any(_overlap(box, other) for other in boxes[i + 1 :])
        assert any(places)  # the space is not so full that nothing fits


def test_a_label_with_room_sits_at_the_middle_of_its_edge_and_one_without_is_left_out() -> None:
    curve = ((0.0, 100.0), (50.0, 100.0), (150.0, 100.0), (200.0, 100.0))
    assert place_labels([curve], ["TCP/80"]) == [(100.0, 100.0)]
    everywhere = [(-1000.0, -1000.0, 1000.0, 1000.0)]
    assert place_labels([curve], ["TCP/80"], everywhere) == [None]
    # two edges on the same line: the second label moves along, off the first
    first, second = place_labels([curve, curve], ["TCP/80", "TCP/80"])
    assert first == (100.0, 100.0) and second is not None and second != first


def _wl(namespace: str, name: str) -> Node:
    return Node(f"wl:{namespace}/{name}", name, "workload", namespace, name)


def test_the_matrix_has_a_cell_per_namespace_pair_with_the_most_urgent_status() -> None:
    web, api, db = _wl("shop", "web"), _wl("shop", "api"), _wl("data", "db")
    prom, world = _wl("monitoring", "prometheus"), Node("cidr:1.2.3.4/32", "1.2.3.4/32", "cidr")
    nodes = [web, api, db, prom, world]
    links = [
        Link(web.id, api.id, ("TCP/8080",), ""),
        Link(api.id, db.id, ("TCP/5432",), ""),
        Link(prom.id, api.id, ("TCP/9090",), ""),
        Link(prom.id, db.id, ("TCP/9090",), "", breaks=True),
        Link(prom.id, web.id, ("TCP/9100",), ""),
        Link(api.id, world.id, ("TCP/443",), ""),
    ]
    matrix = namespace_matrix(nodes, links, {(db.id, "ingress")})
    assert matrix.groups == ("data", "monitoring", "shop", OUTSIDE)
    cells = {(c.source, c.target): c for c in matrix.cells}
    assert set(cells) == {
        ("shop", "shop"),
        ("shop", "data"),
        ("monitoring", "shop"),
        ("monitoring", "data"),
        ("shop", OUTSIDE),
    }
    assert cells[("monitoring", "shop")].connections == 2
    assert cells[("monitoring", "shop")].ports == ("TCP/9090", "TCP/9100")
    assert cells[("monitoring", "data")].status == "breaks"
    assert cells[("shop", "data")].status == "newly"  # into db, which the plan newly enforces
    assert cells[("shop", "shop")].status == "allowed"
    # egress of a newly enforced workload marks what leaves it, not what reaches it
    egress = namespace_matrix(nodes, links, {(db.id, "egress")})
    assert {c.status for c in egress.cells if c.target == "data"} == {"allowed", "breaks"}


def _policy(namespace: str, selector: dict[str, Any], **rules: Any) -> dict[str, Any]:
    return {
        "apiVersion": "cilium.io/v2",
        "kind": "CiliumNetworkPolicy",
        "metadata": {"name": "p", "namespace": namespace},
        "spec": {"endpointSelector": selector, **rules},
    }


def test_coverage_counts_each_direction_per_namespace() -> None:
    peer = [{"fromEndpoints": [{"matchLabels": {"app": "web"}}]}]
    to_db = [
        {"toEndpoints": [{"matchLabels": {"app": "db", "k8s:io.kubernetes.pod.namespace": "data"}}]}
    ]
    policies = [
        _policy("shop", {"matchLabels": {"app": "api"}}, ingress=peer),
        _policy("shop", {"matchLabels": {"app": "web"}}, egress=to_db),
        _policy("shop", {"matchLabels": {"app": "cart"}}, ingressDeny=peer),  # a deny polices
    ]
    found = coverage(policies, {}, peers=[("shop", "worker"), ("data", "db")])
    rows = {row.namespace: row for row in found.namespaces}
    # workloads: the policies' targets and the peers the graph shows
    assert rows["shop"].workloads == 4 and rows["data"].workloads == 1
    assert rows["shop"].ingress == 2 and rows["shop"].ingress_open == ("web", "worker")
    assert rows["shop"].egress == 1 and rows["shop"].egress_open == ("api", "cart", "worker")
    assert (found.workloads, found.ingress, found.egress) == (5, 2, 1)
    assert found.share("ingress") == "40 %"


def test_an_empty_selector_covers_its_namespace_and_a_clusterwide_one_everything() -> None:
    peers = [("shop", "api"), ("shop", "web"), ("data", "db")]
    deny_all = [{}]
    shop = coverage([_policy("shop", {}, ingress=deny_all)], {}, peers=peers)
    assert {r.namespace: r.ingress for r in shop.namespaces} == {"shop": 2, "data": 0}
    clusterwide = {
        "apiVersion": "cilium.io/v2",
        "kind": "CiliumClusterwideNetworkPolicy",
        "metadata": {"name": "baseline"},
        "spec": {"endpointSelector": {}, "egress": deny_all},
    }
    everything = coverage([clusterwide], {}, peers=peers)
    assert (everything.egress, everything.ingress) == (3, 0)


def test_a_plans_newly_enforced_workloads_count_as_covered() -> None:
    from cpg_core._review.plan_documents import Plan

    newly = NewlyEnforced(
        namespace="shop",
        workload="api",
        labels={"app": "api"},
        direction="egress",
        policies=("shop/p",),
        forwarded_flows=3,
    )
    plan = Plan(
        current_source="flows",
        blind_spots="",
        candidates=0,
        fixed=0,
        not_fixed=(),
        would_break=(),
        newly_enforced=(newly,),
        diffs=(),
        confidence=(),
        policies=(),
        forwarded_flows=3,
    )
    found = coverage([], {}, plan)
    assert (found.workloads, found.ingress, found.egress) == (1, 0, 1)
