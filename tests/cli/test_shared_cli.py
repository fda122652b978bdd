"""``--shared``: rules many workloads need written once under ``_shared/``, and every command
that reads the folder (verify, plan, lint, explain, report) treating those files like any
other; later runs merge into them, and a shared file a human changed is left alone."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import ROOT, cpg, flow_dict, jsonl

sys.path.insert(0, str(ROOT / "benchmarks"))
from synthetic import synthetic_capture

WORKLOADS = 45


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The synthetic cluster replayed with sharing (the default) and without."""
    root = tmp_path_factory.mktemp("shared")
    capture = synthetic_capture(root / "capture.jsonl", WORKLOADS)
    evidence = root / "evidence"
    for name, extra in (
        ("shared", ("--evidence-dir", str(evidence))),
        ("each", ("--shared", "0", "--no-evidence")),
        ("kcnp", ("--baseline-format", "kcnp", "--no-evidence")),
    ):
        ran = cpg("replay", str(capture), "-d", str(root / name), *extra)
        assert ran.returncode == 0, ran.stderr
    return {
        "capture": capture,
        "shared": root / "shared",
        "each": root / "each",
        "kcnp": root / "kcnp",
        "ev": evidence,
    }


def _yaml_files(folder: Path) -> list[Path]:
    return sorted(folder.rglob("*.yaml"))


def _would_break(capture: Path, folder: Path) -> list[str]:
    ran = cpg("plan", str(capture), "-d", str(folder), "-o", "json")
    assert ran.returncode == 3, ran.stderr  # the synthetic canaries break
    doc: dict[str, Any] = json.loads(ran.stdout)
    return sorted(json.dumps(item["traffic"], sort_keys=True) for item in doc["would_break"])


def test_shared_rules_are_written_once_and_judged_as_before(cluster: dict[str, Path]) -> None:
    shared, each = cluster["shared"], cluster["each"]
    infra = sorted(p.name for p in (shared / "_shared").glob("*.yaml"))
    assert any("kube-dns" in name for name in infra)
    assert any("prometheus" in name for name in infra)
    assert not (each / "_shared").exists()
    lines = {
        k: sum(len(p.read_text().splitlines()) for p in _yaml_files(v))
        for k, v in cluster.items()
        if k in ("shared", "each")
    }
    assert lines["shared"] < lines["each"]
    # no workload's own policy still names kube-dns
    for path in _yaml_files(shared):
        if path.parent.name != "_shared":
            assert "to kube-system/app=kube-dns" not in path.read_text(), path
    # verify admits every flow; plan finds the same traffic broken
    ran = cpg("verify", str(cluster["capture"]), "-d", str(shared))
    assert ran.returncode == 0, ran.stdout[-2000:]
    assert _would_break(cluster["capture"], shared) == _would_break(cluster["capture"], each)
    # plan never proposes a rule inside a shared policy (it would admit every member's
    # traffic); narrowing one's selector leaves a pod out and opens nothing
    doc = json.loads(cpg("plan", str(cluster["capture"]), "-d", str(shared), "-o", "json").stdout)
    assert doc["would_break"]
    for item in doc["would_break"]:
        assert (
            "add a rule to cpg-shared-" not in item["fix"] and "cpg-shared-" not in item["policy"]
        )
    # lint: clean
    linted = cpg("lint", str(shared))
    assert linted.returncode == 0, linted.stdout


def test_explain_and_report_read_the_shared_policies(cluster: dict[str, Path]) -> None:
    shared = cluster["shared"]
    (dns,) = [p for p in (shared / "_shared").glob("*.yaml") if "kube-dns" in p.name]
    ran = cpg(
        "explain",
        f"_shared/{dns.stem}",
        "-d",
        str(shared),
        "--evidence-dir",
        str(cluster["ev"]),
        "-o",
        "json",
    )
    assert ran.returncode == 0, ran.stderr
    counts = {r["protocol"]: r["flow_count"] for r in json.loads(ran.stdout)["matched_rules"]}
    assert counts == {"UDP": WORKLOADS, "TCP": 0}  # one DNS flow per workload; TCP/53 added
    # the report draws and counts a shared policy at each workload it serves
    views = {}
    for name in ("shared", "each"):
        report = cpg("report", "-d", str(cluster[name]), "-o", "json")
        assert report.returncode == 0, report.stderr
        doc = json.loads(report.stdout)
        views[name] = (doc["coverage"], doc["matrix"], doc["namespaces"])
    assert views["shared"] == views["each"]


def test_a_rerun_changes_nothing_and_a_newcomer_joins_the_shared_policy(
    cluster: dict[str, Path], tmp_path: Path
) -> None:
    import shutil

    out = tmp_path / "out"
    shutil.copytree(cluster["shared"], out)
    before = {p: p.read_text() for p in _yaml_files(out)}
    ran = cpg("replay", str(cluster["capture"]), "-d", str(out), "--no-evidence", "-o", "json")
    assert ran.returncode == 0
    assert {p: p.read_text() for p in _yaml_files(out)} == before
    # one new workload resolving names: fewer than 10 need it in this capture, yet it joins
    dns = {
        "namespace": "kube-system",
        "labels": ["k8s:app=kube-dns", "k8s:io.kubernetes.pod.namespace=kube-system"],
        "identity": 53,
    }
    late = {
        "namespace": "late",
        "labels": ["k8s:app=late", "k8s:io.kubernetes.pod.namespace=late"],
        "identity": 7001,
    }
    extra = tmp_path / "late.jsonl"
    extra.write_text(jsonl([flow_dict(late, dns, direction="EGRESS", tcp=None, udp=53)]))
    assert cpg("replay", str(extra), "-d", str(out), "--no-evidence").returncode == 0
    (dns_file,) = [p for p in (out / "_shared").glob("*.yaml") if "kube-dns" in p.name]
    doc = yaml.safe_load(dns_file.read_text())
    assert "late" in json.dumps(doc["specs"] if "specs" in doc else doc["spec"])
    assert not (out / "late").exists()  # its only rule is shared: no file of its own
    assert cpg("verify", str(extra), "-d", str(out)).returncode == 0


def test_a_shared_policy_a_human_changed_is_left_alone(
    cluster: dict[str, Path], tmp_path: Path
) -> None:
    import shutil

    out = tmp_path / "out"
    shutil.copytree(cluster["shared"], out)
    (dns_file,) = [p for p in (out / "_shared").glob("*.yaml") if "kube-dns" in p.name]
    edited = dns_file.read_text() + "# reviewed by the platform team\n"
    dns_file.write_text(edited)
    assert cpg("replay", str(cluster["capture"]), "-d", str(out), "--no-evidence").returncode == 0
    assert dns_file.read_text() == edited
    # the rule went back into the workloads' own policies, so nothing depends on the edit
    assert "to kube-system/app=kube-dns" in (out / "app-01" / "web.yaml").read_text()
    assert cpg("verify", str(cluster["capture"]), "-d", str(out)).returncode == 0


def test_shared_needs_two_or_more_workloads(tmp_path: Path) -> None:
    capture = tmp_path / "c.jsonl"
    capture.write_text(jsonl([flow_dict()]))
    ran = cpg("replay", str(capture), "-d", str(tmp_path / "o"), "--shared", "1")
    assert ran.returncode == 2
    assert "--shared" in ran.stderr and "2 or more" in ran.stderr


def test_generate_shares_what_replay_shares(cluster: dict[str, Path], tmp_path: Path) -> None:
    """A live capture writes the same shared and per-workload files as a replay of its flows
    (sharing decided at each flush, later workloads joining the shared policies). The run is
    stopped once the files match (or after a generous deadline), so a busy machine that takes
    longer to take in the flows does not change the outcome."""
    from conftest import CPG, policies, run_until_sigterm
    from fake_relay import fake_relay, responses_from_lines

    expected = policies(cluster["shared"])
    out = tmp_path / "live"
    lines = cluster["capture"].read_text().splitlines()
    with fake_relay(responses_from_lines(lines)) as (relay, address):
        command = [CPG, "generate", "--server", address, "-d", str(out), "--no-evidence"]
        ran = run_until_sigterm(
            [*command, "--flush-interval", "0.3s"],
            lambda: relay.done.is_set() and out.exists() and policies(out) == expected,
        )
    assert relay.done.is_set(), "the relay sent everything"
    assert ran.returncode == 0, ran.stderr
    assert policies(out) == expected


def test_kcnp_holds_whole_egress_in_the_baseline_tier_and_judges_as_before(
    cluster: dict[str, Path], tmp_path: Path
) -> None:
    import shutil

    kcnp = cluster["kcnp"]
    files = {p.name: p.read_text() for p in (kcnp / "_shared").glob("cpg-baseline-*.yaml")}
    assert "cpg-baseline-default-deny-egress.yaml" in files
    assert any("kube-dns" in name for name in files)
    assert all("kind: ClusterNetworkPolicy" in text for text in files.values())
    assert not any("ingress:" in text for text in files.values())  # ingress stays Cilium's
    capture = cluster["capture"]
    assert cpg("verify", str(capture), "-d", str(kcnp)).returncode == 0
    assert _would_break(capture, kcnp) == _would_break(capture, cluster["each"])
    linted = cpg("lint", str(kcnp), "-o", "json")
    # no error; what the Baseline tier leaves open is said, once per default deny (CPG044),
    # and how Cilium enforces it is a note
    doc = json.loads(linted.stdout)
    assert {f["code"] for f in doc["findings"]} == {"CPG044"}, linted.stdout
    assert all(f["level"] == "warning" for f in doc["findings"])
    assert any("--enable-k8s-cluster-network-policy" in note for note in doc["notes"])
    views = []
    for folder in (kcnp, cluster["each"]):
        doc = json.loads(cpg("report", "-d", str(folder), "-o", "json").stdout)
        views.append((doc["coverage"], doc["matrix"]))
    assert views[0] == views[1]
    # A workload held whole by the Baseline tier gains an egress rule of its own: Cilium
    # polices its egress from then on, so its DNS moves back to a Cilium policy.
    out = tmp_path / "out"
    shutil.copytree(kcnp, out)
    from cpg_core._synthesis.baseline import read_baseline

    deny = read_baseline(
        list(
            yaml.safe_load_all(
                (out / "_shared" / "cpg-baseline-default-deny-egress.yaml").read_text()
            )
        )
    )
    assert deny is not None and deny.members
    member = sorted(deny.members)[0]
    app = dict(member.selector)["app"]
    ns = member.namespace
    me = {
        "namespace": ns,
        "labels": [f"k8s:app={app}", f"k8s:io.kubernetes.pod.namespace={ns}"],
        "identity": 6001,
    }
    db = {
        "namespace": ns,
        "labels": ["k8s:app=zz-new", f"k8s:io.kubernetes.pod.namespace={ns}"],
        "identity": 6002,
    }
    extra = tmp_path / "later.jsonl"
    extra.write_text(jsonl([flow_dict(me, db, direction="EGRESS", tcp=5432)]))
    ran = cpg("replay", str(extra), "-d", str(out), "--no-evidence", "--baseline-format", "kcnp")
    assert ran.returncode == 0, ran.stderr
    both = tmp_path / "both.jsonl"
    both.write_text(capture.read_text() + extra.read_text())
    verified = cpg("verify", str(both), "-d", str(out))
    assert verified.returncode == 0, verified.stdout[-3000:]
    own = (out / ns / f"{app}.yaml").read_text()
    assert "zz-new" in own  # its own egress rule, so Cilium polices its egress now
    assert "to kube-system/app=kube-dns" in own or any(
        f"- {app}" in p.read_text() and "kind: CiliumClusterwideNetworkPolicy" in p.read_text()
        for p in (out / "_shared").glob("cpg-shared-egress-kube-system-kube-dns-*.yaml")
    )
