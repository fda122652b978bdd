"""ClusterMesh (issue 14): a peer in another cluster is selected by its cluster label; the
matcher knows both values of Cilium's policy-default-local-cluster."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from conftest import assert_crd_valid, cpg, endpoint, flow_dict, jsonl

CLUSTER = "k8s:io.cilium.k8s.policy.cluster="


def pod(cluster: str, ns: str, app: str, *, label: bool = True) -> dict[str, Any]:
    """A pod of ``cluster``: named by its cluster label, or only by ``cluster_name``."""
    extra = [f"{CLUSTER}{cluster}"] if label else []
    return endpoint(ns, app, *extra, cluster_name=cluster)


def mesh_capture(path: Path) -> Path:
    """Captured in cluster east: frontends in east and west call cart in east; cart calls
    ledger in west (egress), and a reporting job in west with only cluster_name set."""
    path.write_text(
        jsonl(
            [
                flow_dict(pod("east", "shop", "frontend"), pod("east", "shop", "cart")),
                flow_dict(pod("west", "shop", "frontend"), pod("east", "shop", "cart")),
                flow_dict(pod("west", "shop", "reports", label=False), pod("east", "shop", "cart")),
                flow_dict(
                    pod("east", "shop", "cart"),
                    pod("west", "payments", "ledger"),
                    direction="EGRESS",
                    tcp=5432,
                ),
            ]
        )
    )
    return path


def selectors(policy: dict[str, Any], section: str, key: str) -> list[dict[str, str]]:
    return [s["matchLabels"] for rule in policy["spec"][section] for s in rule[key]]


def test_cross_cluster_peers_name_their_cluster(tmp_path: Path) -> None:
    capture = mesh_capture(tmp_path / "mesh.jsonl")
    out, evidence = tmp_path / "policies", tmp_path / "evidence"
    ran = cpg("replay", str(capture), "-d", str(out), "--evidence-dir", str(evidence))
    assert ran.returncode == 0, ran.stderr
    text = (out / "shop" / "cart.yaml").read_text()
    assert_crd_valid(text, required=True)
    cart = yaml.safe_load(text)
    assert selectors(cart, "ingress", "fromEndpoints") == [
        {"app": "frontend"},  # same cluster: unchanged
        {"app": "frontend", "io.cilium.k8s.policy.cluster": "west"},
        {"app": "reports", "io.cilium.k8s.policy.cluster": "west"},
    ]
    assert selectors(cart, "egress", "toEndpoints") == [
        {"io.kubernetes.pod.namespace": "kube-system", "k8s-app": "kube-dns"},  # local DNS
        {
            "app": "ledger",
            "io.cilium.k8s.policy.cluster": "west",
            "io.kubernetes.pod.namespace": "payments",
        },
    ]
    assert "from shop/app=frontend in cluster west" in text
    # the evidence key tells the two frontends apart
    explained = cpg(
        "explain", "shop/cart", "-d", str(out), "--evidence-dir", str(evidence), "--json"
    )
    keys = [rule["key"] for rule in json.loads(explained.stdout)["matched_rules"]]
    assert "ingress:ep:shop/app=frontend:TCP:8080" in keys
    assert "ingress:ep:shop/app=frontend,io.cilium.k8s.policy.cluster=west:TCP:8080" in keys
    for default in ("true", "false"):
        checked = cpg(
            "verify", str(capture), "-d", str(out), "--policy-default-local-cluster", default
        )
        assert checked.returncode == 0, (default, checked.stdout)


def test_a_rule_without_the_cluster_label_fails_under_the_local_cluster_default(
    tmp_path: Path,
) -> None:
    capture = mesh_capture(tmp_path / "mesh.jsonl")
    out = tmp_path / "policies"
    assert cpg("replay", str(capture), "-d", str(out), "--no-evidence").returncode == 0
    cart = out / "shop" / "cart.yaml"
    written = cart.read_text()
    # the pre-1.19 way: one selector for the frontends of every cluster
    pre_119 = written.replace("        io.cilium.k8s.policy.cluster: west\n", "")
    cart.write_text(pre_119)
    strict = cpg("verify", str(capture), "-d", str(out), "-o", "json")
    assert strict.returncode == 3
    report = json.loads(strict.stdout)
    refused = sorted(c["traffic"] for c in report["checks"] if not c["allowed"])
    assert refused == [
        "egress  east/shop/cart → west/payments/ledger TCP/5432",
        "ingress west/shop/frontend → east/shop/cart TCP/8080",
        "ingress west/shop/reports → east/shop/cart TCP/8080",
    ]
    assert report["candidates"] == {"total": 4, "admitted": 1}
    legacy = cpg("verify", str(capture), "-d", str(out), "--policy-default-local-cluster", "false")
    assert legacy.returncode == 0, legacy.stdout
    bad = cpg("verify", str(capture), "-d", str(out), "--policy-default-local-cluster", "maybe")
    assert bad.returncode == 2
    cart.write_text(written)  # the hand edit made two rules one: not cpg's to lint


def test_a_new_cross_cluster_peer_is_not_covered_by_a_local_rule(tmp_path: Path) -> None:
    """Merging: a rule naming no cluster does not make a cross-cluster rule redundant."""
    first = tmp_path / "first.jsonl"
    first.write_text(
        jsonl([flow_dict(pod("east", "shop", "frontend"), pod("east", "shop", "cart"))])
    )
    second = tmp_path / "second.jsonl"
    second.write_text(
        jsonl([flow_dict(pod("west", "shop", "frontend"), pod("east", "shop", "cart"))])
    )
    out = tmp_path / "policies"
    assert cpg("replay", str(first), "-d", str(out), "--no-evidence").returncode == 0
    assert cpg("replay", str(second), "-d", str(out), "--no-evidence").returncode == 0
    cart = yaml.safe_load((out / "shop" / "cart.yaml").read_text())
    assert selectors(cart, "ingress", "fromEndpoints") == [
        {"app": "frontend"},
        {"app": "frontend", "io.cilium.k8s.policy.cluster": "west"},
    ]


def test_before_cilium_1_19_local_peers_name_their_cluster_too(tmp_path: Path) -> None:
    capture = mesh_capture(tmp_path / "mesh.jsonl")
    out = tmp_path / "policies"
    ran = cpg(
        "replay",
        str(capture),
        "-d",
        str(out),
        "--no-evidence",
        "--policy-default-local-cluster",
        "false",
    )
    assert ran.returncode == 0, ran.stderr
    text = (out / "shop" / "cart.yaml").read_text()
    assert_crd_valid(text, required=True)
    assert selectors(yaml.safe_load(text), "ingress", "fromEndpoints") == [
        {"app": "frontend", "io.cilium.k8s.policy.cluster": "east"},  # local, named
        {"app": "frontend", "io.cilium.k8s.policy.cluster": "west"},
        {"app": "reports", "io.cilium.k8s.policy.cluster": "west"},
    ]
    # on 1.18 the rule admits the east frontend only, not a frontend of every cluster
    from conftest import flow_dict as flow

    intruder = tmp_path / "intruder.jsonl"
    intruder.write_text(
        jsonl([flow(pod("north", "shop", "frontend"), pod("east", "shop", "cart"))])
    )
    unnamed = tmp_path / "unnamed"  # the same capture written for 1.19+
    assert cpg("replay", str(capture), "-d", str(unnamed), "--no-evidence").returncode == 0
    for folder, default, admitted in (
        (out, "false", False),
        (out, "true", False),
        (unnamed, "false", True),  # on 1.18 the unnamed rule admits north's frontend: a hole
    ):
        checked = cpg(
            "verify",
            str(intruder),
            "-d",
            str(folder),
            "--policy-default-local-cluster",
            default,
            "-o",
            "json",
        )
        (check,) = json.loads(checked.stdout)["checks"]
        assert check["allowed"] is admitted, (folder, default, check)
    bad = cpg("replay", str(capture), "-d", str(out), "--policy-default-local-cluster", "maybe")
    assert bad.returncode == 2 and "--policy-default-local-cluster" in bad.stderr


def test_plan_on_the_cluster_follows_its_cilium_version(tmp_path: Path) -> None:
    from fake_kube import fake_kube

    capture = mesh_capture(tmp_path / "mesh.jsonl")
    out = tmp_path / "policies"
    assert cpg("replay", str(capture), "-d", str(out), "--no-evidence").returncode == 0
    notes = {}
    with fake_kube(tmp_path) as (kube, kubeconfig):
        for version in ("v1.18.4", "v1.19.1", None):
            kube.agents = None if version is None else [f"quay.io/cilium/cilium:{version}"] * 2
            ran = cpg(
                "plan",
                str(capture),
                "-d",
                str(out),
                "--cluster",
                "--kubeconfig",
                str(kubeconfig),
                "-o",
                "json",
            )
            notes[version] = (json.loads(ran.stdout)["notes"], ran.stderr)
    assert any("policy-default-local-cluster off" in n for n in notes["v1.18.4"][0])
    assert not any("policy-default-local-cluster" in n for n in notes["v1.19.1"][0])
    assert "no Cilium agent version could be read" in notes[None][1]
