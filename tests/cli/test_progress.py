"""Progress on a terminal (issue 13): drawn on a pseudo-terminal, absent when piped or quiet."""

from __future__ import annotations

import json
import re
import signal
import subprocess
from pathlib import Path

import pytest

from conftest import cpg_process, endpoint, flow_dict, on_terminal
from fake_relay import example_responses, fake_relay


@pytest.fixture(scope="module")
def large_capture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """About 20 MB: several 4 MiB blocks, read by worker processes (-j 2), with one
    malformed line early on."""
    path = tmp_path_factory.mktemp("large") / "drops.jsonl"
    with path.open("w") as out:
        out.write("this is not a flow\n")
        for n in range(45_000):
            record = flow_dict(
                endpoint("shop", f"client-{n % 40}"),
                endpoint(f"ns-{n % 7}", f"api-{n % 25}"),
                tcp=8000 + n % 3,
                time=f"2026-11-02T10:{n // 1000 % 60:02d}:{n % 60:02d}.{n:09d}Z",
            )
            out.write(json.dumps(record) + "\n")
    assert path.stat().st_size > 16 * 1024 * 1024
    return path


def test_replay_draws_progress_on_a_terminal(large_capture: Path, tmp_path: Path) -> None:
    code, stdout, terminal = on_terminal(
        "replay", str(large_capture), "-d", str(tmp_path / "p"), "-j", "2"
    )
    assert code == 0, terminal
    assert f"cpg: reading {large_capture}" in terminal
    assert "%" in terminal and "flows/s" in terminal and "ETA" in terminal
    # The malformed line is told while reading, before the writing stage is drawn.
    warning = terminal.index(":1: skipped malformed line")
    assert warning < terminal.index("cpg: writing ")
    assert "Read 45001 lines" in stdout  # the report itself is not on the terminal
    # it counts workloads whose policies it writes, not files (a shared rule has none)
    assert "cpg: writing the policies of 175 workloads" in terminal


def test_no_progress_when_piped_or_quiet(large_capture: Path, tmp_path: Path) -> None:
    piped = cpg_process("replay", str(large_capture), "-d", str(tmp_path / "p"), "-j", "2")
    assert piped.returncode == 0
    assert "flows/s" not in piped.stderr and "cpg: reading" not in piped.stderr
    assert ":1: skipped malformed line" in piped.stderr  # warnings still come

    code, _, terminal = on_terminal(
        "replay", str(large_capture), "-d", str(tmp_path / "q"), "--quiet"
    )
    assert code == 0
    assert "flows/s" not in terminal and "cpg: reading" not in terminal
    assert ":1: skipped malformed line" in terminal


def test_generate_says_it_is_flushing_after_ctrl_c(tmp_path: Path) -> None:
    def interrupt(process: subprocess.Popen[bytes]) -> None:
        process.send_signal(signal.SIGINT)

    with fake_relay(example_responses()) as (_, address):
        code, stdout, terminal = on_terminal(
            "generate",
            "--server",
            address,
            "-d",
            str(tmp_path / "p"),
            "--flush-interval",
            "1h",
            until=re.compile(rb"[1-9][\d,]* candidates,"),  # flows are streaming
            then=interrupt,
        )
    assert code == 0, terminal
    assert "flows (" in terminal and "policies written" in terminal
    flushing = terminal.index("cpg: flushing ")
    assert "policies… (Ctrl+C again to abort)" in terminal[flushing:]
    assert "Received" in stdout


def test_the_review_progress_line_follows_the_run() -> None:
    """why, verify and plan draw one line after a second: the lines read, then the kinds of
    flow judged (what the run counts in its tally)."""
    import time

    from cpg_cli.progress import SHOWN_AFTER, ReviewProgress
    from cpg_core import ReadStats

    progress = ReviewProgress("judging", show=False)
    assert progress.line().plain == ""  # a quick answer draws nothing
    progress._began = time.monotonic() - SHOWN_AFTER - 2
    progress.tally.stats = ReadStats(lines_read=12_345)
    assert re.fullmatch(r"cpg: reading the capture: 12,345 lines \(\d+ s\)", progress.line().plain)
    progress.tally.phase, progress.tally.total, progress.tally.done = "judging", 640, 17
    assert progress.line().plain.startswith("cpg: judging: 17 of 640 kinds of flow (")
    progress.tally.total = 0
    assert progress.line().plain.startswith("cpg: judging… (")


def test_why_counts_what_it_reads_and_answers(tmp_path: Path) -> None:
    from cpg_core import CheckRequest
    from cpg_core.why import FlowFilter
    from cpg_io.progress import ReviewTally
    from cpg_io.runs import why_run

    capture = tmp_path / "c.jsonl"
    flows = [flow_dict(endpoint("shop", "web"), endpoint("shop", "api"), tcp=p) for p in range(7)]
    capture.write_text("\n".join(json.dumps(f) for f in flows * 2) + "\n")
    (tmp_path / "policies").mkdir()
    tally = ReviewTally()
    request = CheckRequest.build(inputs=[str(capture)], policies=str(tmp_path / "policies"))
    answered = why_run(request, FlowFilter(), tally=tally)
    assert tally.phase == "judging" and tally.stats is not None
    assert tally.stats.lines_read == 14 and tally.total == tally.done == 7
    assert len(answered.view.answers) == 7
