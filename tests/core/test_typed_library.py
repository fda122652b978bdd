"""cpg_core is a typed library (PEP 561): a user's ``mypy --strict`` sees its real types
through the lazy top-level face, and so catches a wrong use."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _mypy(script: Path, cache: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(cache), str(script)],
        capture_output=True,
        text=True,
        cwd=script.parent,
        check=False,
    )


def test_the_package_says_it_is_typed() -> None:
    assert (ROOT / "src/cpg_core/py.typed").is_file()


def test_a_users_strict_mypy_sees_cpg_cores_types(tmp_path: Path) -> None:
    pytest.importorskip("mypy")
    good = tmp_path / "use.py"
    good.write_text(
        "import cpg_core\n\nresult = cpg_core.generate([])\nreveal_type(result)\n"
        "names: list[str] = sorted(result.policies)\n"
    )
    bad = tmp_path / "misuse.py"
    bad.write_text("import cpg_core\n\ncount: int = cpg_core.generate([])\n")
    ran = _mypy(good, tmp_path / "cache")
    assert ran.returncode == 0, ran.stdout
    assert 'Revealed type is "cpg_core.' in ran.stdout
    wrong = _mypy(bad, tmp_path / "cache")
    assert wrong.returncode == 1 and "Incompatible types in assignment" in wrong.stdout
