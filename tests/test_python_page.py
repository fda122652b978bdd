"""docs/python.md ("Use cpg from Python") is run, block by block, as a reader would paste it:
the page stays true as the library changes."""

from __future__ import annotations

import contextlib
import io
import os
import re
from pathlib import Path

from cpg_core import VerifyReport

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs/python.md"


def blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", PAGE.read_text(), re.S)


def test_every_example_of_the_python_page_runs() -> None:
    found = blocks()
    assert len(found) >= 4
    namespace: dict[str, object] = {}
    printed = io.StringIO()
    here = Path.cwd()
    os.chdir(ROOT)  # the page reads examples/ as a reader in a checkout does
    try:
        with contextlib.redirect_stdout(printed):
            for block in found:
                exec(compile(block, str(PAGE), "exec"), namespace)
    finally:
        os.chdir(here)
    out = printed.getvalue()
    assert "shop/cart" in out and "kind: CiliumNetworkPolicy" in out
    assert '"schema_version"' in out
    report = namespace["report"]
    assert isinstance(report, VerifyReport) and report.verdict == "passed", out
