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


def test_a_relay_restart_logs_only_cpgs_own_lines(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRPC_")}
    env["NO_COLOR"] = "1"
    with fake_relay(example_responses()) as (relay, address):
        proc = subprocess.Popen(
            [
                CPG,
                "generate",
                "--server",
                address,
                "-d",
                str(tmp_path / "p"),
                "--duration",
                "3s",
                "--timeout",
                "1s",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert relay.done.wait(30), "cpg never read the relay's flows"
    # leaving the block stops the server: a GOAWAY to cpg, then connection refused
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode in (0, 1), stderr
    assert "stream lost" in stderr, stderr  # cpg says what happened, in its own words
    assert not ABSL_LINE.search(stderr), stderr
    # and the check sees gRPC's lines when they are asked for
    env["GRPC_VERBOSITY"] = "INFO"
    with fake_relay(example_responses()) as (relay, address):
        proc = subprocess.Popen(
            [
                CPG,
                "generate",
                "--server",
                address,
                "-d",
                str(tmp_path / "q"),
                "--duration",
                "3s",
                "--timeout",
                "1s",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert relay.done.wait(30)
    _, stderr = proc.communicate(timeout=60)
    assert ABSL_LINE.search(stderr), stderr
