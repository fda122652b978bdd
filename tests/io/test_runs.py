"""The run layer's replay use case on a typed request: the window, held-back entries, verify
and the exit code a run earns, read from memory (the in-memory engine) or from a file."""

from __future__ import annotations

from pathlib import Path

from conftest import EXAMPLE
from cpg_core import Decision, RunRequest
from cpg_io import runs
from cpg_io.engines import in_memory


def _replay(tmp_path: Path, request: RunRequest, **engine: bytes) -> runs.RunResult:
    captures = engine or {"capture": EXAMPLE.read_bytes()}
    return runs.replay(
        request,
        list(captures),
        tmp_path / "policies",
        evidence_dir=tmp_path / "evidence",
        engine=in_memory(captures),
    )


def test_the_in_memory_engine_gives_what_a_file_gives(tmp_path: Path) -> None:
    request = RunRequest.build()
    from_memory = _replay(tmp_path / "memory", request)
    from_file = runs.replay(
        request,
        [str(EXAMPLE)],
        tmp_path / "file" / "policies",
        evidence_dir=tmp_path / "file" / "evidence",
    )
    assert [f.outcome for f in from_memory.files] == [f.outcome for f in from_file.files]
    for item in from_memory.files:
        twin = (
            tmp_path / "file" / "policies" / item.path.relative_to(tmp_path / "memory" / "policies")
        )
        assert item.path.read_bytes() == twin.read_bytes()


def test_rare_entries_are_held_back_and_infra_drops_trip_the_check(tmp_path: Path) -> None:
    request = RunRequest.build(min_flows=3, fail_on_infra_drops=True)
    result = _replay(tmp_path, request)
    assert result.held_back and result.min_flows == 3
    assert result.aggregator.infra_drops > 0
    assert runs.exit_code(result, request) == 3
    assert runs.exit_code(result, RunRequest.build(min_flows=3)) == 0


def test_a_dry_run_with_exit_code_says_files_would_change(tmp_path: Path) -> None:
    request = RunRequest.build(dry_run=True, exit_code=True)
    result = _replay(tmp_path, request)
    assert {f.outcome for f in result.files} == {"would-create"}
    assert not (tmp_path / "policies").exists() and result.session is None
    assert runs.exit_code(result, request) == 3


def test_verify_checks_what_was_written_and_a_relative_window_counts_from_the_capture(
    tmp_path: Path,
) -> None:
    request = RunRequest.build(verify=True, since="1s")
    result = runs.replay(
        request, [str(EXAMPLE)], tmp_path / "policies", evidence_dir=tmp_path / "evidence"
    )
    # the last second holds no denied flow: nothing to check, which fails no replay
    assert result.verify is not None and result.verify.verdict == "cannot_judge"
    assert runs.exit_code(result, request) == 0
    everything = runs.replay(
        RunRequest.build(), [str(EXAMPLE)], tmp_path / "all", evidence_dir=tmp_path / "ev2"
    )
    outside = result.aggregator.decisions.get(Decision.OUTSIDE_WINDOW, 0)
    assert 0 < outside < everything.aggregator.total_flows
