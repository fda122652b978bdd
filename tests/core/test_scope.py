"""Rules for the cluster, not only for the capture (``cpg_core._synthesis.scope``, ARCHITECTURE §D47),
with plain values: each test names the decision it holds the plans to."""

from __future__ import annotations

from typing import Any

import pytest

from conftest import endpoint, flow_dict
from cpg_core._base.rules import (
    CLUSTER_ENTITY,
    EGRESS,
    INGRESS,
    Atom,
    EndpointPeer,
    rules_from_atoms,
)
from cpg_core._flows.parse import parse_flow
from cpg_core._synthesis.aggregate import AggregateOptions, Aggregator
from cpg_core._synthesis.scope import ClusterScope, is_dns_service

pytestmark = pytest.mark.unit

DNS = endpoint("kube-system", None, "k8s:k8s-app=kube-dns")


def plans(records: list[dict[str, Any]], **scope: Any) -> dict[str, set[Atom]]:
    aggregator = Aggregator(AggregateOptions(scope=ClusterScope(**scope)))
    for record in records:
        aggregator.add(parse_flow(record))
    return {f"{p.namespace}/{p.workload}": set(p.attribution) for p in aggregator.plans()}


def callers(count: int, port: int = 9000, server: Any = None) -> list[dict[str, Any]]:
    server = server or endpoint("shared", "svc")
    return [flow_dict(src=endpoint(f"ns-{i}", "app"), dst=server, tcp=port) for i in range(count)]


def test_a_port_callers_of_five_namespaces_reach_admits_the_cluster() -> None:
    wide = plans(callers(5))["shared/svc"]
    assert wide == {Atom(INGRESS, CLUSTER_ENTITY, "TCP", 9000)}
    narrow = plans(callers(4))["shared/svc"]
    assert len(narrow) == 4 and CLUSTER_ENTITY not in {a.peer for a in narrow}
    assert len(plans(callers(5), service_namespaces=6)["shared/svc"]) == 5
    assert len(plans(callers(9), exact=frozenset({"shared/svc"}))["shared/svc"]) == 9


def test_the_dns_service_admits_the_cluster_on_both_protocols_from_one_caller() -> None:
    records = [flow_dict(src=endpoint("shop", "api"), dst=DNS, udp=53)]
    got = plans(records, include_system=True)
    assert got["kube-system/kube-dns"] == {
        Atom(INGRESS, CLUSTER_ENTITY, "UDP", 53),
        Atom(INGRESS, CLUSTER_ENTITY, "TCP", 53),
    }
    # without include_system, that cluster rule is all a system workload gets
    assert plans(records)["kube-system/kube-dns"] == got["kube-system/kube-dns"]


def test_a_client_of_five_namespaces_reaches_the_cluster_on_that_port() -> None:
    scraper = endpoint("monitoring", "prometheus")
    records = [
        flow_dict(src=scraper, dst=endpoint(f"ns-{i}", "app"), direction="EGRESS", tcp=9090)
        for i in range(5)
    ]
    atoms = plans(records, dns=False)["monitoring/prometheus"]
    assert atoms == {Atom(EGRESS, CLUSTER_ENTITY, "TCP", 9090)}


def test_every_egress_policy_gets_dns_on_both_protocols_and_visibility_with_l7() -> None:
    records = [
        flow_dict(
            src=endpoint("shop", "api"),
            dst=endpoint("shop", "db"),
            direction="EGRESS",
            tcp=5432,
        )
    ]
    well_known = EndpointPeer("kube-system", (("k8s-app", "kube-dns"),))
    atoms = plans(records)["shop/api"]
    assert {a for a in atoms if a.port == 53} == {
        Atom(EGRESS, well_known, "UDP", 53),
        Atom(EGRESS, well_known, "TCP", 53),
    }
    assert not any(a.port == 53 for a in plans(records, dns=False)["shop/api"])
    aggregator = Aggregator(AggregateOptions(l7=True))
    aggregator.add(parse_flow(records[0]))
    (plan,) = aggregator.plans()
    (rule,) = [r for r in plan.rules if r.dns]
    assert rule.dns == ("*",) and rule.peer == well_known


def test_rules_from_atoms_folds_pod_peers_into_the_cluster_rule_of_their_port() -> None:
    pod = EndpointPeer("ns-1", (("app", "x"),))
    other_cluster = EndpointPeer("ns-1", (("app", "x"),), "west")
    rules = rules_from_atoms(
        [
            Atom(INGRESS, CLUSTER_ENTITY, "TCP", 9000),
            Atom(INGRESS, pod, "TCP", 9000),
            Atom(INGRESS, pod, "TCP", 22),
            Atom(INGRESS, other_cluster, "TCP", 9000),
        ]
    )
    by_peer = {r.peer: r.ports for r in rules}
    assert by_peer == {
        CLUSTER_ENTITY: ((9000, "TCP"),),
        pod: ((22, "TCP"),),  # another port stays the pod's
        other_cluster: ((9000, "TCP"),),  # another cluster is no part of this one
    }


def test_only_the_clusters_dns_pods_are_its_dns_service() -> None:
    assert is_dns_service(EndpointPeer("kube-system", (("k8s-app", "coredns"),)), serves=False)
    assert is_dns_service(EndpointPeer("kube-system", (("app", "dns"),)), serves=True)
    assert not is_dns_service(EndpointPeer("kube-system", (("app", "cilium"),)), serves=False)
    assert not is_dns_service(EndpointPeer("shop", (("app", "dnsmasq"),)), serves=True)
