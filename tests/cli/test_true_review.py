"""A review says only true things: times to the second and no year 1, cluster-wide policies
without a leading slash, evidence found where README says it is, a workload's name that a
person's file does not change, every hand-written policy over the same pods named, progress
that counts what is written, did-you-mean for pod filters, copy-safe commands."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import yaml

from conftest import EXAMPLE, ROOT, cpg

sys.path.insert(0, str(ROOT / "benchmarks"))
from synthetic import synthetic_capture


def test_plan_confidence_reads_seconds_and_says_rules_for_the_cluster(tmp_path: Path) -> None:
    capture = tmp_path / "c.jsonl"
    capture.write_text(EXAMPLE.read_text())
    out = tmp_path / "p"
    assert cpg("replay", str(capture), "-d", str(out)).returncode == 0
    planned = cpg("plan", str(capture), "-d", str(out)).stdout
    block = planned.split("Confidence of the new and changed rules", 1)[1].split("\n\n", 1)[0]
    assert "0001-01-01" not in block and ".000000000Z" not in block
    assert "written for the cluster, no flow needed" in block
    assert "2026-11-02T09:32:41Z → " in block  # times to the second, UTC


def test_cluster_wide_policies_are_named_without_a_slash(tmp_path: Path) -> None:
    capture = synthetic_capture(tmp_path / "s.jsonl", 20)
    out = tmp_path / "p"
    assert cpg("replay", str(capture), "-d", str(out)).returncode == 0
    verify = cpg("verify", str(capture), "-d", str(out)).stdout
    markdown = cpg("report", "-d", str(out)).stdout
    html = cpg("report", "-d", str(out), "-o", "html").stdout
    for text in (verify, markdown):
        assert "cpg-shared-" in text and "/cpg-shared-" not in text
    assert '"policy": "/cpg-shared' not in html
    shared = markdown.split("### cpg-shared-egress-kube-system", 1)[1].split("###", 1)[0]
    assert "No evidence recorded" not in shared  # its evidence is found


def test_evidence_kept_beside_the_policies_goes_with_a_copy(tmp_path: Path) -> None:
    """What README says: create .cpg-evidence beside the folder (or move the cache's folder
    there as .cpg-evidence/NAME), and a copy explains itself."""
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / ".cpg-evidence").mkdir()
    assert cpg("replay", str(EXAMPLE), "-d", str(repo / "policies")).returncode == 0
    copy = tmp_path / "copy"
    shutil.copytree(repo, copy)
    shutil.rmtree(repo)
    explained = cpg("explain", "shop/cart", "-d", str(copy / "policies"))
    assert explained.returncode == 0 and "TCP/8080" in explained.stdout
    moved = tmp_path / "moved"
    cached = cpg("replay", str(EXAMPLE), "-d", str(moved / "policies"), "-o", "json")
    source = Path(json.loads(cached.stdout)["evidence_dir"])
    (moved / ".cpg-evidence").mkdir()
    shutil.move(str(source), moved / ".cpg-evidence" / "policies")
    assert "TCP/8080" in cpg("explain", "shop/cart", "-d", str(moved / "policies")).stdout


def test_a_persons_file_keeps_the_workloads_name_and_every_hand_written_policy_is_named(
    tmp_path: Path,
) -> None:
    out = tmp_path / "p"
    (out / "shop").mkdir(parents=True)
    hand = {
        "apiVersion": "cilium.io/v2",
        "kind": "CiliumNetworkPolicy",
        "metadata": {"name": "cart-by-hand", "namespace": "shop"},
        "spec": {"endpointSelector": {"matchLabels": {"app": "cart"}}, "ingress": [{}]},
    }
    other = {**hand, "metadata": {"name": "frontend-audit", "namespace": "shop"}}
    other["spec"] = {"endpointSelector": {"matchLabels": {"app": "frontend"}}, "egress": [{}]}
    (out / "shop" / "cart.yaml").write_text(yaml.safe_dump(hand))
    (out / "shop" / "team-rules.yaml").write_text(yaml.safe_dump(other))
    ran = cpg("replay", str(EXAMPLE), "-d", str(out))
    assert ran.returncode == 0, ran.stderr
    assert (out / "shop" / "cart-cpg.yaml").exists()
    assert (
        "explain: cpg explain" in ran.stdout and "cart-cpg" not in ran.stdout.split("Next steps")[1]
    )
    assert cpg("explain", "shop/cart", "-d", str(out)).returncode == 0  # the workload's name
    assert "shop/cpg-frontend: also selected by your policy shop/frontend-audit" in ran.stdout


def test_a_misspelt_pod_filter_names_the_closest_pods(tmp_path: Path) -> None:
    folder = tmp_path / "p"
    assert cpg("replay", str(EXAMPLE), "-d", str(folder)).returncode == 0
    ran = cpg("why", str(EXAMPLE), "-d", str(folder), "--from-pod", "shop/frontnd")
    assert ran.returncode == 2
    assert "--from-pod 'shop/frontnd': no pod of the capture has that name" in ran.stderr
    assert "did you mean 'shop/frontend'" in ran.stderr
    right = cpg("why", str(EXAMPLE), "-d", str(folder), "--from-pod", "shop/frontend")
    assert right.returncode in (0, 3) and "kind(s) of flow" in right.stdout
