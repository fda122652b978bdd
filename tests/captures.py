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
