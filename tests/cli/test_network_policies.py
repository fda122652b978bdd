"""Kubernetes NetworkPolicies as Cilium enforces them (ARCHITECTURE §D48): plan, why, trace
and verify read them from a folder or the cluster beside Cilium's own policies. Each case
states the part of the NetworkPolicy API (and Cilium's reading of it) it holds cpg to."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import cpg, endpoint, flow_dict, jsonl


def netpol(name: str, spec: dict[str, Any], namespace: str = "shop") -> dict[str, Any]:
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


API = {"matchLabels": {"app": "api"}}
WEB = {"podSelector": {"matchLabels": {"app": "web"}}}
PORT = [{"port": 8080, "protocol": "TCP"}]


def trace(folder: Path, source: str, destination: str, port: str) -> int:
    ran = cpg("trace", "-d", str(folder), "--from", source, "--to", destination, "--port", port)
    assert ran.returncode in (0, 3), ran.stderr
    return ran.returncode


def folder_with(tmp_path: Path, *docs: dict[str, Any]) -> Path:
    folder = tmp_path / "policies"
    folder.mkdir(exist_ok=True)
    (folder / "netpol.yaml").write_text(yaml.safe_dump_all(docs))
    return folder


CASES = [
    # (what the API says, spec, (source, destination, port), admitted)
    (
        "a podSelector peer is the policy's namespace",
        {"podSelector": API, "ingress": [{"from": [WEB], "ports": PORT}]},
        [
            ("shop:app=web", "shop:app=api", "8080", True),
            ("shop:app=web", "shop:app=api", "9090", False),
            ("other:app=web", "shop:app=api", "8080", False),
            ("shop:app=web", "shop:app=db", "9090", True),  # not selected: not policed
        ],
    ),
    (
        "policyTypes Ingress and no rule: default-deny ingress, egress untouched",
        {"podSelector": {}, "policyTypes": ["Ingress"]},
        [
            ("shop:app=web", "shop:app=api", "8080", False),
            ("shop:app=api", "other:app=x", "443", True),
        ],
    ),
    (
        "a rule without from admits every source, outside the cluster too",
        {"podSelector": API, "ingress": [{"ports": PORT}]},
        [
            ("8.8.8.8", "shop:app=api", "8080", True),
            ("other:app=x", "shop:app=api", "8080", True),
            ("other:app=x", "shop:app=api", "22", False),
        ],
    ),
    (
        "namespaceSelector {} selects every namespace's pods, not the world",
        {"podSelector": API, "ingress": [{"from": [{"namespaceSelector": {}}]}]},
        [
            ("other:app=x", "shop:app=api", "22", True),
            ("8.8.8.8", "shop:app=api", "22", False),
        ],
    ),
    (
        "kubernetes.io/metadata.name names the namespace; with a podSelector, both hold",
        {
            "podSelector": API,
            "ingress": [
                {
                    "from": [
                        {
                            "namespaceSelector": {
                                "matchLabels": {"kubernetes.io/metadata.name": "monitoring"}
                            },
                            "podSelector": {"matchLabels": {"app": "prometheus"}},
                        }
                    ]
                }
            ],
        },
        [
            ("monitoring:app=prometheus", "shop:app=api", "9090", True),
            ("monitoring:app=grafana", "shop:app=api", "9090", False),
            ("shop:app=prometheus", "shop:app=api", "9090", False),
        ],
    ),
    (
        "ipBlock: a CIDR with its exceptions (as in Cilium, never a pod)",
        {
            "podSelector": API,
            "policyTypes": ["Egress"],
            "egress": [{"to": [{"ipBlock": {"cidr": "10.0.0.0/8", "except": ["10.1.0.0/16"]}}]}],
        },
        [
            ("shop:app=api", "10.2.3.4", "443", True),
            ("shop:app=api", "10.1.0.5", "443", False),
            ("shop:app=api", "192.0.2.1", "443", False),
        ],
    ),
    (
        "egress rules without policyTypes make egress default-deny too",
        {"podSelector": API, "egress": [{"to": [WEB], "ports": [{"port": 53, "protocol": "UDP"}]}]},
        [
            ("shop:app=api", "shop:app=web", "53/UDP", True),
            ("shop:app=api", "shop:app=web", "53/TCP", False),
            ("shop:app=web", "shop:app=api", "80", False),  # ingress: policyTypes Ingress
        ],
    ),
    (
        "endPort: a range; a port left out: every port of the protocol",
        {
            "podSelector": API,
            "ingress": [
                {"ports": [{"port": 9000, "endPort": 9010, "protocol": "TCP"}]},
                {"ports": [{"protocol": "UDP"}]},
            ],
        },
        [
            ("shop:app=web", "shop:app=api", "9005", True),
            ("shop:app=web", "shop:app=api", "9011", False),
            ("shop:app=web", "shop:app=api", "5000/UDP", True),
        ],
    ),
]


@pytest.mark.parametrize(("what", "spec", "checks"), CASES, ids=[c[0] for c in CASES])
def test_trace_reads_a_network_policy_as_cilium_does(
    tmp_path: Path, what: str, spec: dict[str, Any], checks: list[tuple[str, str, str, bool]]
) -> None:
    folder = folder_with(tmp_path, netpol("np", spec))
    for source, destination, port, admitted in checks:
        assert trace(folder, source, destination, port) == (0 if admitted else 3), (
            what,
            source,
            destination,
            port,
        )


def test_answers_name_the_network_policy(tmp_path: Path) -> None:
    folder = folder_with(
        tmp_path, netpol("api-in", {"podSelector": API, "ingress": [{"from": [WEB]}]})
    )
    ran = cpg(
        "trace", "-d", str(folder), "--from", "shop:app=web", "--to", "shop:app=api", "--port", "80"
    )
    assert "shop/api-in (NetworkPolicy)" in ran.stdout


def test_verify_and_plan_read_network_policies_in_the_folder(tmp_path: Path) -> None:
    web, api = endpoint("shop", "web"), endpoint("shop", "api")
    capture = tmp_path / "c.jsonl"
    capture.write_text(
        jsonl(
            [
                flow_dict(web, api, tcp=8080),
                flow_dict(web, api, tcp=9090, verdict="FORWARDED", reason=None),
            ]
        )
    )
    folder = folder_with(
        tmp_path,
        netpol("api-in", {"podSelector": API, "ingress": [{"from": [WEB], "ports": PORT}]}),
    )
    verified = cpg("verify", str(capture), "-d", str(folder), "-o", "json")
    assert verified.returncode == 0 and json.loads(verified.stdout)["passed"]
    # as today's policies: the 9090 traffic that works would break under a cpg proposal
    # that polices api's ingress the same way, and the plan says api was policed already
    current = tmp_path / "current"
    current.mkdir()
    (current / "np.yaml").write_text((folder / "netpol.yaml").read_text())
    proposal = tmp_path / "proposal"
    assert cpg("replay", str(capture), "-d", str(proposal), "--no-evidence").returncode == 0
    planned = cpg(
        "plan", str(capture), "-d", str(proposal), "--current", str(current), "-o", "json"
    )
    doc = json.loads(planned.stdout)
    assert doc["current_source"] == "current" and doc["newly_enforced"] == []


def test_the_cluster_s_network_policies_are_read(tmp_path: Path) -> None:
    from fake_kube import fake_kube

    with fake_kube(tmp_path) as (kube, kubeconfig):
        kube.policies.append(netpol("deny-all", {"podSelector": {}, "policyTypes": ["Ingress"]}))
        ran = cpg(
            "trace",
            "--cluster",
            "--kubeconfig",
            str(kubeconfig),
            "-d",
            str(tmp_path / "none"),
            "--from",
            "shop:app=web",
            "--to",
            "shop:app=api",
            "--port",
            "80",
        )
        assert ("GET", "/apis/networking.k8s.io/v1/networkpolicies") in kube.requests
    assert ran.returncode == 3, ran.stdout + ran.stderr
    assert "shop/deny-all (NetworkPolicy)" in ran.stdout
