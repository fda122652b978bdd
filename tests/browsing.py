"""Where the browser and mermaid the report tests use are, and how a test that needs one
reacts when it is missing (a skip on a developer's machine, a failure in CI)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
MERMAID = Path(
    os.environ.get(
        "CPG_TEST_MERMAID",
        Path.home()
        / ".cache"
        / "cpg-test"
        / "node_modules"
        / "mermaid"
        / "dist"
        / "mermaid.min.js",
    )
)
NO_BROWSER = (
    "headless Chromium is not installed (apt-get install chromium chromium-driver; .ci/run does)"
)
REQUIRED = os.environ.get("CPG_REQUIRE_BROWSER") == "1"  # set by .ci/run: never skip there


def missing(reason: str) -> None:
    if REQUIRED:
        pytest.fail(reason)
    pytest.skip(reason)
