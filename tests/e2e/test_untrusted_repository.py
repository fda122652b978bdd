"""A reviewer runs cpg on an untrusted pull request: its policy YAML, its .cpg-evidence files
and its plan are hostile. verify, plan and report end with clear errors or safe output, within
a 512 MB address space, and read nothing outside the repository."""

from __future__ import annotations

import json
import resource
import subprocess
from pathlib import Path

from conftest import CPG, EXAMPLE, cpg

LIMIT = 512 * 1024 * 1024


def _bounded() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (LIMIT, LIMIT))


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(CPG), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=_bounded,
    )


def _hostile_repository(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    (repo / ".cpg-evidence").mkdir(parents=True)
    assert cpg("replay", str(EXAMPLE), "-d", str(repo / "policies")).returncode == 0
    planned = cpg("plan", str(EXAMPLE), "-d", str(repo / "policies"), "-o", "json")
    plan = json.loads(planned.stdout)
    plan["would_break"] = [{"traffic": 7, "why": "", "fix": ""}]
    (repo / "plan.json").write_text(json.dumps(plan))
    secret = tmp_path / "secret.json"
    secret.write_text('{"token": "TOPSECRET"}')
    (evidence,) = {p.parent for p in (repo / ".cpg-evidence").rglob("*.json") if "shop" in p.parts}
    (evidence / "leak.json").symlink_to(secret)
    (evidence / "endless.json").symlink_to("/dev/zero")
    (repo / "policies" / "shop" / "endless.yaml").symlink_to("/dev/zero")
    (repo / "policies" / "shop" / "outside.yaml").symlink_to(secret)
    (repo / "policies" / "shop" / "not-a-policy-typed.yaml").write_text(
        "apiVersion: cilium.io/v2\nkind: CiliumNetworkPolicy\nmetadata: [1]\nspec: 3\n"
    )
    (repo / "policies" / "shop" / "not-a-policy-list.yaml").write_text("kind: List\nitems: 5\n")
    (repo / "policies" / "shop" / "not-a-policy-deep.yaml").write_text(
        "apiVersion: cilium.io/v2\nkind: CiliumNetworkPolicy\n"
        "metadata: {name: deep, namespace: shop}\n"
        "spec: {endpointSelector: {matchLabels: {app: cart}}, ingress: [{toPorts: [{ports: 5}]}]}\n"
    )
    return repo


def test_verify_plan_and_report_on_a_hostile_repository(tmp_path: Path) -> None:
    repo = _hostile_repository(tmp_path)
    capture = str(EXAMPLE)
    for args in (("verify", capture, "-d", "policies"), ("plan", capture, "-d", "policies")):
        ran = _run(*args, cwd=repo)
        assert ran.returncode == 1, (args, ran.stderr)
        assert "Traceback" not in ran.stderr and "MemoryError" not in ran.stderr
        for name in (
            "endless.yaml",
            "outside.yaml",
            "not-a-policy-typed.yaml",
            "not-a-policy-list.yaml",
        ):
            assert name in ran.stderr, (args, name, ran.stderr)
        assert "metadata: expected a mapping" in ran.stderr
        assert "items: expected a list" in ran.stderr
        assert "spec.ingress[0].toPorts[0].ports: expected a list" in ran.stderr
    for fmt in ("markdown", "html"):
        report = _run("report", "-d", "policies", "-o", fmt, cwd=repo)
        assert report.returncode == 0, report.stderr
        assert "Traceback" not in report.stderr
        assert "TOPSECRET" not in report.stdout and "TOPSECRET" not in report.stderr
        assert "leak.json" in report.stderr and "endless.json" in report.stderr
        assert "shop/cpg-" in report.stdout  # the usable policies are still reported
    bad_plan = _run("report", "-d", "policies", "--plan", "plan.json", cwd=repo)
    assert bad_plan.returncode == 1 and "Traceback" not in bad_plan.stderr
    assert "plan.json" in bad_plan.stderr and "traffic" in bad_plan.stderr
