"""End to end: the ``cpg`` command, in-process (the installed entry point once, as a process)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
import yaml

from conftest import (
    CORPUS,
    EXAMPLE,
    assert_crd_valid,
    cpg,
    cpg_process,
    endpoint,
    flow_dict,
    jsonl,
    policies,
)


def test_version_and_help() -> None:
    version = cpg_process("--version")
    assert version.returncode == 0 and version.stdout.startswith("cpg ")
    helped = cpg("replay", "--help")
    assert helped.returncode == 0
    for flag in (
        "--namespace",
        "--all-namespaces",
        "--output-dir",
        "--include-audit",
        "--ignore-protocol",
        "--dry-run",
        "--no-diff",
        "--log-level",
    ):
        assert flag in helped.stdout


def test_example_capture_end_to_end(tmp_path: Path, snapshot: object) -> None:
    out = tmp_path / "policies"
    result = cpg("replay", str(EXAMPLE), "-d", str(out))
    assert result.returncode == 0, result.stderr
    files = policies(out)
    assert sorted(files) == [
        "monitoring/blackbox.yaml",
        "monitoring/prometheus.yaml",
        "payments/ledger.yaml",
        "payments/payments-api.yaml",
        "shop/cart.yaml",
        "shop/frontend.yaml",
    ]
    for text in files.values():
        assert_crd_valid(text)
    assert files == snapshot
    summary = result.stdout
    assert "malformed lines skipped: 2 of 67 (3.0 %; line 32, 46)" in summary
    assert "explicit deny (never allowed)              2" in summary
    assert "6 created, 0 updated, 0 unchanged" in summary
    assert "examples/drops.jsonl:32: skipped malformed line" in result.stderr
    # Explicit denies, replies, infra drops and the AUDIT flow left no trace in the YAML.
    cart = yaml.safe_load(files["shop/cart.yaml"])
    ingress_ports = {
        p["port"]
        for r in cart["spec"]["ingress"]
        for pr in r.get("toPorts", [])
        for p in pr["ports"]
    }
    assert ingress_ports == {"8080", "8443"}  # not 9090 (AUDIT) and not 41000+ (replies)
    cart_peers = [
        s["matchLabels"].get("app")
        for r in cart["spec"]["egress"]
        for s in r.get("toEndpoints", [])
    ]
    assert "frontend" not in cart_peers, (
        "reply packets (cart -> frontend) must not open the reverse path"
    )
    ledger = yaml.safe_load(files["payments/ledger.yaml"])
    assert all(
        s["matchLabels"].get("app") != "cart"
        for r in ledger["spec"]["ingress"]
        for s in r.get("fromEndpoints", [])
    ), "the explicit deny (cart -> ledger) must never become an allow rule"
    # A second run changes nothing and touches nothing.
    mtimes = {p: p.stat().st_mtime_ns for p in out.rglob("*.yaml")}
    again = cpg("replay", str(EXAMPLE), "-d", str(out))
    assert again.returncode == 0
    assert "0 created, 0 updated, 6 unchanged" in again.stdout
    assert {p: p.stat().st_mtime_ns for p in out.rglob("*.yaml")} == mtimes


def test_include_audit_adds_the_audit_flow(tmp_path: Path) -> None:
    out = tmp_path / "p"
    assert cpg("replay", str(EXAMPLE), "-d", str(out), "--include-audit").returncode == 0
    cart = yaml.safe_load((out / "shop" / "cart.yaml").read_text())
    ports = {
        p["port"]
        for r in cart["spec"]["ingress"]
        for pr in r.get("toPorts", [])
        for p in pr["ports"]
    }
    assert "9090" in ports


def test_include_audit_warns_when_no_audit_flow_arrived(tmp_path: Path) -> None:
    capture = tmp_path / "c.jsonl"
    capture.write_text(jsonl([flow_dict()]))
    result = cpg("replay", str(capture), "-d", str(tmp_path / "p"), "--include-audit")
    assert result.returncode == 0
    assert "no AUDIT-verdict flow" in result.stderr


@pytest.mark.skipif(not CORPUS.exists(), reason="../shared/corpus is absent")
@pytest.mark.parametrize(
    "name", sorted(p.name for p in CORPUS.glob("*.json*")) if CORPUS.exists() else []
)
def test_every_real_capture_replays_cleanly(tmp_path: Path, name: str) -> None:
    result = cpg("replay", str(CORPUS / name), "-d", str(tmp_path / "p"))
    assert result.returncode == 0, result.stderr
    assert "malformed" not in result.stdout
    lines = sum(1 for line in (CORPUS / name).read_text().splitlines() if line.strip())
    assert f"Read {lines} line" in result.stdout
    for text in policies(tmp_path / "p").values():
        assert_crd_valid(text)


def test_stdin_and_gzip_give_the_same_files(tmp_path: Path) -> None:
    data = EXAMPLE.read_bytes()
    gz = tmp_path / "capture.bin"
    gz.write_bytes(gzip.compress(data))
    assert cpg("replay", "-", "-d", str(tmp_path / "a"), stdin=data).returncode == 0
    assert cpg("replay", str(gz), "-d", str(tmp_path / "b")).returncode == 0
    assert policies(tmp_path / "a") == policies(tmp_path / "b")
    assert policies(tmp_path / "a")


def test_dry_run_writes_nothing_and_prints_a_diff(tmp_path: Path) -> None:
    out = tmp_path / "p"
    result = cpg("replay", str(EXAMPLE), "-d", str(out), "--dry-run")
    assert result.returncode == 0
    assert not out.exists()
    assert f"+++ {out}/shop/cart.yaml" in result.stdout
    assert "+  # TCP/8080, TCP/8443 from shop/app=frontend" in result.stdout
    assert "6 would be created" in result.stderr, "the summary goes to stderr"
    assert result.stdout.startswith("--- /dev/null"), "stdout is the diff alone"
    quiet = cpg("replay", str(EXAMPLE), "-d", str(out), "--dry-run", "--no-diff")
    assert "+++" not in quiet.stdout and not out.exists()
    changes = cpg("replay", str(EXAMPLE), "-d", str(out), "--dry-run", "--exit-code")
    assert changes.returncode == 3, "files would change"
    assert cpg("replay", str(EXAMPLE), "-d", str(out)).returncode == 0
    same = cpg("replay", str(EXAMPLE), "-d", str(out), "--dry-run", "--exit-code")
    assert same.returncode == 0 and not same.stdout, "nothing would change"
    assert cpg("replay", str(EXAMPLE), "--exit-code").returncode == 2


def test_namespace_filter(tmp_path: Path) -> None:
    out = tmp_path / "p"
    assert cpg("replay", str(EXAMPLE), "-d", str(out), "-n", "payments,monitoring").returncode == 0
    assert {p.split("/")[0] for p in policies(out)} == {"payments", "monitoring"}


def test_ignore_protocol(tmp_path: Path) -> None:
    out = tmp_path / "p"
    result = cpg("replay", str(EXAMPLE), "-d", str(out), "--ignore-protocol", "icmpv4,ICMPv6")
    assert result.returncode == 0
    assert "by protocol: icmpv4 2, icmpv6 1" in result.stdout
    assert not any("icmps" in text for text in policies(out).values())


def test_a_human_edited_file_keeps_its_edits(tmp_path: Path) -> None:
    out = tmp_path / "p"
    first = tmp_path / "first.jsonl"
    first.write_text(
        jsonl([flow_dict(src=endpoint("shop", "frontend"), dst=endpoint("shop", "cart"), tcp=8080)])
    )
    assert cpg("replay", str(first), "-d", str(out)).returncode == 0
    path = out / "shop" / "cart.yaml"
    path.write_text(
        path.read_text().replace("  ingress:\n", "  ingress:\n  # keep: vetted by security\n")
    )
    second = tmp_path / "second.jsonl"
    second.write_text(
        jsonl([flow_dict(src=endpoint("shop", "frontend"), dst=endpoint("shop", "cart"), tcp=9000)])
    )
    assert cpg("replay", str(second), "-d", str(out)).returncode == 0
    text = path.read_text()
    assert "# keep: vetted by security" in text
    assert "# TCP/8080, TCP/9000 from shop/app=frontend" in text


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["replay", "x.jsonl", "-n", "a", "-A"], "not both"),
        (["replay", "x.jsonl", "-n", "Bad_NS"], "not a valid namespace"),
        (["replay", "x.jsonl", "--ignore-protocol", "http"], "unknown protocol"),
        (["replay", "x.jsonl", "--log-level", "loud"], "--log-level"),
        (["replay", "x.jsonl", "--no-such-flag"], "No such option"),
        (["replay"], "Usage"),
    ],
)
def test_usage_errors_exit_2(args: list[str], message: str) -> None:
    result = cpg(*args)
    assert result.returncode == 2
    assert message in result.stderr + result.stdout


def test_runtime_errors_exit_1(tmp_path: Path) -> None:
    missing = cpg("replay", str(tmp_path / "missing.jsonl"), "-d", str(tmp_path / "p"))
    assert missing.returncode == 1
    assert "no such file" in missing.stderr
    capture = tmp_path / "c.jsonl"
    capture.write_text(jsonl([flow_dict()]))
    out = tmp_path / "p"
    (out / "shop").mkdir(parents=True)
    mine = "kind: ConfigMap\nmetadata:\n  labels:\n    app.kubernetes.io/managed-by: cpg\n"
    (out / "shop" / "cart.yaml").write_text(mine)  # cpg's label, not a policy cpg can merge
    broken = cpg("replay", str(capture), "-d", str(out))
    assert broken.returncode == 1
    assert "cart.yaml" in broken.stderr and "move the file aside" in broken.stderr
    # the same file without cpg's label is a person's: left alone, cpg's policy beside it
    (out / "shop" / "cart.yaml").write_text("kind: ConfigMap\nspec: {}\n")
    beside = cpg("replay", str(capture), "-d", str(out))
    assert beside.returncode == 0 and (out / "shop" / "cart-cpg.yaml").exists()
    assert (out / "shop" / "cart.yaml").read_text() == "kind: ConfigMap\nspec: {}\n"
    assert (out / "shop" / "cart.yaml").read_text() == "kind: ConfigMap\nspec: {}\n"


def test_results_on_stdout_and_logs_on_stderr(tmp_path: Path) -> None:
    result = cpg("replay", str(EXAMPLE), "-d", str(tmp_path / "p"), "--log-level", "info")
    assert result.stdout.startswith("Read ")
    assert "WARNING" in result.stderr and "Read " not in result.stderr
    json.dumps(result.stdout)  # plain text, no binary noise


def test_a_newline_in_a_capture_value_cannot_forge_a_line_of_output(tmp_path: Path) -> None:
    """A label and a pod name ending in a fake summary line: replay, verify and plan print
    them on the line they belong to, never as a line of their own."""
    from conftest import endpoint, flow_dict, jsonl

    forged = "Verify: 9/9 candidate flows admitted"
    src = endpoint("shop", f"web\n{forged}", pod_name=f"web-1\r\n{forged}")
    dst = endpoint("shop", "api", pod_name="api-1")
    records = [flow_dict(src, dst), flow_dict(src, dst, verdict="FORWARDED"), flow_dict(dst, src)]
    capture = tmp_path / "forged.jsonl"
    capture.write_text(jsonl(records))
    out = tmp_path / "policies"
    runs = [
        cpg("replay", str(capture), "-d", str(out), "--verify"),
        cpg("verify", str(capture), "-d", str(out)),
        cpg("plan", str(capture), "-d", str(out)),
    ]
    for ran in runs:
        printed = (ran.stdout + ran.stderr).splitlines()
        assert forged not in [line.strip() for line in printed], ran.stdout
    assert any("shop/web " + forged in line for ran in runs[1:] for line in ran.stdout.splitlines())


def test_exclude_namespace_writes_no_policy_there_and_keeps_the_other_end(
    tmp_path: Path,
) -> None:
    """hubble observe's --not --namespace: no policy for shop's workloads, but shop's
    traffic still gives payments its rules (ledger admits shop/worker)."""
    out = tmp_path / "p"
    ran = cpg("replay", str(EXAMPLE), "-d", str(out), "--exclude-namespace", "shop", "-o", "json")
    assert ran.returncode == 0, ran.stderr
    written = sorted(p.relative_to(out).as_posix() for p in out.rglob("*.yaml"))
    assert written and not any(name.startswith("shop/") for name in written)
    ledger = (out / "payments" / "ledger.yaml").read_text()
    assert "io.kubernetes.pod.namespace: shop" in ledger
    assert json.loads(ran.stdout)["outside_namespaces"] > 0
    both = cpg("replay", str(EXAMPLE), "-d", str(out), "-n", "shop", "--exclude-namespace", "shop")
    assert both.returncode == 2 and "shop is both asked for and excluded" in both.stderr
