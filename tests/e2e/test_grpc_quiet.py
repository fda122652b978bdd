"""A relay that goes away mid-session: stderr has cpg's own lines about it, not gRPC's C-core
logging (its INFO line for the relay's GOAWAY went to the same stderr as cpg's log)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from conftest import CPG
from fake_relay import example_responses, fake_relay

ABSL_LINE = re.compile(r"^[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ \S+:\d+\]", re.M)


_BRIEF = ("--duration", "3s", "--timeout", "1s")


def _stderr_across_a_relay_stop(folder: Path, env: dict[str, str]) -> str:
    """cpg generate's stderr when the relay it follows stops (a GOAWAY, then refused)."""
    with fake_relay(example_responses()) as (relay, address):
        proc = subprocess.Popen(
            [CPG, "generate", "--server", address, "-d", str(folder), *_BRIEF],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert relay.done.wait(30), "cpg never read the relay's flows"
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode in (0, 1), stderr
    return stderr


def test_a_relay_restart_logs_only_cpgs_own_lines(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRPC_")}
    env["NO_COLOR"] = "1"
    stderr = _stderr_across_a_relay_stop(tmp_path / "p", env)
    assert "stream lost" in stderr, stderr  # cpg says what happened, in its own words
    assert not ABSL_LINE.search(stderr), stderr
    # and the check sees gRPC's lines when they are asked for
    loud = _stderr_across_a_relay_stop(tmp_path / "q", {**env, "GRPC_VERBOSITY": "INFO"})
    assert ABSL_LINE.search(loud), loud
