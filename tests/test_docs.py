"""The manual: README is a front page, docs/ is a site that builds with no broken link, and
the generated pages (the command reference, the exit codes) are the commands' own words."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import ROOT

sys.path.insert(0, str(ROOT / "scripts"))
import docs_reference

TASKS = (
    "no-policies-yet.md",
    "review-a-pull-request.md",
    "why-was-this-denied.md",
    "ci-gate.md",
    "in-the-cluster.md",
    "what-the-cluster-declares.md",
    "at-scale.md",
    "agents.md",
)


def test_the_readme_is_a_front_page_that_links_every_task() -> None:
    text = (ROOT / "README.md").read_text()
    assert text.count("\n") <= 300  # it was 1,121 lines: a reference in prose
    for heading in ("## Install", "## Quick start", "## Your first ten minutes"):
        assert heading in text
    assert "make example" in text and "make test" in text
    linked = set(re.findall(r"\]\(docs/([^)#]+)\)", text))
    assert set(TASKS) <= linked
    for page in linked:
        assert (ROOT / "docs" / page).is_file(), page


def test_the_site_builds_strictly_with_a_page_per_task(tmp_path: Path) -> None:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    assert config["strict"] is True
    in_nav = re.findall(r"([\w./-]+\.md)", yaml.safe_dump(config["nav"]))
    assert set(TASKS) | {"reference/commands.md", "exit-codes.md"} <= set(in_nav)
    built = subprocess.run(
        [
            str(Path(sys.executable).with_name("mkdocs")),
            "build",
            "--strict",
            "--site-dir",
            str(tmp_path / "site"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert built.returncode == 0, built.stderr
    assert (tmp_path / "site" / "reference" / "commands" / "index.html").is_file()


def test_the_reference_and_the_exit_codes_are_the_commands_own() -> None:
    """Fails when a flag, a command or an exit code changes and the pages were not made
    again (python scripts/docs_reference.py)."""
    reference = docs_reference.command_reference()
    assert docs_reference.REFERENCE.read_text() == reference
    assert docs_reference.EXIT_CODES.read_text() == docs_reference.exit_codes()
    for command in docs_reference.commands():
        assert f"\n## cpg {command}\n" in reference
    report = reference.split("\n## cpg report\n", 1)[1].split("\n## cpg ", 1)[0]
    assert "--max-size" in report and "--full-report" in report
    table = reference.split("\n## cpg replay\n", 1)[1].split("\n## cpg ", 1)[0]
    assert "| `-n` `--namespace` |" in table  # the option table's row, with its MCP argument


@pytest.mark.parametrize("drifted", ["a flag", "an exit code"])
def test_the_check_fails_when_a_page_drifts(
    drifted: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    page = tmp_path / "page.md"
    made = (
        docs_reference.command_reference() if drifted == "a flag" else docs_reference.exit_codes()
    )
    page.write_text(made.replace("--max-size", "--max-bytes").replace("`4`", "`5`"))
    target = "REFERENCE" if drifted == "a flag" else "EXIT_CODES"
    monkeypatch.setattr(docs_reference, target, page)
    assert docs_reference.main(["--check"]) == 1
    page.write_text(made)
    assert docs_reference.main(["--check"]) == 0


def test_the_catalogue_page_lists_every_built_in_entry() -> None:
    """docs/catalogue.md is what cpg recognises: a new entry without its row fails."""
    from cpg_core.declarations import BUILTIN_CATALOGUE

    text = (ROOT / "docs" / "catalogue.md").read_text()
    missing = [
        entry.text()
        for entry in BUILTIN_CATALOGUE.entries
        if f"| {entry.name} | `{entry.text()}` | {entry.treatment} | {entry.why} |" not in text
    ]
    assert missing == []
