"""``cpg replay`` then ``cpg explain``, run in-process as the CLI."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import yaml

from conftest import cpg, explain_capture


def allow_entries(policy: dict[str, Any]) -> set[tuple[str, str, str, str]]:
    """(direction, peer, protocol, port) of every allow entry in a generated policy."""
    entries = set()
    for direction in ("ingress", "egress"):
        for rule in policy["spec"].get(direction, []):
            peer = json.dumps(
                {k: v for k, v in rule.items() if k not in ("toPorts", "icmps")}, sort_keys=True
            )
            for port_rule in rule.get("toPorts", []):
                for p in port_rule["ports"]:  # a range is one entry per port in evidence
                    for port in range(int(p["port"]), int(p.get("endPort", p["port"])) + 1):
                        entries.add((direction, peer, p["protocol"], str(port)))
            for icmp in rule.get("icmps", []):
                for f in icmp["fields"]:
                    entries.add((direction, peer, "ICMP" + f["family"][2:], str(f["type"])))
    return entries


def test_every_allow_entry_has_exactly_one_evidence_rule(tmp_path: Path) -> None:
    path, candidates = explain_capture(tmp_path)
    out = tmp_path / "policies"
    assert cpg("replay", str(path), "-d", str(out)).returncode == 0
    total = 0
    for policy_file in sorted(out.rglob("*.yaml")):
        policy = yaml.safe_load(policy_file.read_text())
        target = f"{policy['metadata']['namespace']}/{policy_file.stem}"
        result = cpg("explain", target, "-d", str(out), "--json")
        assert result.returncode == 0, result.stderr
        record = json.loads(result.stdout)
        assert list(record) == ["policy", "sessions", "matched_rules"]
        rules = record["matched_rules"]
        keys = [r["key"] for r in rules]
        assert len(keys) == len(set(keys))
        evidence_entries = {(r["direction"], r["protocol"], r["port"]) for r in rules}
        yaml_entries = allow_entries(policy)
        assert len(rules) == len(yaml_entries)
        assert {(d, proto, port) for d, _, proto, port in yaml_entries} == evidence_entries
        total += sum(r["flow_count"] for r in rules)
        (session,) = record["sessions"]
        assert session["flows_ingested"] == 15
        assert session["flows_unhandled"] == 15 - candidates
    assert total == candidates


def test_explain_a_policy_file_and_other_formats(tmp_path: Path) -> None:
    path, _ = explain_capture(tmp_path)
    out = tmp_path / "policies"
    assert cpg("replay", str(path), "-d", str(out)).returncode == 0
    # A policy file path: workload and output dir come from where the file is.
    by_file = cpg("explain", str(out / "shop" / "cart.yaml"), "--json", cwd=tmp_path.parent)
    by_name = cpg("explain", "shop/cart", "-d", str(out), "--format", "json")
    assert by_file.returncode == 0, by_file.stderr
    assert by_file.stdout == by_name.stdout
    as_yaml = cpg(
        "explain", "shop/cart", "-d", str(out), "--format", "yaml", "--ingress", "--port", "8080"
    )
    assert as_yaml.returncode == 0
    data = yaml.safe_load(as_yaml.stdout)
    assert [r["key"] for r in data["matched_rules"]] == [
        "ingress:ep:pay/app=api:TCP:8080",
        "ingress:ep:shop/app=frontend:TCP:8080",
    ]
    text = cpg("explain", "shop/cart", "-d", str(out), "--peer", "app=frontend", "--port", "8080")
    assert text.returncode == 0
    assert "Ingress  TCP/8080 from shop/app=frontend" in text.stdout
    assert "flows:      5 (policy 5)" in text.stdout
    assert "\x1b[" not in text.stdout, "no colour when piped"
    none = cpg("explain", "shop/cart", "-d", str(out), "--peer-cidr", "10.0.0.0/8")
    assert none.returncode == 0
    assert "No rule matches these filters. Available rules:" in none.stdout
    assert "egress  TCP/443 to 203.0.113.7/32" in none.stdout


def test_evidence_flags(tmp_path: Path) -> None:
    path, _ = explain_capture(tmp_path)
    out = tmp_path / "policies"
    evidence = tmp_path / "ev"
    result = cpg(
        "replay",
        str(path),
        "-d",
        str(out),
        "--evidence-dir",
        str(evidence),
        "--evidence-samples",
        "2",
    )
    assert result.returncode == 0
    assert f"Evidence in {evidence}/" in result.stdout
    shown = json.loads(
        cpg(
            "explain", "shop/cart", "-d", str(out), "--evidence-dir", str(evidence), "--json"
        ).stdout
    )
    assert max(len(r["samples"]) for r in shown["matched_rules"]) == 2
    # The same capture again replaces its counts; a second capture (here the same flows in
    # a new file, a blank line first) is a second session, and counts add up.
    second = tmp_path / "second.jsonl"
    second.write_text("\n" + path.read_text())
    cpg("replay", str(path), "-d", str(out), "--evidence-dir", str(evidence))
    same = json.loads(
        cpg(
            "explain", "shop/cart", "-d", str(out), "--evidence-dir", str(evidence), "--json"
        ).stdout
    )
    assert [r["flow_count"] for r in same["matched_rules"]] == [
        r["flow_count"] for r in shown["matched_rules"]
    ]
    cpg(
        "replay",
        str(second),
        "-d",
        str(out),
        "--evidence-dir",
        str(evidence),
        "--evidence-sessions",
        "1",
    )
    again = json.loads(
        cpg(
            "explain", "shop/cart", "-d", str(out), "--evidence-dir", str(evidence), "--json"
        ).stdout
    )
    assert len(again["sessions"]) == 1
    first = {r["key"]: r["flow_count"] for r in shown["matched_rules"]}
    assert {r["key"]: r["flow_count"] for r in again["matched_rules"]} == {
        k: 2 * v for k, v in first.items()
    }
    # --no-evidence and --dry-run write none.
    other = tmp_path / "other"
    assert (
        cpg(
            "replay",
            str(path),
            "-d",
            str(other),
            "--evidence-dir",
            str(tmp_path / "e2"),
            "--no-evidence",
        ).returncode
        == 0
    )
    assert (
        cpg(
            "replay",
            str(path),
            "-d",
            str(tmp_path / "dry"),
            "--evidence-dir",
            str(tmp_path / "e3"),
            "--dry-run",
        ).returncode
        == 0
    )
    assert not (tmp_path / "e2").exists() and not (tmp_path / "e3").exists()
    assert list(other.rglob("*.yaml"))


def test_errors_that_teach(tmp_path: Path) -> None:
    missing = cpg("explain", "shop/cart", "-d", str(tmp_path / "nowhere"))
    assert missing.returncode == 1
    assert f"{os.path.abspath(tmp_path / 'nowhere')}: no such folder" in missing.stderr
    assert "cpg replay" in missing.stderr
    path, _ = explain_capture(tmp_path)
    out = tmp_path / "policies"
    evidence = tmp_path / "ev"
    cpg("replay", str(path), "-d", str(out), "--evidence-dir", str(evidence))
    (evidence_file,) = [p for p in evidence.rglob("cart.json")]
    evidence_file.write_text(json.dumps({"schema_version": 1}))
    bad = cpg("explain", "shop/cart", "-d", str(out), "--evidence-dir", str(evidence))
    assert bad.returncode == 1 and "schema_version 1" in bad.stderr and "rebuild" in bad.stderr
    # A replay into the same output refuses to merge into it, and says so.
    rerun = cpg("replay", str(path), "-d", str(out), "--evidence-dir", str(evidence))
    assert rerun.returncode == 1 and "schema_version 1" in rerun.stderr
    for args, hint in (
        (["explain", "shop"], "NAMESPACE/WORKLOAD"),
        (["explain", "shop/cart", "--ingress", "--egress"], "not both"),
        (["explain", "shop/cart", "--peer", "app"], "KEY=VALUE"),
        (["explain", "shop/cart", "--peer-cidr", "nope"], "not a CIDR"),
        (
            ["explain", "shop/cart", "--since", "yesterday"],
            "is not an RFC 3339 time (e.g. 2026-11-02T10:00:00Z) or a duration",
        ),
        (["explain", "shop/cart", "--port", "http"], "not a port"),
        (["explain", "shop/cart", "--format", "xml"], "--format"),
        (["explain", "../cart"], "Invalid value for TARGET: namespace '..' is not valid"),
        (["explain", "Shop/cart"], "Invalid value for TARGET: namespace 'Shop'"),
    ):
        result = cpg(*args)
        assert result.returncode == 2, args
        assert hint in result.stderr, (args, result.stderr)
    not_cpg = tmp_path / "hand.yaml"
    not_cpg.write_text("metadata: {name: mine, namespace: shop}\n")
    result = cpg("explain", str(not_cpg))
    assert result.returncode == 1 and "not generated by cpg" in result.stderr


def test_a_misspelt_workload_or_folder_names_the_closest(tmp_path: Path) -> None:
    """``cpg explain shop/cartt`` talked about evidence hashes; it names the policy the user
    meant, and a misspelt -d names the folder beside it."""
    from conftest import EXAMPLE

    assert cpg("replay", str(EXAMPLE), "-d", "policies", "-q", cwd=tmp_path).returncode == 0
    typo = cpg("explain", "shop/cartt", "-d", "policies", cwd=tmp_path)
    assert typo.returncode == 1
    assert typo.stderr.strip() == (
        "cpg: error: no policy shop/cartt in policies: did you mean 'shop/cart'?"
    )
    folder = cpg("explain", "shop/cart", "-d", "policiess", cwd=tmp_path)
    assert folder.returncode == 1
    assert "policiess: no such folder (did you mean 'policies'?); run" in folder.stderr
    far = cpg("explain", "kube-system/coredns", "-d", "policies", cwd=tmp_path)
    assert far.returncode == 1 and "did you mean" not in far.stderr
    assert "run 'cpg replay CAPTURE -d policies' first" in far.stderr
