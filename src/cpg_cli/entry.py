"""The ``cpg`` entry point, kept tiny: a Ctrl+C while the command's modules are still being
imported (the first fraction of a second) ends quietly with exit 130, as at any later moment."""

from __future__ import annotations

import sys


def main() -> None:
    try:
        from cpg_cli.app import main as run

        run()
    except KeyboardInterrupt:
        sys.stderr.write("cpg: interrupted\n")
        raise SystemExit(130) from None
