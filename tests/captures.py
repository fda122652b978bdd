"""Captures that several test modules replay, built from the conftest helpers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from conftest import endpoint, flow_dict, jsonl


def api(version: str, pod: str) -> dict[str, Any]:
    return endpoint("shop", "api", f"k8s:version={version}", pod_name=pod)


WEB = endpoint("shop", "web", pod_name="web-1")
PROMETHEUS = endpoint("monitoring", "prometheus", pod_name="prometheus-0")


def ingress_capture(path: Path, *, allowed_by: bool = False) -> Path:
    """web → api v1 is denied (v1 is policed); monitoring → api v2 works (v2 is not)."""
    records = [
        flow_dict(WEB, api("v1", "api-v1-a"), tcp=8080, src_ip="10.0.0.5", dst_ip="10.0.1.1"),
        flow_dict(WEB, api("v1", "api-v1-b"), tcp=8080, src_ip="10.0.0.5", dst_ip="10.0.1.2"),
    ]
    for n in range(12):
        records.append(
            flow_dict(
                PROMETHEUS,
                api("v2", "api-v2-a"),
                tcp=9090,
                verdict="FORWARDED",
                reason=None,
                src_ip="10.0.2.9",
                dst_ip="10.0.1.9",
                time=f"2026-11-02T10:00:{n:02d}Z",
            )
        )
    if allowed_by:  # what Hubble says about traffic a policy allowed: v1 is policed
        records.append(
            flow_dict(
                endpoint("shop", "gateway", pod_name="gw-1"),
                api("v1", "api-v1-a"),
                tcp=8080,
                verdict="FORWARDED",
                reason=None,
                ingress_allowed_by=[
                    {"name": "api-v1-lockdown", "namespace": "shop", "kind": "CiliumNetworkPolicy"}
                ],
            )
        )
    path.write_text(jsonl(records))
    return path


HOST = {"identity": 1, "labels": ["reserved:host"]}


def reviews(version: str, pod: str, *extra: str) -> dict[str, Any]:
    return endpoint(
        "bookinfo",
        "reviews",
        f"k8s:version={version}",
        "k8s:pod-template-hash=7d9c8b" + version,
        *extra,
        pod_name=pod,
    )


def new_user_capture(path: Path) -> Path:
    """The new-user case: productpage → reviews v2 is denied (v2 is policed and its pods carry
    an injection marker), while prometheus and the node's kubelet probes reach v1, which is
    not policed, and keep working today."""
    v2 = reviews("v2", "reviews-v2-5d8f", "k8s:sidecar.opentelemetry.io/injected=true")
    v1 = reviews("v1", "reviews-v1-9a7b")
    product = endpoint("bookinfo", "productpage", pod_name="productpage-1")
    prometheus = endpoint("monitoring", "prometheus", pod_name="prometheus-0")
    records = [
        flow_dict(product, v2, tcp=9080, src_ip="10.0.3.4", dst_ip="10.0.3.9") for _ in range(5)
    ]
    for n in range(8):
        records.append(
            flow_dict(
                prometheus,
                v1,
                tcp=9090,
                verdict="FORWARDED",
                reason=None,
                src_ip="10.0.2.9",
                dst_ip="10.0.3.7",
                time=f"2026-11-02T10:01:{n:02d}Z",
            )
        )
    for n in range(6):
        records.append(
            flow_dict(
                HOST,
                v1,
                tcp=15020,
                verdict="FORWARDED",
                reason=None,
                src_ip="10.0.3.1",
                dst_ip="10.0.3.7",
                time=f"2026-11-02T10:02:{n:02d}Z",
            )
        )
    path.write_text(jsonl(records))
    return path


def learn_capture(path: Path, *, as_drops: bool = False) -> Path:
    """Traffic that works today in a cluster without policies (every verdict FORWARDED), or,
    with ``as_drops``, the same requests as a default-deny cluster drops them. Besides the
    requests it has what learning must never turn into rules: replies Hubble did not mark
    (a SYN+ACK, a reply to an ephemeral port), the node's probe, a health check, and a flow a
    policy already allowed."""
    frontend = [
        endpoint("shop", "frontend", pod_name=f"frontend-{n}", identity=3001) for n in (1, 2)
    ]
    cart = endpoint("shop", "cart", pod_name="cart-1", identity=3002)
    dns = endpoint("kube-system", None, "k8s:k8s-app=kube-dns", pod_name="coredns-1")
    verdict = (
        {"verdict": "DROPPED", "reason": "POLICY_DENIED"}
        if as_drops
        else {
            "verdict": "FORWARDED",
            "reason": None,
        }
    )
    works = {"verdict": "FORWARDED", "reason": None}
    syn = {"TCP": {"source_port": 45678, "destination_port": 8080, "flags": {"SYN": True}}}
    requests = []
    for n, pod in enumerate(frontend):
        for direction in ("EGRESS", "INGRESS"):
            requests.append(
                flow_dict(
                    pod,
                    cart,
                    direction=direction,
                    l4=syn,
                    reply=None,
                    **verdict,
                    time=f"2026-11-02T10:00:0{n}Z",
                    src_ip=f"10.0.0.{10 + n}",
                    dst_ip="10.0.0.20",
                )
            )
        requests.append(
            flow_dict(
                pod,
                dns,
                direction="EGRESS",
                udp=53,
                reply=None,
                **verdict,
                time=f"2026-11-02T10:00:1{n}Z",
                src_ip=f"10.0.0.{10 + n}",
                dst_ip="10.0.9.9",
            )
        )
    never = [
        # the SYN+ACK back, is_reply not set
        flow_dict(
            cart,
            frontend[0],
            direction="EGRESS",
            reply=None,
            **works,
            l4={
                "TCP": {
                    "source_port": 8080,
                    "destination_port": 45678,
                    "flags": {"SYN": True, "ACK": True},
                }
            },
        ),
        # a later segment back to the client's ephemeral port, no flags
        flow_dict(
            cart,
            frontend[0],
            direction="INGRESS",
            reply=None,
            **works,
            l4={"TCP": {"source_port": 8080, "destination_port": 45678}},
        ),
        # the kubelet's probe: the node reaches its pods whatever the policy
        flow_dict(
            {"identity": 1, "labels": ["reserved:host"]}, cart, tcp=8080, reply=None, **works
        ),
        # cilium-health
        flow_dict(
            {"identity": 4, "labels": ["reserved:health"]}, cart, tcp=4240, reply=None, **works
        ),
        # allowed by a policy of the cluster already
        flow_dict(
            endpoint("shop", "gateway", pod_name="gw-1"),
            cart,
            tcp=8080,
            reply=None,
            **works,
            ingress_allowed_by=[{"name": "gw", "namespace": "shop", "kind": "CiliumNetworkPolicy"}],
        ),
    ]
    path.write_text(jsonl(requests + never))
    return path


def mesh_capture(path: Path) -> Path:
    """45 workloads in 10 namespaces (``bookinfo-1`` … ``bookinfo-10``, 5 or 4 each) calling
    along a chain within and across namespaces, scraped by prometheus, 20 of them calling an
    address outside and all resolving names through kube-dns: 45 policies, 67 nodes, enough
    for the report's overview mode."""
    records = []
    workloads = [
        (f"bookinfo-{ns}", f"svc-{app}")
        for ns in range(1, 11)
        for app in range(5 if ns <= 5 else 4)
    ]
    prometheus = endpoint("monitoring", "prometheus", pod_name="prometheus-0")
    dns = endpoint("kube-system", "kube-dns", pod_name="coredns-1")
    for i, (ns, app) in enumerate(workloads):
        me = endpoint(ns, app, pod_name=f"{app}-{i}")
        caller_ns, caller_app = workloads[i - 1]
        caller = endpoint(caller_ns, caller_app, pod_name=f"{caller_app}-{i - 1}")
        port = (9080, 8080, 5432, 6379)[i % 4]
        records.append(flow_dict(caller, me, tcp=port))
        records.append(flow_dict(prometheus, me, tcp=9090))
        records.append(flow_dict(me, dns, direction="EGRESS", tcp=None, udp=53))
        if i % 9 < 4:
            outside = {"identity": 2, "labels": ["reserved:world"]}
            records.append(
                flow_dict(me, outside, direction="EGRESS", tcp=443, dst_ip=f"203.0.113.{i + 1}")
            )
    path.write_text(jsonl(records))
    return path
