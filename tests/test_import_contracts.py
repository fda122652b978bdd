"""The import contracts of pyproject.toml (``make lint`` runs them) hold on the tree, and
each one breaks on a planted violation: a contract that cannot fail checks nothing."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")

FRONT, CORE, USE_CASES = "front ends", "the core's layers", "the review use cases"
PURE, IO = "the core imports nothing", "io holds no front end"
PLANTED = {
    "io-imports-a-front-end": ("cpg_io/errors.py", "import cpg_mcp.words", FRONT),
    "the-front-ends-meet": ("cpg_cli/words.py", "import cpg_mcp.words", FRONT),
    "the-core-imports-io": ("cpg_core/reports.py", "import cpg_io.errors", FRONT),
    "base-imports-policy": ("cpg_core/_base/names.py", "import cpg_core._policy.model", CORE),
    "policy-imports-review": (
        "cpg_core/_policy/port_text.py",
        "import cpg_core._review.lint_versions",
        CORE,
    ),
    "drift-imports-plan": ("cpg_core/_review/drift.py", "import cpg_core._review.plan", USE_CASES),
    "the-core-reads-the-environment": ("cpg_core/_base/names.py", "import os", PURE),
    "the-core-uses-grpc": ("cpg_core/_policy/model.py", "import grpc", PURE),
    "io-imports-typer": ("cpg_io/errors.py", "import typer", IO),
}
"""A violation per contract (and per kind of edge it forbids): the file it goes in, the
import, the contract it breaks."""


def _lint_imports(tree: Path) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "PYTHONPATH": str(tree / "src")}
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--config", str(tree / "pyproject.toml")],
        capture_output=True,
        text=True,
        cwd=tree,
        env=environment,
        check=False,
    )


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not LINT_IMPORTS.is_file():
        pytest.skip("import-linter is not installed (make install)")
    copy = tmp_path_factory.mktemp("tree")
    shutil.copytree(ROOT / "src", copy / "src", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", copy / "pyproject.toml")
    return copy


def test_the_contracts_hold_on_the_tree(tree: Path) -> None:
    ran = _lint_imports(tree)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "5 kept, 0 broken" in ran.stdout


@pytest.mark.parametrize("planted", sorted(PLANTED))
def test_each_contract_breaks_on_a_planted_violation(tree: Path, planted: str) -> None:
    relative, statement, contract = PLANTED[planted]
    module = tree / "src" / relative
    kept = module.read_text()
    module.write_text(kept + f"\n{statement}  # planted\n")
    try:
        ran = _lint_imports(tree)
    finally:
        module.write_text(kept)
    assert ran.returncode == 1, ran.stdout
    assert "4 kept, 1 broken" in ran.stdout
    broken = [line for line in ran.stdout.splitlines() if line.endswith("BROKEN")]
    assert len(broken) == 1 and broken[0].startswith(contract), ran.stdout
