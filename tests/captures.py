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
