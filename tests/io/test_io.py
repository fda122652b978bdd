from __future__ import annotations

import gzip
import io
import os
import stat
from pathlib import Path

import pytest

from conftest import flow_dict, jsonl
from cpg_io.sources import MAX_LINE_BYTES, ReadStats, SourceError, open_flow_stream, read_records
from cpg_io.store import PolicyStore, StoreError, WriteOutcome, atomic_write_text


def read_all(data: bytes) -> tuple[list[object], ReadStats]:
    stats = ReadStats()
    return list(read_records(io.BytesIO(data), stats)), stats


def test_malformed_lines_are_counted_with_their_numbers() -> None:
    good = jsonl([flow_dict()])
    data = (
        good + "not json\n" + "\n" + good + '{"flow": {"source": {"labels": "x"}}}\n' + good
    ).encode()
    flows, stats = read_all(data)
    assert len(flows) == 3
    assert stats.lines_read == 6
    assert stats.blank_lines == 1
    assert stats.malformed == 2
    assert stats.malformed_lines == [2, 5]
    assert "not valid JSON" in stats.malformed_examples[0][1]
    assert "source.labels" in stats.malformed_examples[1][1]


def test_lost_events_and_node_status_are_counted_not_malformed() -> None:
    data = (
        b'{"lost_events":{"source":"HUBBLE_RING_BUFFER","num_events_lost":"5"}}\n'
        b'{"node_status":{"state_change":"NODE_ERROR"}}\n'
    )
    flows, stats = read_all(data)
    assert flows == [] and stats.malformed == 0
    assert stats.lost_events == 5 and stats.other_records == 1


def test_an_oversized_line_is_skipped_and_reading_goes_on() -> None:
    big = b'{"flow": {"x": "' + b"a" * (MAX_LINE_BYTES + 10) + b'"}}\n'
    flows, stats = read_all(big + jsonl([flow_dict()]).encode())
    assert len(flows) == 1
    assert stats.malformed_lines == [1]


def test_last_line_without_newline_is_read() -> None:
    flows, stats = read_all(jsonl([flow_dict()]).rstrip("\n").encode())
    assert len(flows) == 1 and stats.malformed == 0


def test_gzip_is_detected_by_magic_bytes_not_by_name(tmp_path: Path) -> None:
    path = tmp_path / "capture.jsonl"  # no .gz suffix
    path.write_bytes(gzip.compress(jsonl([flow_dict(), flow_dict(tcp=443)]).encode()))
    stats = ReadStats()
    with open_flow_stream(str(path)) as stream:
        flows = list(read_records(stream, stats))
    assert [f.port for f in flows] == [8080, 443]  # type: ignore[attr-defined]


def test_truncated_gzip_is_reported_and_what_was_read_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "capture.gz"
    blob = gzip.compress(
        jsonl([flow_dict(time=f"2026-01-01T00:00:{i:02d}Z") for i in range(200)]).encode()
    )
    path.write_bytes(blob[: len(blob) // 2])
    stats = ReadStats()
    with open_flow_stream(str(path)) as stream:
        flows = list(read_records(stream, stats))
    assert stats.truncated
    assert 0 < len(flows) < 200


def test_missing_file_is_a_source_error(tmp_path: Path) -> None:
    with (
        pytest.raises(SourceError, match="no such file"),
        open_flow_stream(str(tmp_path / "nope.jsonl")),
    ):
        pass
    with pytest.raises(SourceError, match="is a directory"), open_flow_stream(str(tmp_path)):
        pass


def test_atomic_write_mode_and_no_leftovers(tmp_path: Path) -> None:
    target = tmp_path / "ns" / "w.yaml"
    atomic_write_text(target, "a: 1\n")
    assert target.read_text() == "a: 1\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    assert sorted(p.name for p in target.parent.iterdir()) == ["w.yaml"]


def test_store_leaves_unchanged_files_alone(tmp_path: Path) -> None:
    store = PolicyStore(tmp_path)
    path = store.path_for("ns", "web")
    assert store.write(path, "x: 1\n", None) is WriteOutcome.CREATED
    os.utime(path, (1_000_000, 1_000_000))
    assert store.write(path, "x: 1\n", store.read(path)) is WriteOutcome.UNCHANGED
    assert path.stat().st_mtime == 1_000_000
    assert store.write(path, "x: 2\n", store.read(path)) is WriteOutcome.UPDATED


@pytest.mark.parametrize("bad", ["", ".", "..", "a/b", "a\\b", "x\x00", ".hidden"])
def test_store_refuses_unsafe_path_components(tmp_path: Path, bad: str) -> None:
    store = PolicyStore(tmp_path)
    with pytest.raises(StoreError, match="refusing"):
        store.path_for(bad, "web")
    with pytest.raises(StoreError, match="refusing"):
        store.path_for("ns", bad)


def test_parallel_replay_equals_single_process() -> None:
    from conftest import EXAMPLE
    from cpg_core._synthesis.aggregate import AggregateOptions
    from cpg_io.engines.workers import aggregate_stream

    data = EXAMPLE.read_bytes() * 3
    results = []
    for jobs in (1, 2):
        stats = ReadStats()
        agg = aggregate_stream(io.BytesIO(data), AggregateOptions(), stats, jobs, chunk_bytes=2048)
        results.append((agg, stats))
    (single, single_stats), (multi, multi_stats) = results
    assert multi.plans() == single.plans() and single.plans()
    assert multi.decisions == single.decisions
    assert multi.unhandled == single.unhandled
    assert {k: f.count for k, f in multi.findings.items()} == {
        k: f.count for k, f in single.findings.items()
    }
    assert multi_stats == single_stats
    assert single_stats.malformed_lines == [32, 46, 99, 113, 166, 180]
    assert single_stats.lines_read == 3 * 67


def test_chunks_keep_line_numbers_and_whole_lines() -> None:
    from cpg_io.sources import iter_chunks

    data = b"".join(b'{"n": %d}\n' % i for i in range(100)) + b"tail"
    chunks = list(iter_chunks(io.BytesIO(data), ReadStats(), 64))
    assert b"".join(block for _, block in chunks) == data
    for first, block in chunks:
        assert block.startswith(b'{"n": %d}' % (first - 1)) or block == b"tail"


def test_a_file_selecting_other_endpoints_is_never_merged_into(tmp_path: Path) -> None:
    from conftest import endpoint
    from cpg_core._flows.parse import parse_flow
    from cpg_core._synthesis.aggregate import Aggregator
    from cpg_io.runs._output import write_plan

    def plan_for(labels: str) -> object:
        agg = Aggregator()
        agg.add(parse_flow(flow_dict(dst=endpoint("shop", None, labels))))
        (plan,) = agg.plans()
        return plan

    store = PolicyStore(tmp_path)
    first = write_plan(store, plan_for("k8s:app=web"), dry_run=False, diff=False)  # type: ignore[arg-type]
    original = (tmp_path / "shop" / "web.yaml").read_text()
    second = write_plan(
        store, plan_for("k8s:app.kubernetes.io/name=web"), dry_run=False, diff=False
    )  # type: ignore[arg-type]
    assert first.outcome == second.outcome == "created"
    assert (tmp_path / "shop" / "web.yaml").read_text() == original
    assert second.path != first.path and second.path.name.startswith("web-")
    assert second.plan is not None and second.plan.name.startswith("cpg-web-")


def test_forked_output_stage_writes_what_the_inline_one_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from conftest import EXAMPLE
    from cpg_core._synthesis.aggregate import AggregateOptions
    from cpg_io.engines import Forked, InProcess, workers as parallel
    from cpg_io.runs._output import EvidenceSettings
    from cpg_io.runs._replay import replay_capture

    def run(name: str, jobs: int) -> dict[str, bytes]:
        out = tmp_path / name
        result = replay_capture(
            [str(EXAMPLE)],
            out / "policies",
            AggregateOptions(),
            engine=Forked(jobs) if jobs > 1 else InProcess(),
            evidence=EvidenceSettings(root=out / "evidence"),
            session_id="same-session",
        )
        assert [f.outcome for f in result.files] == ["created"] * 6
        assert all(f.plan is not None for f in result.files)
        files = {}
        for path in sorted(out.rglob("*")):
            if path.is_file():
                data = path.read_bytes()
                if path.suffix == ".json":  # session times differ between the two runs
                    timed = (b"_at", b'"started"', b'"ended"')
                    data = b"\n".join(
                        line for line in data.split(b"\n") if not any(t in line for t in timed)
                    )
                parts = path.relative_to(out).parts
                if parts[0] == "evidence":  # the hash of the output dir differs: drop it
                    parts = parts[:1] + parts[2:]
                files["/".join(parts)] = data
        return files

    monkeypatch.setattr(parallel, "FORK_MIN_ITEMS", 1)
    forked = run("forked", 2)
    inline = run("inline", 1)
    assert forked == inline
    assert not [p for p in tmp_path.rglob("*tmp")], "no temp file is left behind"


@pytest.mark.parametrize("size", [7, 64, 1000, 1 << 20])
@pytest.mark.parametrize("tail", [b"", b"tail", b"\n\n"])
def test_line_batches_are_thelines_of_the_chunks(size: int, tail: bytes) -> None:
    """The in-process reader (batches of lines, no block copies) gives the lines and line
    numbers the worker blocks give."""
    from cpg_io.engines.workers import lines_of
    from cpg_io.sources import iter_chunks, iter_line_batches

    data = b"".join(b'{"n": %d}%s\n' % (i, b"x" * (i % 37)) for i in range(300)) + tail
    expected = [
        (first + at, line)
        for first, block in iter_chunks(io.BytesIO(data), ReadStats(), size)
        for at, line in enumerate(lines_of(block))
    ]
    got = [
        (first + at, line)
        for first, lines in iter_line_batches(io.BytesIO(data), ReadStats(), size)
        for at, line in enumerate(lines)
    ]
    assert got == expected
    assert [line for _, line in got] == data.split(b"\n")[: len(got)]


def test_line_batches_drop_an_oversized_line_as_one_line_and_go_on() -> None:
    from cpg_core._synthesis.lines import OVERSIZED
    from cpg_io.sources import iter_line_batches

    for length in (MAX_LINE_BYTES + 5, 3 * MAX_LINE_BYTES):
        data = b"a\n" + b"x" * length + b"\nb\n"
        got = [
            (first + at, line)
            for first, lines in iter_line_batches(io.BytesIO(data), ReadStats(), 1 << 20)
            for at, line in enumerate(lines)
        ]
        assert [number for number, _ in got] == [1, 2, 3]
        assert got[0][1] == b"a" and got[2][1] == b"b"
        # Counted as one malformed line either way; never held whole once far too long.
        assert got[1][1] == OVERSIZED or MAX_LINE_BYTES < len(got[1][1]) < 2 * MAX_LINE_BYTES


def test_line_batches_of_a_truncated_gzip_keep_every_whole_line() -> None:
    from cpg_io.sources import iter_line_batches

    whole = b"".join(b'{"n": %d}\n' % i for i in range(5000))
    cut = gzip.compress(whole)[:-200]
    stats = ReadStats()
    with gzip.GzipFile(fileobj=io.BytesIO(cut)) as stream:
        lines = [line for _, batch in iter_line_batches(stream, stats, 4096) for line in batch]
    assert lines and whole.startswith(b"\n".join(lines) + b"\n")
    assert f"input ended early after line {len(lines)}" in stats.truncated


def test_a_bounded_read_takes_the_whole_file_and_refuses_past_the_limit(tmp_path: Path) -> None:
    from cpg_io.store import RefusedFile, read_bounded

    exact = tmp_path / "exact"
    exact.write_bytes(b"x" * 4096)
    assert read_bounded(exact, limit=4096) == b"x" * 4096
    over = tmp_path / "over"
    with over.open("wb") as handle:  # sparse: larger than the limit without the disk space
        handle.truncate(4097)
    with pytest.raises(RefusedFile, match="larger than"):
        read_bounded(over, limit=4096)
    # a regular file that says it is empty, as those under /proc do, is read to its end
    status = read_bounded(Path("/proc/self/status"))
    assert os.stat("/proc/self/status").st_size == 0 and b"\nPid:" in status
    with pytest.raises(RefusedFile, match="larger than"):
        read_bounded(Path("/proc/self/status"), limit=16)
