"""Drop triage end to end: the installed ``cpg`` on a capture with every kind of drop."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

from conftest import EXAMPLE, cpg, flow_dict, jsonl, triage_records


def expected_tallies(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Counts per reason, node and target workload, computed straight from the capture."""
    out: dict[str, dict[str, Any]] = {}
    for record in records:
        body = record["flow"]
        reason = body.get("drop_reason_desc")
        if reason not in (
            "CT_MAP_INSERTION_FAILED",
            "SERVICE_BACKEND_NOT_FOUND",
            "DROP_EP_NOT_READY",
            "STALE_OR_UNROUTABLE_IP",
        ):
            continue
        target = body["destination"] if body["traffic_direction"] == "INGRESS" else body["source"]
        app = next(
            label.split("=", 1)[1] for label in target["labels"] if label.startswith("k8s:app=")
        )
        entry = out.setdefault(reason, {"count": 0, "by_node": Counter(), "by_workload": Counter()})
        entry["count"] += 1
        entry["by_node"][body["node_name"]] += 1
        entry["by_workload"][f"{target['namespace']}/{app}"] += 1
    return out


def test_cluster_health_counts_equal_the_capture(tmp_path: Path) -> None:
    records = triage_records()
    capture = tmp_path / "capture.jsonl"
    capture.write_text(jsonl(records))
    out, evidence = tmp_path / "policies", tmp_path / "ev"
    result = cpg("replay", str(capture), "-d", str(out), "--evidence-dir", str(evidence))
    assert result.returncode == 0, result.stderr
    (health_file,) = evidence.rglob("cluster-health.json")
    assert f"cluster-health.json: {health_file}" in result.stdout
    health = json.loads(health_file.read_text())
    assert health["schema_version"] == 1
    assert health["classifier_version"].endswith("cilium1.19.4")
    expected = expected_tallies(records)
    got = {d["reason"]: d for d in health["drops"]}
    assert set(got) == set(expected)
    for reason, entry in expected.items():
        assert got[reason]["count"] == entry["count"]
        assert got[reason]["by_node"] == dict(entry["by_node"])
        assert got[reason]["by_workload"] == dict(entry["by_workload"])
        assert got[reason]["class"] == (
            "infra"
            if reason in ("CT_MAP_INSERTION_FAILED", "SERVICE_BACKEND_NOT_FOUND")
            else "transient"
        )
    assert health["session"]["infra_drops_total"] == 14
    assert health["session"]["flows_seen"] == len(records)
    assert health["noise"] == {"IS_A_CLUSTERIP": 2}
    assert health["skipped"] == {"replies": 3, "not_a_drop": 3}
    kinds = Counter()
    for finding in health["findings"]:
        kinds[finding["kind"]] += finding["count"]
    assert kinds == {"explicit_deny": 3, "auth_required": 2, "unselectable": 1}
    deny = next(f for f in health["findings"] if f["kind"] == "explicit_deny" and f.get("policies"))
    assert deny["policies"] == ["data/deny-db"]
    # Only candidates reached policies: the three ports from web, and the world peer.
    files = {str(p.relative_to(out)) for p in out.rglob("*.yaml")}
    assert files == {"shop/cart.yaml", "shop/web.yaml"}
    cart = yaml.safe_load((out / "shop" / "cart.yaml").read_text())
    ports = [
        (p["port"], p.get("endPort"))
        for r in cart["spec"]["ingress"]
        for pr in r["toPorts"]
        for p in pr["ports"]
    ]
    assert ports == [("8080", 8082)]  # three consecutive observed ports: one range
    assert "egress" not in cart["spec"]


def test_exit_codes(tmp_path: Path) -> None:
    capture = tmp_path / "capture.jsonl"
    capture.write_text(jsonl(triage_records()))
    clean = tmp_path / "clean.jsonl"
    clean.write_text(jsonl([flow_dict()]))
    ok = cpg("replay", str(clean), "-d", str(tmp_path / "a"), "--fail-on-infra-drops")
    assert ok.returncode == 0, ok.stderr
    tripped = cpg("replay", str(capture), "-d", str(tmp_path / "b"), "--fail-on-infra-drops")
    assert tripped.returncode == 3
    assert "14 infrastructure or transient drop(s)" in tripped.stderr
    assert list((tmp_path / "b").rglob("*.yaml")), "everything is written before exit 3"
    assert cpg("replay", str(capture), "-d", str(tmp_path / "c")).returncode == 0
    # Ignoring the infra reasons untrips it.
    quiet = cpg(
        "replay",
        str(capture),
        "-d",
        str(tmp_path / "d"),
        "--fail-on-infra-drops",
        "--ignore-drop-reason",
        "ct_map_insertion_failed,SERVICE_BACKEND_NOT_FOUND",
        "--ignore-drop-reason",
        "drop_ep_not_ready",
        "--ignore-drop-reason",
        "STALE_OR_UNROUTABLE_IP",
    )
    assert quiet.returncode == 0, quiet.stderr
    assert quiet.stderr.count("already reported as infrastructure") == 1, "warned once"
    bad = cpg("replay", str(capture), "--ignore-drop-reason", "CT_MAP_INSERT_FAIL")
    assert bad.returncode == 2
    assert "did you mean CT_MAP_INSERTION_FAILED" in bad.stderr
    assert cpg("replay", str(capture), "--output", "xml").returncode == 2


def test_unknown_reason_numbers_warn_once(tmp_path: Path) -> None:
    capture = tmp_path / "c.jsonl"
    capture.write_text(jsonl([flow_dict(reason=None, drop_reason=250, tcp=p) for p in (1, 2, 3)]))
    result = cpg("replay", str(capture), "-d", str(tmp_path / "p"))
    assert result.returncode == 0
    assert result.stderr.count("does not know") == 1
    assert "(250)" in result.stderr


def normalise(text: str, tmp_path: Path) -> str:
    text = text.replace(str(tmp_path), "<tmp>")
    return re.sub(r"/[0-9a-f]{12}(/|\b)", r"/<hash>\1", text)


def test_report_snapshots(tmp_path: Path, snapshot: Any) -> None:
    capture = tmp_path / "capture.jsonl"
    capture.write_text(jsonl(triage_records()))
    args = [
        "replay",
        str(capture),
        "-d",
        str(tmp_path / "p"),
        "--evidence-dir",
        str(tmp_path / "ev"),
    ]
    text = cpg(*args)
    assert normalise(text.stdout, tmp_path) == snapshot(name="text-report")
    as_json = cpg(*args, "--output", "json", "--fail-on-infra-drops")
    assert as_json.returncode == 3
    data = json.loads(as_json.stdout)
    assert data["exit_code"] == 3 and data["flows"]["infra"] == 8
    assert normalise(as_json.stdout, tmp_path) == snapshot(name="json-report")


def test_findings_are_in_plain_words_with_a_fix(tmp_path: Path) -> None:
    from cpg_core._base.advice import ADVICE
    from cpg_core._flows.synthesis import Unhandled

    # every kind of finding cpg can produce has words and a fix
    kinds = {u.value for u in Unhandled} | {"explicit_deny", "auth_required", "lb_source_range"}
    assert kinds <= set(ADVICE), kinds - set(ADVICE)
    assert all(a.fix for a in ADVICE.values())

    result = cpg("replay", str(EXAMPLE), "-d", str(tmp_path / "p"))
    report = result.stdout[result.stdout.index("Findings") : result.stdout.index("Policies in")]
    for code in ("no_port", "world_no_ip", "unselectable", "unknown_direction", "reserved_target"):
        assert code not in report, code
    assert "shop/debug-shell (peer) has no stable label" in report
    entries = [
        line
        for line in report.splitlines()[1:]
        if line.startswith("  ") and not line.startswith("    ")
    ]
    fixes = [line for line in report.splitlines() if line.startswith("    fix: ")]
    assert len(entries) == len(fixes) == 8
    as_json = json.loads(
        cpg("replay", str(EXAMPLE), "-d", str(tmp_path / "p"), "-o", "json").stdout
    )
    port_zero = next(f for f in as_json["findings"] if f["kind"] == "no_port")
    assert port_zero["label"] == "port 0" and "every port" in port_zero["explanation"]
    assert port_zero["fix"]


def test_a_pod_hubble_called_world_is_a_finding_not_a_cidr_rule(tmp_path: Path) -> None:
    from conftest import WORLD, endpoint, flow_dict, jsonl

    product = endpoint("bookinfo", "productpage", pod_name="productpage-1")
    reviews_as_world = {**WORLD, "pod_name": "reviews-v3-7d9c"}  # an L7 record's world peer
    other_world = dict(WORLD)
    records = [
        flow_dict(product, reviews_as_world, direction="EGRESS", tcp=9080, dst_ip="10.244.1.18"),
        # 10.244.2.7 is a pod too: another (denied) flow of the capture shows it, with labels
        flow_dict(product, other_world, direction="EGRESS", tcp=9080, dst_ip="10.244.2.7"),
        flow_dict(
            endpoint("bookinfo", "ratings", pod_name="ratings-1"),
            endpoint("bookinfo", "details", pod_name="details-1"),
            src_ip="10.244.2.7",
        ),
        # real world peers on the same port: one rule with both CIDRs
        flow_dict(product, other_world, direction="EGRESS", tcp=9080, dst_ip="93.184.216.34"),
        flow_dict(product, other_world, direction="EGRESS", tcp=9080, dst_ip="1.1.1.1"),
    ]
    capture = tmp_path / "c.jsonl"
    capture.write_text(jsonl(records))
    out = tmp_path / "policies"
    for jobs in ("1", "2"):
        ran = cpg("replay", str(capture), "-d", str(out), "--no-evidence", "-o", "json", "-j", jobs)
        assert ran.returncode == 0, ran.stderr
        report = json.loads(ran.stdout)
        pods = [f for f in report["findings"] if f["kind"] == "world_is_pod"]
        # only the pod whose labels the capture never shows stays a finding
        assert [f["subject"] for f in pods] == ["bookinfo/productpage → 10.244.1.18 TCP/9080"]
        assert "reported this peer as world" in pods[0]["explanation"]
    policy = yaml.safe_load((out / "bookinfo" / "productpage.yaml").read_text())
    by_peer = {
        json.dumps(rule.get("toCIDR") or rule.get("toEndpoints")): rule
        for rule in policy["spec"]["egress"]
    }
    assert set(by_peer) == {
        json.dumps(["1.1.1.1/32", "93.184.216.34/32"]),
        json.dumps([{"matchLabels": {"app": "ratings"}}]),  # the pod behind 10.244.2.7
        json.dumps(  # DNS, as every egress policy gets (§D47)
            [{"matchLabels": {"io.kubernetes.pod.namespace": "kube-system", "k8s-app": "kube-dns"}}]
        ),
    }


def test_a_field_masked_capture_is_told_to_widen_the_mask(tmp_path: Path) -> None:
    """A Hubble exporter with a field mask leaves out traffic_direction and the labels: the
    finding said "capture again with a Cilium that sets traffic_direction"; it names the
    mask now. A flow that only lacks the direction keeps the old advice."""
    from conftest import endpoint

    masked = flow_dict(endpoint("shop", "web"), endpoint("shop", "api"), tcp=8080)
    del masked["flow"]["traffic_direction"]
    for side in ("source", "destination"):
        del masked["flow"][side]["labels"]
    plain = flow_dict(endpoint("shop", "web"), endpoint("shop", "cart"), tcp=8080)
    del plain["flow"]["traffic_direction"]
    capture = tmp_path / "exported.jsonl"
    capture.write_text(jsonl([masked, plain]))
    ran = cpg("replay", str(capture), "-d", str(tmp_path / "p"), "--no-evidence", "-o", "json")
    findings = {f["kind"]: f for f in json.loads(ran.stdout)["findings"]}
    assert set(findings) == {"masked_direction", "unknown_direction"}, findings
    text = cpg("replay", str(capture), "-d", str(tmp_path / "q"), "--no-evidence").stdout
    assert "add traffic_direction, source.labels and destination.labels to the exporter's " in text
    why = cpg("why", str(capture), "-d", str(tmp_path / "p"))
    assert "exporter's field mask" in why.stdout
    assert "capture again with a Cilium that sets traffic_direction" in text  # the other flow
