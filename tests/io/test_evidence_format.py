"""Upgrades and rollbacks: an evidence folder carries its format (``.cpg-format``); a folder
cpg 0.2 wrote is read and marked at the first write, a newer one is refused before anything
is read or written, and what this cpg writes still reads with cpg 0.2."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import EXAMPLE, ROOT, cpg
from cpg_io.evidence_store import EVIDENCE_FORMAT, FORMAT_FILE

FIXTURE = ROOT / "tests" / "fixtures" / "evidence-0.2.0"
"""``cpg replay examples/drops.jsonl -d policies`` by cpg 0.2.0 (commit 6ab6d10), its evidence
in ``.cpg-evidence`` beside the policies (so the folder's key is relative: it moves)."""
RELEASE_0_2_0 = "6ab6d10"


def _documents(folder: Path) -> dict[str, bytes]:
    """Every evidence document (the format mark is not ``*.json``: globs never meet it)."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*.json"))}


def _copy(tmp_path: Path) -> Path:
    shutil.copytree(FIXTURE, tmp_path / "repo")
    return tmp_path / "repo"


def test_a_folder_cpg_0_2_wrote_is_read_and_marked_at_the_first_write(tmp_path: Path) -> None:
    repo = _copy(tmp_path)
    evidence = repo / ".cpg-evidence" / "policies"
    assert not (evidence / FORMAT_FILE).exists()
    explained = cpg("explain", "shop/cart", "-d", str(repo / "policies"))
    assert explained.returncode == 0, explained.stderr
    assert "cart" in explained.stdout
    assert not (evidence / FORMAT_FILE).exists(), "reading marks nothing"
    ran = cpg("replay", str(EXAMPLE), "-d", str(repo / "policies"))
    assert ran.returncode == 0, ran.stderr
    mark = json.loads((evidence / FORMAT_FILE).read_text())
    assert mark["format"] == EVIDENCE_FORMAT and mark["written_by"].startswith("cpg ")
    # the same capture again: its counts replaced, not added, across the upgrade
    assert "recorded before" in ran.stdout + ran.stderr


def test_a_folder_a_newer_cpg_wrote_is_refused_before_anything_changes(tmp_path: Path) -> None:
    repo = _copy(tmp_path)
    evidence = repo / ".cpg-evidence" / "policies"
    (evidence / FORMAT_FILE).write_text(
        json.dumps({"format": EVIDENCE_FORMAT + 1, "written_by": "cpg 9.0.0"})
    )
    before = _documents(repo)
    for args in (
        ("replay", str(EXAMPLE), "-d", str(repo / "policies")),
        ("generate", "--server", "127.0.0.1:9", "-d", str(repo / "policies")),
        ("explain", "shop/cart", "-d", str(repo / "policies")),
    ):
        ran = cpg(*args)
        assert ran.returncode == 1, (args, ran.stdout, ran.stderr)
        message = ran.stderr
        assert "written by cpg 9.0.0" in message and f"format {EVIDENCE_FORMAT + 1}" in message
        assert "Upgrade cpg" in message and "--evidence-dir" in message
        assert "connection refused" not in message  # refused before the relay is dialled
    assert _documents(repo) == before


def test_a_broken_format_mark_is_named_with_the_fix(tmp_path: Path) -> None:
    repo = _copy(tmp_path)
    (repo / ".cpg-evidence" / "policies" / FORMAT_FILE).write_text('{"format": "one"}')
    ran = cpg("replay", str(EXAMPLE), "-d", str(repo / "policies"))
    assert ran.returncode == 1
    assert ".cpg-format: not an evidence format mark" in ran.stderr


_MAPS = (".classes", ".by_session", ".by_session.*")
"""Fields whose keys are data (class names, session ids), not fields."""


def _keys(value: Any, at: str = "") -> set[str]:
    if isinstance(value, dict):
        keys = {k: "*" if at.endswith(_MAPS) else k for k in value}
        return {at} | {k for key, item in value.items() for k in _keys(item, f"{at}.{keys[key]}")}
    if isinstance(value, list):
        return {k for item in value for k in _keys(item, f"{at}[]")}
    return {at}


def test_what_this_cpg_writes_holds_only_what_cpg_0_2_reads(tmp_path: Path) -> None:
    """A rollback reads the folder back: every field of every document this cpg writes is
    one cpg 0.2.0 wrote (and reads) too."""
    repo = _copy(tmp_path)
    old = set().union(
        *(_keys(json.loads(text)) for text in _documents(repo / ".cpg-evidence").values())
    )
    ran = cpg("replay", str(EXAMPLE), "-d", str(repo / "policies"), "--evidence-samples", "3")
    assert ran.returncode == 0, ran.stderr
    new = set().union(
        *(_keys(json.loads(text)) for text in _documents(repo / ".cpg-evidence").values())
    )
    assert new <= old, sorted(new - old)


def _release_0_2_0(tmp_path: Path) -> Path:
    """cpg 0.2.0's sources from this repository's history (skipped without it)."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", RELEASE_0_2_0, "src"],
        capture_output=True,
        timeout=60,
    )
    if archive.returncode != 0:
        pytest.skip(f"this clone has no commit {RELEASE_0_2_0} (a shallow clone)")
    (tmp_path / "old").mkdir()
    subprocess.run(["tar", "-x", "-C", str(tmp_path / "old")], input=archive.stdout, check=True)
    return tmp_path / "old" / "src"


def test_a_rollback_to_cpg_0_2_reads_and_writes_the_folder(tmp_path: Path) -> None:
    """Upgrade (this cpg writes into cpg 0.2.0's folder), then roll back: cpg 0.2.0 explains
    and replays into it as before."""
    old_src = _release_0_2_0(tmp_path)
    repo = _copy(tmp_path)
    assert cpg("replay", str(EXAMPLE), "-d", str(repo / "policies")).returncode == 0
    assert (repo / ".cpg-evidence" / "policies" / FORMAT_FILE).exists()

    def old_cpg(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [
                sys.executable,
                "-c",
                "import sys; from cpg_cli.entry import main; sys.argv[0] = 'cpg'; sys.exit(main())",
                *args,
            ],
            capture_output=True,
            text=True,
            timeout=300,
            env={"PYTHONPATH": str(old_src), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
            cwd=repo,
        )

    version = old_cpg("version")
    assert version.returncode == 0 and version.stdout.split()[:2] == ["cpg", "0.2.0"]
    explained = old_cpg("explain", "shop/cart", "-d", "policies")
    assert explained.returncode == 0, explained.stderr
    replayed = old_cpg("replay", str(EXAMPLE), "-d", "policies")
    assert replayed.returncode == 0, replayed.stderr
