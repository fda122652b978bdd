"""Plans narrow before they widen (ARCHITECTURE §D23, §D48): a proposal that would newly
select pods it was not made for (the synthetic cluster's ``version: canary`` pods, which the
toolbox reaches on TCP/22 today) is fixed first by narrowing the selectors of every policy
that would select them, so they stay as they are today; the allow rule is the alternative."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
import yaml

from conftest import ROOT, cpg, endpoint, flow_dict, jsonl

sys.path.insert(0, str(ROOT / "benchmarks"))
from synthetic import canaries, synthetic_capture


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("canaries")
    capture = synthetic_capture(root / "c.jsonl", 45)
    out = root / "policies"
    assert cpg("replay", str(capture), "-d", str(out), "--no-evidence").returncode == 0
    return capture, out


def test_the_first_fix_narrows_every_selecting_policy(cluster: tuple[Path, Path]) -> None:
    capture, out = cluster
    planned = cpg("plan", str(capture), "-d", str(out), "-o", "json")
    assert planned.returncode == 3
    items = json.loads(planned.stdout)["would_break"]
    broken = {item["traffic"]["destination"] for item in items}
    assert broken == {f"{ns}/{w}" for ns, ws in canaries(45).items() for w in ws}
    for item in items:
        assert item["fix"].startswith("narrow "), item["fix"]
        assert item["narrow_label"] == ["version", "canary"]
        assert item["policy"] and item["policy"] in item["narrow_policies"]
        assert "add version NotIn (canary)" in item["fix"] and "; or add a rule to" in item["fix"]
        assert "rule_yaml" not in item["fix"] and "add to :" not in item["fix"]
        # the YAML names each policy, and each selector leaves the canary out
        names = [line[2:] for line in item["narrow_yaml"].splitlines() if line.startswith("# ")]
        assert {name.split(" specs[")[0] for name in names} == set(item["narrow_policies"])
        assert item["narrow_yaml"].count("operator: NotIn") == len(names)
        assert item["rule_yaml"].startswith("ingress:")
    text = cpg("plan", str(capture), "-d", str(out)).stdout
    assert "(rule_yaml)" not in text and "add to :" not in text
    assert "narrow app-01/cpg-api" in text


def test_applied_the_narrowing_breaks_nothing_and_opens_nothing(
    cluster: tuple[Path, Path], tmp_path: Path
) -> None:
    capture, proposed = cluster
    out = tmp_path / "policies"
    shutil.copytree(proposed, out)
    fixed = cpg("plan", str(capture), "-d", str(out), "--write-fixes", "-o", "json")
    assert "narrowed" in fixed.stderr and "added 0 rule(s)" in fixed.stderr, fixed.stderr
    assert json.loads(fixed.stdout)["would_break"] == []
    assert cpg("plan", str(capture), "-d", str(out)).returncode == 0
    verified = cpg("verify", str(capture), "-d", str(out), "-o", "json")
    assert verified.returncode == 0 and json.loads(verified.stdout)["passed"]
    # no new opening: every document is the one proposed but for its selectors
    for path in proposed.rglob("*.yaml"):
        before = list(yaml.safe_load_all(path.read_text()))
        after = list(yaml.safe_load_all((out / path.relative_to(proposed)).read_text()))
        for old, new in zip(before, after, strict=True):
            for spec_old, spec_new in zip(_specs(old), _specs(new), strict=True):
                assert {k: v for k, v in spec_old.items() if k != "endpointSelector"} == {
                    k: v for k, v in spec_new.items() if k != "endpointSelector"
                }, path
                left_out = spec_new["endpointSelector"].get("matchExpressions", [])
                added = [
                    e
                    for e in left_out
                    if e not in spec_old["endpointSelector"].get("matchExpressions", [])
                ]
                assert all(e["operator"] == "NotIn" for e in added), path
    # the canary stays unpoliced at its ingress, as today
    assert (
        cpg(
            "trace",
            "-d",
            str(out),
            "--from",
            "ops/toolbox",
            "--to",
            "app-01:app=api,version=canary",
            "--port",
            "22",
        ).returncode
        == 0
    )
    # a rerun keeps the narrowing: the files are still cpg's
    again = cpg("replay", str(capture), "-d", str(out), "--no-evidence")
    assert again.returncode == 0 and " 0 updated" in again.stdout, again.stdout


def _specs(doc: dict) -> list[dict]:  # type: ignore[type-arg]
    return [doc["spec"]] if "spec" in doc else list(doc["specs"])


def test_a_pod_only_a_shared_policy_selects_gets_a_fix_with_a_policy_name(tmp_path: Path) -> None:
    """The pods of ten workloads drop their DNS: one shared policy selects them; a new pod of
    one of them (another label) would break, and the rule fix names the policy it goes in."""
    dns = endpoint("kube-system", "kube-dns")
    records = []
    for i in range(10):
        pod = endpoint("shop", f"s{i}")
        records.append(flow_dict(src=pod, dst=dns, direction="EGRESS", udp=53))
    odd = endpoint("shop", "s0", "k8s:track=beta", pod_name="s0-beta")
    records.append(
        flow_dict(
            src=odd,
            dst=endpoint("shop", "db"),
            direction="EGRESS",
            tcp=5432,
            verdict="FORWARDED",
            reason=None,
        )
    )
    capture = tmp_path / "c.jsonl"
    capture.write_text(jsonl(records))
    out = tmp_path / "p"
    assert cpg("replay", str(capture), "-d", str(out), "--no-evidence").returncode == 0
    assert list((out / "_shared").glob("*.yaml")) and not (out / "shop").exists()
    planned = json.loads(cpg("plan", str(capture), "-d", str(out), "-o", "json").stdout)
    (item,) = planned["would_break"]
    assert item["policy"] == "shop/cpg-s0", item
    assert "a new policy of shop/s0's own" in item["fix"]
    assert item["narrow_label"] == ["track", "beta"]
