"""The installed cpg version (recorded in evidence sessions and printed by --version)."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version


def cpg_version() -> str:
    try:
        return version("cpg")
    except PackageNotFoundError:  # running from a source tree
        return "0+unknown"
