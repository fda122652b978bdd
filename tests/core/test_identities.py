"""Identity where Hubble leaves it out (``cpg_core._flows.identities``): each kind of resolution,
the trust an IP earns, and what the aggregator makes of a resolved flow."""

from __future__ import annotations

from typing import Any

import pytest

from conftest import WORLD, endpoint, flow_dict
from cpg_core import AggregateOptions, Aggregator, Decision
from cpg_core._base.flow import Flow
from cpg_core._flows.parse import parse_flow
from cpg_core.identities import (
    IDENTITY,
    OWNER,
    UNTRUSTED,
    WORLD_POD,
    IdentityInputError,
    identity_book,
    joined_books,
)

DNS_LABELS = [
    "k8s:io.cilium.k8s.policy.serviceaccount=kube-dns",
    "k8s:io.kubernetes.pod.namespace=kube-system",
    "k8s:k8s-app=kube-dns",
]


def flow(**fields: Any) -> Flow:
    parsed = parse_flow(flow_dict(**fields))
    assert isinstance(parsed, Flow)
    return parsed


def cep(
    name: str, ip: str, *, created: str = "2026-11-01T00:00:00Z", **more: Any
) -> dict[str, Any]:
    """A CiliumEndpoint as kubectl prints it."""
    return {
        "apiVersion": "cilium.io/v2",
        "kind": "CiliumEndpoint",
        "metadata": {"name": name, "namespace": "kube-system", "creationTimestamp": created},
        "status": {
            "identity": {"id": 796, "labels": DNS_LABELS},
            "networking": {"addressing": [{"ipv4": ip}]},
            **more,
        },
    }


def to_world(pod: str = "", ip: str = "10.156.3.6", **fields: Any) -> Flow:
    """shop/api → the world at ``ip`` (a pod Hubble could not name), forwarded egress."""
    peer = {**WORLD, "namespace": "kube-system", "pod_name": pod} if pod else WORLD
    return flow(
        src=endpoint("shop", "api"),
        dst=peer,
        dst_ip=ip,
        direction="EGRESS",
        verdict="FORWARDED",
        reason=None,
        udp=53,
        tcp=None,
        **fields,
    )


BOOK = identity_book([{"kind": "List", "items": [cep("kube-dns-7qmtw", "10.156.3.6")]}])


def test_a_pod_reported_as_the_world_with_its_name_becomes_that_pod() -> None:
    resolved, kinds = BOOK.resolve(to_world("kube-dns-7qmtw"))
    assert kinds == (WORLD_POD,)
    peer = resolved.destination
    assert peer.labels == tuple(DNS_LABELS) and peer.namespace == "kube-system"
    assert peer.pod_name == "kube-dns-7qmtw" and peer.identity == 796
    assert resolved.source == to_world().source  # the side Hubble named is left alone


def test_an_ip_another_pod_holds_now_is_not_trusted() -> None:
    # The snapshot was taken after the capture and the IP went to another pod meanwhile.
    resolved, kinds = BOOK.resolve(to_world("kube-dns-OLD"))
    assert kinds == (UNTRUSTED,) and resolved == to_world("kube-dns-OLD")


def test_without_a_pod_name_an_ip_is_trusted_only_for_a_pod_older_than_the_flow() -> None:
    older, kinds = BOOK.resolve(to_world(time="2026-11-02T10:00:00Z"))
    assert kinds == (WORLD_POD,) and older.destination.pod_name == "kube-dns-7qmtw"
    newer = identity_book([cep("kube-dns-new", "10.156.3.6", created="2026-11-03T00:00:00Z")])
    kept, kinds = newer.resolve(to_world(time="2026-11-02T10:00:00Z"))
    assert kinds == (UNTRUSTED,) and kept == to_world(time="2026-11-02T10:00:00Z")
    undated = cep("kube-dns-x", "10.156.3.6")
    del undated["metadata"]["creationTimestamp"]
    assert identity_book([undated]).resolve(to_world())[1] == (UNTRUSTED,)


def test_an_identity_number_without_labels_gets_its_cilium_identitys() -> None:
    book = identity_book(
        [
            {
                "kind": "CiliumIdentity",
                "metadata": {"name": "31337"},
                "security-labels": {
                    "k8s:app": "cart",
                    "k8s:io.kubernetes.pod.namespace": "shop",
                },
            }
        ]
    )
    bare = flow(dst={"identity": 31337}, reason="POLICY_DENIED")
    resolved, kinds = book.resolve(bare)
    assert kinds == (IDENTITY,)
    assert resolved.destination.labels == ("k8s:app=cart", "k8s:io.kubernetes.pod.namespace=shop")
    assert resolved.destination.namespace == "shop"
    reserved = flow(dst={"identity": 2})  # the world is Cilium's own identity, never a pod
    assert book.resolve(reserved) == (reserved, ())


@pytest.mark.parametrize(
    ("owner", "labels", "workload"),
    [
        (
            {"kind": "ReplicaSet", "name": "web-7d9f8c6b5"},
            {"pod-template-hash": "7d9f8c6b5"},
            "Deployment/web",
        ),
        (
            {"kind": "StatefulSet", "name": "db"},
            {"controller-revision-hash": "db-5c8"},
            "StatefulSet/db",
        ),
        ({"kind": "DaemonSet", "name": "agent"}, {}, "DaemonSet/agent"),
        ({"kind": "Job", "name": "report-28391040"}, {}, "CronJob/report"),
        ({"kind": "Job", "name": "migrate"}, {}, "Job/migrate"),
    ],
)
def test_a_pod_without_a_stable_label_is_named_by_its_owner(
    owner: dict[str, str], labels: dict[str, str], workload: str
) -> None:
    pod = {
        "kind": "Pod",
        "metadata": {
            "name": "web-7d9f8c6b5-x2x4z",
            "namespace": "shop",
            "labels": labels,
            "ownerReferences": [{**owner, "controller": True}],
        },
        "status": {"podIP": "10.0.0.2"},
    }
    book = identity_book([pod])
    unlabelled = endpoint(
        "shop", None, "k8s:pod-template-hash=7d9f8c6b5", pod_name="web-7d9f8c6b5-x2x4z"
    )
    resolved, kinds = book.resolve(flow(dst=unlabelled))
    assert kinds == (OWNER,) and resolved.destination.workload == workload
    labelled = flow()  # cart has app=cart: a label names it, the owner adds nothing
    assert book.resolve(labelled) == (labelled, ())


def test_a_learned_flow_to_a_world_reported_pod_becomes_a_to_endpoints_rule() -> None:
    options = AggregateOptions(identities=BOOK, decide=_learning())
    aggregator = Aggregator(options)
    assert aggregator.add(to_world("kube-dns-7qmtw")) is Decision.CANDIDATE
    (plan,) = aggregator.plans()
    (rule,) = plan.rules
    assert "kube-dns" in str(rule) and "CIDR" not in str(rule)
    assert aggregator.identities == {WORLD_POD: 1}
    without = Aggregator(AggregateOptions(decide=_learning()))
    without.add(to_world("kube-dns-7qmtw"))
    assert not without.plans()  # a toCIDR of a pod's IP is never written


def test_the_unselectable_finding_names_the_workload_not_the_pod() -> None:
    pod = {
        "kind": "Pod",
        "metadata": {
            "name": "web-7d9f8c6b5-x2x4z",
            "namespace": "shop",
            "labels": {"pod-template-hash": "7d9f8c6b5"},
            "ownerReferences": [{"kind": "ReplicaSet", "name": "web-7d9f8c6b5"}],
        },
    }
    aggregator = Aggregator(AggregateOptions(identities=identity_book([pod])))
    target = endpoint(
        "shop", None, "k8s:pod-template-hash=7d9f8c6b5", pod_name="web-7d9f8c6b5-x2x4z"
    )
    aggregator.add(flow(dst=target))
    (finding,) = aggregator.findings.values()
    assert finding.subject == "shop/web (Deployment, target)"


def test_objects_cpg_cannot_read_are_named() -> None:
    with pytest.raises(IdentityInputError, match=r"item 1 \(CiliumEndpoint\): metadata.name"):
        identity_book([{"kind": "CiliumEndpoint", "metadata": {}}], "ids.json")
    with pytest.raises(IdentityInputError, match="not an identity number"):
        identity_book([{"kind": "CiliumIdentity", "metadata": {"name": "web"}}])
    assert identity_book([{"kind": "ConfigMap", "metadata": {"name": "x"}}]).empty


def test_books_join_and_a_pod_seen_twice_keeps_the_endpoints_identity() -> None:
    as_pod = {
        "kind": "Pod",
        "metadata": {
            "name": "kube-dns-7qmtw",
            "namespace": "kube-system",
            "labels": {"k8s-app": "kube-dns"},
            "creationTimestamp": "2026-10-01T00:00:00Z",
        },
        "status": {"podIPs": [{"ip": "10.156.3.6"}, {"ip": "fd00::6"}]},
    }
    both = identity_book([as_pod, cep("kube-dns-7qmtw", "10.156.3.6")])
    (pod,) = both.pods_at["fd00::6"]
    assert pod.identity == 796 and pod.labels == tuple(DNS_LABELS)
    joined = joined_books([BOOK, identity_book([as_pod])])
    assert set(joined.pods_at) == {"10.156.3.6", "fd00::6"} and joined.pods == 2


def _learning() -> Any:
    from cpg_core import DecideOptions

    return DecideOptions(learn=True)
