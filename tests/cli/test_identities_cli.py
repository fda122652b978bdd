"""``--identities``: what CiliumEndpoints, CiliumIdentities and pods say of the peers Hubble
left without identity, on a real capture and through each command that reads flows."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import CORPUS, cpg, endpoint, flow_dict, jsonl

HTTP = CORPUS / "hubble-otel__basic-sample-348-http-flows.json"
DNS = CORPUS / "hubble-otel__basic-sample-330-dns-flows.json"
DNS_PODS = (
    "kube-dns-b4f5c58c7-7qmtw",
    "node-local-dns-r99x7",
    "node-local-dns-cw6pv",
    "node-local-dns-6jnx9",
)
"""The pods the HTTP capture reports as the world and the DNS capture labels."""


def _corpus() -> None:
    if not (HTTP.exists() and DNS.exists()):
        if os.environ.get("CPG_REQUIRE_SHARED") == "1":
            raise AssertionError(f"{CORPUS} is missing, and CPG_REQUIRE_SHARED=1")
        pytest.skip("the shared corpus is not here")


def _endpoints_from(capture: Path, pods: tuple[str, ...]) -> list[dict[str, Any]]:
    """CiliumEndpoints for ``pods`` as the capture labels them (its IPs, identity, labels)."""
    found: dict[str, dict[str, Any]] = {}
    text = capture.read_text()
    records = (
        json.loads(text) if text.lstrip().startswith("[") else map(json.loads, text.splitlines())
    )
    for record in records:
        flow = record.get("flow", record)
        for side in ("source", "destination"):
            peer = flow.get(side) or {}
            name = peer.get("pod_name")
            if name in pods and name not in found and "reserved:world" not in peer["labels"]:
                found[name] = {
                    "apiVersion": "cilium.io/v2",
                    "kind": "CiliumEndpoint",
                    "metadata": {"name": name, "namespace": peer["namespace"]},
                    "status": {
                        "identity": {"id": peer["identity"], "labels": peer["labels"]},
                        "networking": {"addressing": [{"ipv4": flow["IP"][side]}]},
                    },
                }
    assert sorted(found) == sorted(pods)
    return list(found.values())


def test_a_real_capture_learns_the_dns_pods_hubble_called_the_world(tmp_path: Path) -> None:
    _corpus()
    identities = tmp_path / "identities.json"
    identities.write_text(
        json.dumps({"apiVersion": "v1", "kind": "List", "items": _endpoints_from(DNS, DNS_PODS)})
    )
    out, evidence = tmp_path / "policies", tmp_path / "evidence"
    common = ["-d", str(out), "--evidence-dir", str(evidence)]
    replayed = cpg(
        "replay",
        str(HTTP),
        "--learn",
        "forwarded",
        "--catalogue",
        "none",  # Istio's Prometheus is policed here (the catalogue leaves it alone)
        "--identities",
        str(identities),
        *common,
        "-o",
        "json",
    )
    assert replayed.returncode == 0, replayed.stderr
    report = json.loads(replayed.stdout)
    assert report["identities"] == {"world_pod": 79}
    policy = yaml.safe_load((out / "istio-system" / "prometheus.yaml").read_text())
    to = {
        (rule["toEndpoints"][0]["matchLabels"].get("k8s-app"), port["port"])
        for rule in policy["spec"]["egress"]
        if "toEndpoints" in rule
        for ports in rule["toPorts"]
        for port in ports["ports"]
    }
    assert {("kube-dns", "10054"), ("node-local-dns", "9253")} <= to
    cidrs = {cidr for rule in policy["spec"]["egress"] for cidr in rule.get("toCIDR", [])}
    assert cidrs == {"10.128.0.3/32", "10.128.0.4/32", "10.128.0.6/32"}  # node IPs, not pods
    planned = cpg("plan", str(HTTP), "--identities", str(identities), *common, "-o", "json")
    plan = json.loads(planned.stdout)
    unknown = sorted(item["traffic"]["destination"] for item in plan["would_break"])
    assert unknown == [
        "istio-system/jaeger-67f448c8f8-dmh9h",
        "kube-system/clickhouse-operator-59df4c7bcb-hbt6t",
    ], planned.stdout
    assert all(
        item["fix"].startswith("cannot judge: identity unknown") for item in plan["would_break"]
    )
    # without the identities the same plan cannot judge the DNS pods either
    blind = json.loads(cpg("plan", str(HTTP), *common, "-o", "json").stdout)
    assert len(blind["would_break"]) == 6


def test_every_command_that_reads_flows_takes_identities(tmp_path: Path) -> None:
    pod_ip = "10.9.9.9"
    capture = tmp_path / "drops.jsonl"
    as_world = {"identity": 2, "labels": ["reserved:world"], "pod_name": "frontend-1"}
    capture.write_text(jsonl([flow_dict(as_world, endpoint("shop", "cart"), src_ip=pod_ip)]))
    identities = tmp_path / "ids.yaml"
    identities.write_text(
        yaml.safe_dump_all(
            [
                {
                    "kind": "Pod",
                    "metadata": {
                        "name": "frontend-1",
                        "namespace": "shop",
                        "labels": {"app": "frontend"},
                    },
                    "status": {"podIP": pod_ip},
                }
            ]
        )
    )
    out = tmp_path / "policies"
    base = ["-d", str(out), "--evidence-dir", str(tmp_path / "e")]
    replayed = cpg("replay", str(capture), "--identities", str(identities), *base)
    assert replayed.returncode == 0, replayed.stderr
    assert "Identities filled in: 1 peers reported as the world named as their pod" in (
        replayed.stdout
    )
    policy = yaml.safe_load((out / "shop" / "cart.yaml").read_text())
    (rule,) = policy["spec"]["ingress"]
    assert rule["fromEndpoints"] == [{"matchLabels": {"app": "frontend"}}]
    folder = ["-d", str(out)]
    verified = cpg("verify", str(capture), "--identities", str(identities), *folder)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    answered = cpg("why", str(capture), "--identities", str(identities), *folder)
    assert answered.returncode == 0 and "shop/frontend → shop/cart" in answered.stdout
    blind = cpg("why", str(capture), *folder)
    assert blind.returncode == 3  # the world at that IP: cart's policy does not admit it
    missing = cpg("replay", str(capture), "--identities", str(tmp_path / "nope.json"), *base)
    assert missing.returncode == 1
    assert "--identities" in missing.stderr and "kubectl get ciliumendpoints" in missing.stderr
