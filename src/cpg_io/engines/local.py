"""The engines of this machine: in this process, or in forked worker processes (see
:mod:`cpg_io.engines.workers`). One file is read by byte ranges or streamed to the workers;
several files are shared out whole, one per worker at a time."""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from cpg_core import Aggregator
from cpg_core.reading import ReadStats
from cpg_io.engines.job import ReadJob
from cpg_io.engines.workers import aggregate_file, aggregate_files, aggregate_stream
from cpg_io.progress import Reported
from cpg_io.sources import (
    SNIFF_BYTES,
    describe_source,
    input_size,
    is_gzip,
    is_regular_file,
    local_path,
    merge_file_stats,
    open_flow_stream,
    peek,
    source_size,
)


@attrs.frozen
class Forked:
    """``jobs`` worker processes forked from this one (large captures); the write stage
    forks as many."""

    jobs: int

    def aggregate(self, job: ReadJob) -> tuple[Aggregator, bytes]:
        if not job.several:
            aggregator, head = _read_one(job, self.jobs)
            for line, why in job.stats.malformed_examples:  # those a worker kept to the end
                job.reported.malformed(line, why)
            return aggregator, head
        return _read_many(job, self.jobs)


@attrs.frozen
class InProcess(Forked):
    """Everything in this process: no fork (small captures, cpg-mcp sessions)."""

    jobs: int = 1


def _read_one(job: ReadJob, jobs: int) -> tuple[Aggregator, bytes]:
    source, options, stats, reported, cancel = (
        job.files[0],
        job.options,
        job.stats,
        job.reported,
        job.cancel,
    )
    watch = reported.watcher
    with open_flow_stream(source) as stream:
        # Workers read byte ranges of their own only from a regular file (a FIFO or a device
        # can be read once, by this process).
        plain_file = source != "-" and not is_gzip(stream) and is_regular_file(stream)
        head = peek(stream, SNIFF_BYTES)
        size, position = input_size(stream)
        watch.reading(size)
        found = (
            # workers reopen the file by its path: a file:// URL is a path too
            aggregate_file(local_path(source), options, stats, jobs, cancel=cancel, watch=reported)
            if plain_file and jobs > 1
            else None
        )
        aggregator = found or aggregate_stream(
            stream, options, stats, jobs, cancel=cancel, watch=reported, position=position
        )
    return aggregator, head


def _read_many(job: ReadJob, jobs: int) -> tuple[Aggregator, bytes]:
    """Several files as one capture (their concatenation): by file-level workers with
    ``jobs`` > 1, else one after the other. Malformed lines are named with their file."""
    files, options, stats, reported, cancel = (
        list(job.files),
        *attrs.astuple(job, recurse=False)[1:],
    )
    head = first_bytes(files)
    reported.watcher.reading(sum(source_size(path) for path in files))
    if jobs > 1:
        aggregator, per_file = aggregate_files(files, options, jobs, cancel, reported)
    else:
        aggregator, per_file = Aggregator(options), []
        base_position = base_lines = 0
        for index, path in enumerate(files):
            part = ReadStats()
            offset = _Offset(reported, path, base_position, base_lines)
            with open_flow_stream(path) as stream:
                _size, position = input_size(stream)
                read = aggregate_stream(
                    stream, options, part, 1, cancel=cancel, watch=offset, position=position
                )
            if index == 0:
                aggregator = read  # the first file's aggregator goes on with the rest
            else:
                aggregator.absorb(read.hand_over(), own=True)
            per_file.append(part)
            base_position += source_size(path)
            base_lines += part.lines_read
    for path, part in zip(files, per_file, strict=True):
        merge_file_stats(stats, part, describe_source(path))
    return aggregator, head


class _Offset(Reported):
    """What reading one file of several tells: positions counted from the first file's
    start, malformed lines named with their file."""

    def __init__(self, inner: Reported, path: str, position: int, lines: int) -> None:
        super().__init__(inner.watcher)
        self.inner, self.path, self.position, self.lines = inner, path, position, lines

    def read(self, position: int, lines: int) -> None:
        self.inner.read(self.position + position, self.lines + lines)

    def malformed(self, line: int, why: str, source: str | None = None) -> None:
        self.inner.malformed(line, why, source or self.path)


def first_bytes(files: Sequence[str]) -> bytes:
    """The first bytes of the first non-empty input (for saying what it looks like)."""
    for path in files:
        with open_flow_stream(path) as stream:
            head = peek(stream, SNIFF_BYTES)
        if head.strip():
            return head
    return b""
