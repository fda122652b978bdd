"""``cpg verify`` and ``cpg replay --verify`` end to end."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from conftest import (
    CORPUS,
    EXAMPLE,
    cpg,
    endpoint,
    explain_capture,
    flow_dict,
    jsonl,
    triage_records,
)


def replay_then_verify(capture: Path, out: Path, *extra: str) -> dict[str, object]:
    assert cpg("replay", str(capture), "-d", str(out), *extra).returncode in (0, 3)
    out.mkdir(exist_ok=True)  # a capture without candidates writes no policy
    result = cpg("verify", str(capture), "--policies", str(out), "--output", "json", *extra)
    data = json.loads(result.stdout)
    # a capture with no denied flow to check cannot pass: it says so (exit 4)
    judged = data["checks"] or data["system_namespaces"]
    assert result.returncode == (0 if judged else 4), result.stdout + result.stderr
    assert data["verdict"] == ("passed" if judged else "cannot_judge")
    assert data["candidates"]["admitted"] == data["candidates"]["total"]
    assert data["explicit_deny"]["admitted"] == 0
    return data


def test_every_test_capture_is_fully_admitted(tmp_path: Path) -> None:
    data = replay_then_verify(EXAMPLE, tmp_path / "example")
    assert data["candidates"] == {"total": 29, "admitted": 29}
    assert data["explicit_deny"] == {"total": 2, "admitted": 0}
    audit = replay_then_verify(EXAMPLE, tmp_path / "audit", "--include-audit")
    assert audit["candidates"] == {"total": 30, "admitted": 30}
    triage = tmp_path / "triage.jsonl"
    triage.write_text(jsonl(triage_records()))
    assert replay_then_verify(triage, tmp_path / "triage")["explicit_deny"] == {
        "total": 3,
        "admitted": 0,
    }
    path, candidates = explain_capture(tmp_path)
    assert replay_then_verify(path, tmp_path / "explain")["candidates"] == {
        "total": candidates,
        "admitted": candidates,
    }
    for real in sorted(CORPUS.glob("*.json*")) if CORPUS.exists() else []:
        replay_then_verify(real, tmp_path / real.stem)


def test_a_hand_broken_policy_is_caught_with_the_reason(tmp_path: Path) -> None:
    out = tmp_path / "p"
    assert cpg("replay", str(EXAMPLE), "-d", str(out)).returncode == 0
    cart = out / "shop" / "cart.yaml"
    doc = yaml.safe_load(cart.read_text())
    ports = doc["spec"]["ingress"][0]["toPorts"][0]["ports"]
    doc["spec"]["ingress"][0]["toPorts"][0]["ports"] = [p for p in ports if p["port"] != "8443"]
    cart.write_text(yaml.safe_dump(doc))
    result = cpg("verify", str(EXAMPLE), "--policies", str(out))
    assert result.returncode == 3
    assert "28/29 candidate flows admitted" in result.stdout
    line = next(line for line in result.stdout.splitlines() if "NOT admitted" in line)
    assert "shop/frontend → shop/cart TCP/8443" in line
    assert "shop/cpg-cart ingress[0] selects the peer but not TCP/8443" in line


def test_a_policy_that_allows_an_explicitly_denied_flow_is_flagged(tmp_path: Path) -> None:
    out = tmp_path / "p"
    assert cpg("replay", str(EXAMPLE), "-d", str(out)).returncode == 0
    ledger = out / "payments" / "ledger.yaml"
    doc = yaml.safe_load(ledger.read_text())
    doc["spec"]["ingress"].append(
        {"fromEndpoints": [{"matchLabels": {"io.kubernetes.pod.namespace": "shop"}}]}
    )
    ledger.write_text(yaml.safe_dump(doc))
    result = cpg("verify", str(EXAMPLE), "--policies", str(out))
    assert result.returncode == 3
    assert "1/2" not in result.stdout and "2/2 explicit-deny flows admitted" in result.stdout
    assert "DANGER" in result.stdout and "payments/cpg-ledger ingress[2]" in result.stdout


def test_replay_verify_prints_the_summary(tmp_path: Path) -> None:
    result = cpg("replay", str(EXAMPLE), "-d", str(tmp_path / "p"), "--verify")
    assert result.returncode == 0
    assert (
        "Verify: 29/29 candidate flows admitted, 0/2 explicit-deny flows admitted" in result.stdout
    )
    assert cpg("replay", str(EXAMPLE), "--verify", "--dry-run").returncode == 2


def test_verify_errors(tmp_path: Path) -> None:
    missing = cpg("verify", str(EXAMPLE), "--policies", str(tmp_path / "none"))
    assert missing.returncode == 1 and "not a folder of policies" in missing.stderr
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "not-a-policy.yaml").write_text("a: [\n")
    broken = cpg("verify", str(EXAMPLE), "--policies", str(tmp_path / "bad"))
    assert broken.returncode == 1 and "not-a-policy.yaml: cannot read it as YAML" in broken.stderr
    capture = tmp_path / "c.jsonl"
    capture.write_text(jsonl([flow_dict()]))
    empty = tmp_path / "empty"
    empty.mkdir()
    none = cpg("verify", str(capture), "--policies", str(empty))
    assert none.returncode == 3 and "no policy selects shop/" in none.stdout


def test_verify_reads_the_clusters_policies(tmp_path: Path) -> None:
    from fake_kube import fake_kube

    out = tmp_path / "p"
    assert cpg("replay", str(EXAMPLE), "-d", str(out)).returncode == 0
    cart = out / "shop" / "cart.yaml"
    applied = yaml.safe_load(cart.read_text())
    cart.unlink()  # the cart policy is not in the folder, only in the cluster
    with fake_kube(tmp_path) as (kube, kubeconfig):
        without = cpg("verify", str(EXAMPLE), "--policies", str(out))
        assert without.returncode == 3
        kube.policies = [applied]
        both = cpg(
            "verify",
            str(EXAMPLE),
            "--policies",
            str(out),
            "--cluster",
            "--kubeconfig",
            str(kubeconfig),
        )
        assert both.returncode == 0, both.stdout + both.stderr
        assert "from " + str(out) + " and the cluster (1)" in both.stdout
        assert "29/29 candidate flows admitted" in both.stdout
        assert all(method == "GET" for method, _ in kube.requests), "read-only"
        only_cluster = cpg(
            "verify",
            str(EXAMPLE),
            "--cluster",
            "--kubeconfig",
            str(kubeconfig),
            "--context",
            "fake",
        )
        assert only_cluster.returncode == 3 and "from the cluster (1)" in only_cluster.stdout
        kube.status = 403
        denied = cpg("verify", str(EXAMPLE), "--cluster", "--kubeconfig", str(kubeconfig))
        assert (
            denied.returncode == 1 and "RBAC denied listing ciliumnetworkpolicies" in denied.stderr
        )
    gone = cpg("verify", str(EXAMPLE), "--cluster", "--kubeconfig", str(kubeconfig))
    assert gone.returncode == 1 and "cannot reach" in gone.stderr
    missing = cpg("verify", str(EXAMPLE), "--cluster", "--kubeconfig", str(tmp_path / "nope"))
    assert missing.returncode == 1 and "--kubeconfig" in missing.stderr


def test_identical_lines_are_printed_once_with_their_flows_added(tmp_path: Path) -> None:
    from conftest import endpoint

    capture = tmp_path / "c.jsonl"
    capture.write_text(
        jsonl(
            [  # three frontend pods (three checks) that read as the same traffic
                flow_dict(endpoint("shop", "frontend", pod_name=f"frontend-{n}"), src_ip=ip)
                for n, ip in enumerate(("10.0.0.5", "10.0.0.6", "10.0.0.6", "10.0.0.7"))
            ]
        )
    )
    out = tmp_path / "policies"
    assert cpg("replay", str(capture), "-d", str(out), "--no-evidence").returncode == 0
    text = cpg("verify", str(capture), "-d", str(out)).stdout
    lines = [line for line in text.splitlines() if "shop/frontend → shop/cart" in line]
    assert len(lines) == 1 and "(4 flows)" in lines[0], text
    checks = json.loads(cpg("verify", str(capture), "-d", str(out), "-o", "json").stdout)["checks"]
    assert len(checks) == 4 and sum(c["flows"] for c in checks) == 4  # -o json unchanged


def test_a_cluster_network_policy_in_the_folder_is_judged_in_its_tier(tmp_path: Path) -> None:
    """An Admin-tier Deny beside the policies replay wrote: verify, why and plan read it."""
    import yaml

    capture = tmp_path / "drops.jsonl"
    capture.write_text(jsonl([flow_dict(endpoint("shop", "web"), endpoint("shop", "api"))]))
    out = tmp_path / "policies"
    assert cpg("replay", str(capture), "-d", str(out), "--no-evidence").returncode == 0
    assert cpg("verify", str(capture), "-d", str(out)).returncode == 0
    lockdown = {
        "apiVersion": "policy.networking.k8s.io/v1alpha2",
        "kind": "ClusterNetworkPolicy",
        "metadata": {"name": "lockdown"},
        "spec": {
            "tier": "Admin",
            "priority": 10,
            "subject": {"namespaces": {"matchLabels": {"kubernetes.io/metadata.name": "shop"}}},
            "ingress": [
                {
                    "name": "no-web",
                    "action": "Deny",
                    "from": [{"pods": {"podSelector": {"matchLabels": {"app": "web"}}}}],
                }
            ],
        },
    }
    from fake_kube import fake_kube

    with fake_kube(tmp_path) as (kube, kubeconfig):  # applied in the cluster: read from there
        kube.policies = [lockdown]
        cluster = ["--cluster", "--kubeconfig", str(kubeconfig)]
        from_cluster = cpg("verify", str(capture), "-d", str(out), *cluster)
        listed = {path.split("?")[0] for _, path in kube.requests}
    assert from_cluster.returncode == 3, from_cluster.stdout + from_cluster.stderr
    assert "/apis/policy.networking.k8s.io/v1alpha2/clusternetworkpolicies" in listed
    (out / "cluster").mkdir()
    (out / "cluster" / "lockdown.yaml").write_text(yaml.safe_dump(lockdown))
    verified = cpg("verify", str(capture), "-d", str(out))
    assert verified.returncode == 3, verified.stdout + verified.stderr
    why = cpg("why", str(capture), "-d", str(out))
    assert (
        "denied by ClusterNetworkPolicy lockdown ingress[0] (no-web) (Admin tier)" in why.stdout
    ), why.stdout
