"""The fourth hostile round (issue 67): each defect found, under its own name, as a user or
an attacker met it. Nothing a person wrote is lost, no file leads cpg outside its folder,
odd input never ends in a traceback or a wrong verdict."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import EXAMPLE, cpg

PERSONS_CART = """\
# copied from cpg's output once; app.kubernetes.io/managed-by: cpg no more
apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata:
  name: cart-by-hand
  namespace: shop
  annotations:
    note: "was app.kubernetes.io/managed-by: cpg"
spec:
  endpointSelector:
    matchLabels:
      app: cart
  ingress:
  - fromEndpoints:
    - matchLabels:
        app: frontend
"""


def test_a_persons_file_that_quotes_cpgs_mark_is_never_merged_into(tmp_path: Path) -> None:
    """A comment or an annotation value mentioning ``app.kubernetes.io/managed-by: cpg`` made
    cpg take a person's file as its own and merge into it (14 → 45 lines, nothing said). The
    parsed label decides: cpg writes its own file beside it and names the person's."""
    out = tmp_path / "policies"
    assert cpg("replay", str(EXAMPLE), "-d", str(out)).returncode == 0
    cart = out / "shop" / "cart.yaml"
    cart.write_text(PERSONS_CART)
    ran = cpg("replay", str(EXAMPLE), "-d", str(out))
    assert ran.returncode == 0, ran.stderr
    assert cart.read_text() == PERSONS_CART
    assert (out / "shop" / "cart-cpg.yaml").is_file()
    assert "CiliumNetworkPolicy cart-by-hand in shop/cart.yaml (left as it is" in ran.stdout


PERSONS_KUSTOMIZATION = """\
# the shop's policies: Argo CD syncs this folder (prune: true)
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  # the baseline every namespace gets, from the platform repository
  - https://example.com/platform/baseline-deny.yaml?ref=v3
  - ../generated/probes.yaml   # made by CI before the build
  - allow-probes.yaml
commonLabels:
  team: shop
"""


def test_kustomize_keeps_every_byte_of_a_persons_kustomization(tmp_path: Path) -> None:
    """--kustomize rewrote a person's kustomization.yaml with safe_dump (every comment gone)
    and dropped their entries that are URLs or build-time paths (with pruning, the baseline
    deny would be deleted at the next sync). cpg now appends its own entries, marked, and
    removes only marked ones whose file is gone."""
    out = tmp_path / "policies"
    assert cpg("replay", str(EXAMPLE), "-d", str(out)).returncode == 0
    shop = out / "shop"
    (shop / "kustomization.yaml").write_text(PERSONS_KUSTOMIZATION)
    (shop / "allow-probes.yaml").write_text("apiVersion: v1\nkind: ConfigMap\n")
    ran = cpg("replay", str(EXAMPLE), "-d", str(out), "--kustomize")
    assert ran.returncode == 0, ran.stderr
    text = (shop / "kustomization.yaml").read_text()
    person, _, cpgs = text.partition("  - allow-probes.yaml\n")
    assert person + "  - allow-probes.yaml\n" == PERSONS_KUSTOMIZATION.split("commonLabels")[0]
    assert cpgs == "  - cart.yaml  # cpg\n  - frontend.yaml  # cpg\ncommonLabels:\n  team: shop\n"
    # a rerun changes nothing; a cpg file removed takes its marked entry along, only that
    assert cpg("replay", str(EXAMPLE), "-d", str(out), "--kustomize").returncode == 0
    assert (shop / "kustomization.yaml").read_text() == text
    (shop / "frontend.yaml").unlink()
    again = cpg("replay", str(EXAMPLE), "-d", str(out), "-n", "payments", "--kustomize")
    assert again.returncode == 0, again.stderr
    assert (shop / "kustomization.yaml").read_text() == text.replace(
        "  - frontend.yaml  # cpg\n", ""
    )


def test_a_workload_named_kustomization_never_takes_the_folders_list(tmp_path: Path) -> None:
    """A workload labelled app=kustomization became shop/kustomization.yaml: kubectl apply -k
    read the policy as the folder's kustomization and broke."""
    from conftest import endpoint, flow_dict, jsonl

    capture = tmp_path / "k.jsonl"
    capture.write_text(
        jsonl([flow_dict(endpoint("shop", "web"), endpoint("shop", "kustomization"))])
    )
    out = tmp_path / "policies"
    ran = cpg("replay", str(capture), "-d", str(out), "--kustomize")
    assert ran.returncode == 0, ran.stderr
    assert (out / "shop" / "kustomization-cpg.yaml").is_file()
    built = subprocess.run(["kubectl", "kustomize", str(out)], capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    assert "name: cpg-kustomization" in built.stdout
    explained = cpg("explain", "shop/kustomization", "-d", str(out))
    assert explained.returncode == 0, explained.stderr


def test_kustomize_never_enters_a_linked_folder_nor_reads_without_bound(tmp_path: Path) -> None:
    """--kustomize followed a symlinked namespace folder and wrote outside -d; it read a FIFO
    (hung) and a link to /dev/zero (MemoryError)."""
    out = tmp_path / "policies"
    assert cpg("replay", str(EXAMPLE), "-d", str(out)).returncode == 0
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(out / "shop", elsewhere)
    (out / "linked").symlink_to(elsewhere, target_is_directory=True)
    ran = cpg("replay", str(EXAMPLE), "-d", str(out), "--kustomize")
    assert ran.returncode == 0, ran.stderr
    assert not (elsewhere / "kustomization.yaml").exists()
    assert "linked" not in (out / "kustomization.yaml").read_text()
    for odd in ("fifo", "zero"):
        shop = out / "shop" / "kustomization.yaml"
        shop.unlink()
        if odd == "fifo":
            os.mkfifo(shop)
        else:
            shop.symlink_to("/dev/zero")
        ran = cpg("replay", str(EXAMPLE), "-d", str(out), "--kustomize")
        assert ran.returncode == 1 and "Traceback" not in ran.stderr, ran.stderr
        said = "cannot read it" if odd == "fifo" else "a symlink; cpg does not write through it"
        assert f"{shop}: {said}" in ran.stderr


def test_a_replaced_linked_policy_keeps_its_files_mode_never_the_links(tmp_path: Path) -> None:
    """Replacing a symlinked policy file left it 0777 (the link's own mode)."""
    from conftest import endpoint, flow_dict, jsonl

    out = tmp_path / "policies"
    assert cpg("replay", str(EXAMPLE), "-d", str(out)).returncode == 0
    cart = out / "shop" / "cart.yaml"
    real = out / "shop" / ".cart-real.yaml"
    cart.rename(real)
    real.chmod(0o600)
    cart.symlink_to(real.name)
    more = tmp_path / "more.jsonl"
    more.write_text(jsonl([flow_dict(endpoint("shop", "web"), endpoint("shop", "cart"), tcp=7070)]))
    ran = cpg("replay", str(more), "-d", str(out))
    assert ran.returncode == 0, ran.stderr
    assert not cart.is_symlink() and "7070" in cart.read_text()
    assert cart.stat().st_mode & 0o7777 == 0o600


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def test_propose_never_writes_through_a_link_the_repository_holds(tmp_path: Path) -> None:
    """cpg propose wrote through symlinks the target repository held (8 files outside its
    clone) and read a linked /dev/zero."""
    outside = tmp_path / "outside"
    outside.mkdir()
    for link, target in (
        ("policies/shop", str(outside)),
        ("policies/payments/ledger.yaml", "/dev/zero"),
    ):
        bare = tmp_path / f"remote-{link.count('/')}.git"
        subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(bare)], check=True)
        seed = tmp_path / f"seed-{link.count('/')}"
        _git(tmp_path, "clone", "-q", str(bare), str(seed))
        _git(seed, "checkout", "-q", "-b", "main")
        (seed / link).parent.mkdir(parents=True, exist_ok=True)
        (seed / link).symlink_to(target)
        _git(seed, "add", "-A")
        _git(seed, "-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qm", "links")
        _git(seed, "push", "-q", "origin", "main")
        source = tmp_path / "run"
        if not source.exists():
            assert cpg("replay", str(EXAMPLE), "-d", str(source)).returncode == 0
        ran = cpg("propose", "-d", str(source), "--repo", str(bare), "--no-push")
        assert ran.returncode == 1 and "Traceback" not in ran.stderr, ran.stderr
        assert f"{link}: the repository holds a symlink there" in ran.stderr
    assert not any(outside.iterdir()), "nothing is written outside the clone"


def test_lint_refuses_a_link_out_of_its_folder_and_quotes_nothing_of_it(tmp_path: Path) -> None:
    """The CI gate's lint followed a pull request's symlink to a file outside the repository
    and quoted its values into the PR comment (report and verify refused the same link)."""
    secret = tmp_path / "secret.yaml"
    secret.write_text("apiVersion: v1\nkind: Secret\nmetadata:\n  name: hunter2-token\n")
    repo = tmp_path / "repo"
    (repo / "policies" / "shop").mkdir(parents=True)
    link = repo / "policies" / "shop" / "stolen.yaml"
    link.symlink_to(secret)
    for given in (str(repo / "policies"), str(link)):
        for fmt in ("text", "json", "sarif"):
            ran = cpg("lint", "-o", fmt, given)
            assert "hunter2" not in ran.stdout + ran.stderr, (given, fmt)
            assert "a symlink that leads out of" in ran.stdout, (given, fmt)
    assert cpg("lint", str(link)).returncode == 3


def test_a_hexadecimal_integer_is_bounded_by_value_like_a_decimal_one(tmp_path: Path) -> None:
    """Hexadecimal integers slipped past the reader's 30-digit cap (it counted 0-9 only) and
    ended lint, verify, plan, report and why in a traceback (``port: 0xfff…f``)."""
    policies = tmp_path / "policies"
    (policies / "shop").mkdir(parents=True)
    for name, number in (("hex", "0x" + "f" * 5000), ("bin", "0b" + "1" * 200)):
        (policies / "shop" / f"not-a-policy-{name}.yaml").write_text(
            "apiVersion: cilium.io/v2\nkind: CiliumNetworkPolicy\nmetadata:\n  name: cpg-x\n"
            "  namespace: shop\nspec:\n  endpointSelector: {}\n  ingress:\n  - toPorts:\n"
            f"    - ports:\n      - port: {number}\n"
        )
    for args in (
        ("lint", str(policies)),
        ("verify", str(EXAMPLE), "-d", str(policies)),
        ("plan", str(EXAMPLE), "-d", str(policies)),
        ("report", "-d", str(policies)),
        ("why", str(EXAMPLE), "-d", str(policies)),
    ):
        ran = cpg(*args)
        assert "Traceback" not in ran.stderr, args
        assert ran.returncode != 0 or args[0] == "report", args  # report names it and goes on
        said = ran.stdout + ran.stderr
        assert "number of 5000 digits (cpg reads at most 30 decimal digits' worth)" in said, args
    linted = cpg("lint", str(policies)).stdout
    assert "a base-2 number of 200 digits" in linted


def test_a_missing_capture_among_many_is_one_line(tmp_path: Path) -> None:
    """``cpg replay GOOD MISSING`` ended in a traceback where one missing file is one line."""
    missing = tmp_path / "gone.jsonl"
    out = tmp_path / "policies"
    for jobs in ("1", "2"):
        ran = cpg("replay", str(EXAMPLE), str(missing), "-d", str(out), "-j", jobs)
        assert ran.returncode == 1 and "Traceback" not in ran.stderr, ran.stderr
        assert f"cpg: error: {missing}: no such file" in ran.stderr
    assert not out.exists(), "nothing is written from part of the inputs"


def test_write_fixes_never_narrows_by_a_value_kubernetes_refuses(tmp_path: Path) -> None:
    """plan --write-fixes wrote ``NotIn`` values lint rates as invalid label values, then
    said nothing breaks. A label Kubernetes refuses is no narrowing: the rule fix instead."""
    from captures import ingress_capture

    capture = ingress_capture(tmp_path / "all.jsonl", allowed_by=True)
    capture.write_text(capture.read_text().replace("version=v2", "version=v2+exp!"))
    out = tmp_path / "policies"
    assert cpg("replay", str(capture), "-d", str(out)).returncode == 0
    planned = cpg("plan", str(capture), "-d", str(out), "--write-fixes")
    assert planned.returncode == 0, planned.stderr
    assert "added 1 rule(s)" in planned.stderr + planned.stdout
    assert "NotIn" not in (out / "shop" / "api.yaml").read_text()
    linted = cpg("lint", str(out))
    assert linted.returncode == 0, linted.stdout
    again = cpg("plan", str(capture), "-d", str(out))
    assert again.returncode == 0, again.stdout


def test_one_flow_from_2099_makes_no_rule_stale(tmp_path: Path) -> None:
    """One flow stamped 2099 made drift call every rule stale: flows after the check's time
    are set aside with a warning, and the reference is never later than now."""
    from conftest import flow_dict, jsonl

    out = tmp_path / "policies"
    assert cpg("replay", str(EXAMPLE), "-d", str(out)).returncode == 0
    capture = tmp_path / "drift.jsonl"
    lines = EXAMPLE.read_text().splitlines(keepends=True)
    future = jsonl([flow_dict(verdict="FORWARDED", reason=None, time="2099-01-01T00:00:00Z")])
    capture.write_text("".join(lines) + future)
    ran = cpg("drift", str(capture), "-d", str(out), "-o", "json")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    data = json.loads(ran.stdout)
    assert data["stale_rules"] == [] and data["reference"].startswith("2026-11-02")
    assert data["future_flows"] == 1 and data["future_newest"].startswith("2099-01-01")
    assert "1 flows stamped after this check (the newest 2099-01-01" in ran.stderr


def test_verify_and_drift_cannot_judge_a_capture_with_nothing_to_judge(tmp_path: Path) -> None:
    """A capture without traffic_direction (an older Cilium, an exporter field mask), or an
    empty one, passed verify ("passed": true) and drift (exit 0) with nothing judged."""
    out = tmp_path / "policies"
    assert cpg("replay", str(EXAMPLE), "-d", str(out)).returncode == 0
    masked = tmp_path / "masked.jsonl"
    kept = []
    for line in EXAMPLE.read_text().splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue  # the example's malformed lines on purpose
        if isinstance(record.get("flow"), dict):
            record["flow"].pop("traffic_direction", None)
        kept.append(json.dumps(record))
    masked.write_text("\n".join(kept) + "\n")
    assert "traffic_direction" not in masked.read_text()
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    for capture in (masked, empty):
        verified = cpg("verify", str(capture), "-d", str(out), "-o", "json")
        assert verified.returncode == 4, verified.stdout
        data = json.loads(verified.stdout)
        assert data["verdict"] == "cannot_judge" and data["passed"] is False
        said = cpg("verify", str(capture), "-d", str(out)).stdout
        assert "Cannot judge: no denied flow of the capture could be checked" in said
        drifted = cpg("drift", str(capture), "-d", str(out))
        assert drifted.returncode == 4 and "Cannot judge: no flow of the capture" in drifted.stdout


def test_a_run_removes_only_its_own_temp_files(tmp_path: Path) -> None:
    """Every replay removed any ``.*.tmp`` file anywhere under -d, ``.git`` included."""
    out = tmp_path / "policies"
    assert cpg("replay", str(EXAMPLE), "-d", str(out)).returncode == 0
    theirs = [
        out / ".git" / "objects" / ".pack.abcdefgh.tmp",
        out / ".git" / ".cart.yaml.abcdefgh.cpg-tmp",
        out / "shop" / ".editor-swap.tmp",
        out / "shop" / ".notes.tmp",
    ]
    ours = out / "shop" / ".cart.yaml.abcd1234.cpg-tmp"
    for path in [*theirs, ours]:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x")
    assert cpg("replay", str(EXAMPLE), "-d", str(out)).returncode == 0
    assert all(path.exists() for path in theirs) and not ours.exists()


def test_a_session_on_a_folder_it_cannot_write_stops_at_its_start() -> None:
    """No start-up check that the output folder is writable: a read-only volume was found
    at the first flush. It is said before the relay is even asked."""
    ran = cpg("generate", "--server", "127.0.0.1:1", "-d", "/proc/1", "--no-evidence")
    assert ran.returncode == 1 and "Traceback" not in ran.stderr, ran.stderr
    assert "/proc/1: cpg cannot write policies there" in ran.stderr
    assert "Hubble Relay" not in ran.stderr  # the relay was never asked


def test_explain_and_the_relays_tls_files_are_read_bounded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``cpg explain FILE.yaml`` and the TLS files (``--tls-ca-cert /dev/zero``, also from
    ``HUBBLE_TLS_*`` in the Deployment's settings) were read without bound."""
    zero = tmp_path / "zero.yaml"
    zero.symlink_to("/dev/zero")
    explained = cpg("explain", str(zero))
    assert explained.returncode == 1 and "not a regular file" in explained.stderr
    flag = cpg(
        "generate",
        "--server",
        "127.0.0.1:1",
        "--tls-ca-cert",
        "/dev/zero",
        "-d",
        str(tmp_path / "a"),
    )
    assert flag.returncode == 1, flag.stderr
    assert "cannot read the CA certificate: /dev/zero: not a regular file" in flag.stderr
    monkeypatch.setenv("HUBBLE_TLS_CA_CERT_FILES", "/dev/zero")
    env = cpg("generate", "--server", "127.0.0.1:1", "-d", str(tmp_path / "b"))
    assert env.returncode == 1 and "/dev/zero: not a regular file" in env.stderr, env.stderr
