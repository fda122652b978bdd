"""The README's "Use as a library" snippet, run verbatim, gives what ``cpg replay`` writes."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
from pathlib import Path

import yaml

from conftest import ROOT
from cpg_core import ClusterHealth, PolicyEvidence, from_data, to_json


def _snippet() -> str:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Use as a library", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match, "README has no python snippet under 'Use as a library'"
    return match.group(1)


def test_the_snippet_has_at_most_five_statements() -> None:
    import ast

    assert len(ast.parse(_snippet()).body) <= 5


def test_the_readme_snippet_runs_on_the_example(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from cpg_cli.app import app

    scope: dict[str, object] = {}
    printed = io.StringIO()
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        with contextlib.redirect_stdout(printed):
            exec(compile(_snippet(), "README.md", "exec"), scope)
    finally:
        os.chdir(cwd)
    policies, evidence, health = scope["policies"], scope["evidence"], scope["health"]
    assert isinstance(policies, dict) and isinstance(evidence, dict)
    assert isinstance(health, ClusterHealth)
    assert all(isinstance(doc, PolicyEvidence) for doc in evidence.values())
    assert "name: cpg-cart" in printed.getvalue()

    # The same policies as cpg replay writes into a fresh folder, key for key, byte for byte.
    out = tmp_path / "policies"
    ran = CliRunner().invoke(
        app, ["replay", str(ROOT / "examples" / "drops.jsonl"), "-d", str(out), "--no-evidence"]
    )
    assert ran.exit_code == 0, ran.output
    written = {str(p.relative_to(out).with_suffix("")): p.read_text() for p in out.rglob("*.yaml")}
    assert policies == written
    # Evidence: one document per policy, every rule accounted for; JSON round-trips.
    assert set(evidence) == set(policies)
    for key, doc in evidence.items():
        assert isinstance(doc, PolicyEvidence)
        assert doc.rules and doc.policy.name == yaml.safe_load(policies[key])["metadata"]["name"]
        assert from_data(json.loads(to_json(doc)), PolicyEvidence) == doc
    assert health.session.flows_seen == 64 and health.lost_events == 3
