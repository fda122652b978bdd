"""Replaying a capture again never invents confidence: the evidence of three replays of one
file is the evidence of one, a grown file counts each flow once, a new capture adds."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from conftest import EXAMPLE
from cpg_core import RunRequest
from cpg_core.reports import run_text
from cpg_io import runs
from cpg_io.engines import Forked, InProcess

TIMES = re.compile(r'"(started_at|ended_at|started|ended)": "[^"]*"')


def replay(tmp_path: Path, capture: Path, *, jobs: int = 1) -> runs.RunResult:
    engine = Forked(jobs) if jobs > 1 else InProcess()
    return runs.replay(
        RunRequest.build(),
        [str(capture)],
        tmp_path / "policies",
        evidence_dir=tmp_path / "evidence",
        engine=engine,
    )


def evidence(tmp_path: Path) -> dict[str, str]:
    """Every evidence file's text, run times blanked."""
    root = tmp_path / "evidence"
    return {
        str(p.relative_to(root)): TIMES.sub(r'"\1": "-"', p.read_text())
        for p in sorted(root.rglob("*.json"))
    }


def totals(tmp_path: Path) -> tuple[int, set[str]]:
    flows, sessions = 0, set()
    for path in (tmp_path / "evidence").rglob("*.json"):
        doc: dict[str, Any] = json.loads(path.read_text())
        if "rules" in doc:
            flows += sum(r["flow_count"] for r in doc["rules"])
            sessions |= {s["id"] for s in doc["sessions"]}
    return flows, sessions


@pytest.mark.parametrize("jobs", [1, 2])
def test_three_replays_of_one_capture_record_what_one_replay_records(
    tmp_path: Path, jobs: int
) -> None:
    capture = tmp_path / "capture.jsonl"
    capture.write_bytes(EXAMPLE.read_bytes())
    first = replay(tmp_path, capture, jobs=jobs)
    once = evidence(tmp_path)
    assert first.session is not None and first.session.id.startswith("replay-")
    for _ in range(2):
        again = replay(tmp_path, capture, jobs=jobs)
    assert evidence(tmp_path) == once
    assert again.session is not None and again.session.id == first.session.id
    text = run_text(
        runs.run_report(again, RunRequest.build(), source="x", output_dir=tmp_path, exit_code=0)
    )
    assert f"recorded before (session {first.session.id}): its counts were replaced" in text


def test_a_different_capture_adds_and_a_copy_elsewhere_is_the_same_capture(tmp_path: Path) -> None:
    capture = tmp_path / "capture.jsonl"
    capture.write_bytes(EXAMPLE.read_bytes())
    replay(tmp_path, capture)
    flows_once, (only,) = totals(tmp_path)
    copy = tmp_path / "downloaded" / "artifact.jsonl"
    copy.parent.mkdir()
    copy.write_bytes(EXAMPLE.read_bytes())
    replay(tmp_path, copy)
    assert totals(tmp_path) == (flows_once, {only})
    other = tmp_path / "tomorrow.jsonl"
    lines = EXAMPLE.read_text().splitlines(keepends=True)
    other.write_text("".join(lines[:30]))
    replay(tmp_path, other)
    flows, sessions = totals(tmp_path)
    assert flows > flows_once and len(sessions) == 2


def test_a_growing_file_replayed_twice_counts_each_flow_once(tmp_path: Path) -> None:
    lines = EXAMPLE.read_text().splitlines(keepends=True)
    whole = tmp_path / "whole.jsonl"
    whole.write_text("".join(lines))
    reference = tmp_path / "reference"
    replay(reference, whole)
    growing = tmp_path / "growing.jsonl"
    growing.write_text("".join(lines[:20]))
    replay(tmp_path, growing)
    early_flows, (early,) = totals(tmp_path)
    growing.write_text("".join(lines))  # the exporter appended the rest
    grown = replay(tmp_path, growing)
    flows, sessions = totals(tmp_path)
    assert early_flows < flows == totals(reference)[0]
    assert grown.session is not None and sessions == {grown.session.id} != {early}
    assert grown.identity.replaces == {early}
    replay(tmp_path, growing)
    assert totals(tmp_path) == (flows, {grown.session.id})


def test_a_capture_already_counted_as_part_of_a_larger_one_adds_nothing(tmp_path: Path) -> None:
    part = tmp_path / "a.jsonl"
    rest = tmp_path / "b.jsonl"
    lines = EXAMPLE.read_text().splitlines(keepends=True)
    part.write_text("".join(lines[:30]))
    rest.write_text("".join(lines[30:]))
    runs.replay(
        RunRequest.build(),
        [str(part), str(rest)],
        tmp_path / "policies",
        evidence_dir=tmp_path / "evidence",
        engine=InProcess(),
    )
    before = evidence(tmp_path)
    again = replay(tmp_path, part)
    assert again.identity.recorded_by and evidence(tmp_path) == before
    text = run_text(
        runs.run_report(again, RunRequest.build(), source="x", output_dir=tmp_path, exit_code=0)
    )
    assert f"Evidence unchanged: session {again.identity.recorded_by} already counted" in text
