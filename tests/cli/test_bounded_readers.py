"""One bounded reader for what cpg reads from outside (issue 55): a hostile file costs one
finding or one error line naming it, the line and the limit, never a traceback, a stall or
the findings of the other files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from conftest import EXAMPLE, cpg

GOOD = """\
apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata: {name: x, namespace: shop}
spec:
  endpointSelector: {}
  ingress:
  - fromEndpoints: [{matchLabels: {app: web}}]
"""

HOSTILE = {
    "flow-nesting": ("[" * 100_000 + "]" * 100_000, "maximum nesting depth"),
    "block-nesting": ("".join("  " * i + "- a:\n" for i in range(3000)), "deeper than 64"),
    "huge-port": (
        GOOD.replace(
            "[{matchLabels: {app: web}}]",
            "[{}]\n    toPorts: [{ports: [{port: " + "9" * 5000 + "}]}]",
        ),
        "a number of 5000 digits",
    ),
    "python-tag": ("a: !!python/object:os.system ls\n", "is not plain YAML"),
    "unknown-tag": ("a: !foo bar\n", "'!foo' is not plain YAML"),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_lint_names_a_hostile_file_and_lints_the_others(tmp_path: Path, name: str) -> None:
    text, words = HOSTILE[name]
    bad = tmp_path / f"not-a-policy-{name}.yaml"
    bad.write_text(text)
    good = tmp_path / "good.yaml"
    good.write_text(GOOD)
    ran = cpg("lint", "-o", "json", "--", str(bad), str(good))
    assert ran.returncode == 3, ran.stderr
    import json

    findings = json.loads(ran.stdout)["findings"]
    (read,) = [f for f in findings if f["file"] == str(bad)]
    assert read["code"] == "CPG001" and words in read["message"], read
    assert any(f["file"] == str(good) and f["code"] == "CPG004" for f in findings), findings


def test_lint_goes_on_past_a_file_it_cannot_read(tmp_path: Path) -> None:
    (tmp_path / "not-a-policy-binary.yaml").write_bytes(b"\xff\xfe\x00")
    (tmp_path / "good.yaml").write_text(GOOD)
    ran = cpg("lint", str(tmp_path))
    assert ran.returncode == 3
    assert "not-a-policy-binary.yaml: CPG001 yaml (error) cannot read it" in ran.stdout
    assert "good.yaml:5: CPG004" in ran.stdout and "2 file(s)" in ran.stdout


def test_deep_json_is_one_line_in_replay_report_and_identities(tmp_path: Path) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000 + "\n")
    replayed = cpg("replay", str(deep), "-d", str(tmp_path / "p"))
    assert replayed.returncode == 1 and "not a single Hubble flow record" in replayed.stderr
    out = tmp_path / "policies"
    assert cpg("replay", str(EXAMPLE), "-d", str(out), "--no-evidence").returncode == 0
    reported = cpg("report", "-d", str(out), "--plan", str(deep))
    assert reported.returncode == 1 and "depth limit exceeded" in reported.stderr
    nested = tmp_path / "identities.json"
    nested.write_text('{"a":' * 100_000 + "1" + "}" * 100_000)
    planned = cpg("plan", str(EXAMPLE), "-d", str(out), "--identities", str(nested))
    assert planned.returncode == 1, planned.stderr
    assert "--identities" in planned.stderr and "depth limit exceeded" in planned.stderr
    zero = tmp_path / "zero.json"
    os.symlink("/dev/zero", zero)
    refused = cpg("plan", str(EXAMPLE), "-d", str(out), "--identities", str(zero))
    assert "not a regular file" in refused.stderr and refused.returncode != 0
    for ran in (replayed, reported, planned, refused):
        assert "Traceback" not in ran.stderr
