"""Replay on a Dask cluster (``cpg replay --engine dask``): the workers read their files and
byte ranges straight from storage, each aggregates its part into the same mergeable partial
result a local worker produces, the partials are combined by a tree reduction on the cluster,
and only the final partial comes back to this process, whose output stage is unchanged.

Every task is a pure function of its arguments, so whatever Dask does when a worker dies
(it computes the lost results again) can never count a flow twice. Line numbers of malformed
lines are made absolute here, from each part's line count, exactly as a local run numbers them.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import Any

import attrs

from cpg_core import AggregateOptions, AggregateState, Aggregator, Setting
from cpg_core.reading import MAX_LINE_BYTES, OVERSIZED, LineAggregator, Readers, merge_stats
from cpg_io.engines.local import first_bytes
from cpg_io.engines.workers import CHUNK_BYTES, lines_of
from cpg_io.errors import Cancelled, EngineError, MissingDask
from cpg_io.progress import Reported
from cpg_io.remote import is_url, open_raw
from cpg_io.sources import (
    GZIP_MAGIC,
    ReadStats,
    describe_source,
    iter_line_batches,
    merge_file_stats,
    open_flow_stream,
    source_size,
)
from cpg_io.version import cpg_version

log = logging.getLogger("cpg")

RANGE_BYTES = 64 * 1024 * 1024
"""Plain (uncompressed) objects larger than this are split into byte ranges of this size."""
LOCAL = "local:"


@attrs.frozen
class Part:
    """One task's share: a whole object (``stop`` is None: gzip, or small) or the lines that
    start inside [start, stop) of a plain one."""

    url: str
    file: int
    index: int
    start: int = 0
    stop: int | None = None


@attrs.define
class Partial:
    """A part's (or several parts') mergeable result."""

    state: AggregateState
    stats: ReadStats
    parts: dict[tuple[int, int], tuple[int, list[tuple[int, str]], str]]
    """(file, index) -> (lines, malformed examples numbered from the part's first line,
    why the object ended early or "")."""
    flows: int = 0
    size: int = 0


def _open(url: str) -> Any:
    return open_raw(url) if is_url(url) else open(url, "rb")


def _finish_line(raw: Any) -> bytes | None:
    """The rest of the line under way, through its newline (or to the end), leaving ``raw``
    just after it; None when it is longer than a line may be (read past and dropped)."""
    pieces: list[bytes] = []
    have = 0
    while True:
        piece = raw.read(64 * 1024)
        if not piece:
            return None if have > MAX_LINE_BYTES else b"".join(pieces)
        cut = piece.find(b"\n")
        if cut >= 0:
            raw.seek(raw.tell() - (len(piece) - cut - 1))
            if have + cut + 1 > MAX_LINE_BYTES:
                return None
            pieces.append(piece[: cut + 1])
            return b"".join(pieces)
        have += len(piece)
        if have <= MAX_LINE_BYTES:
            pieces.append(piece)
        else:
            pieces = []


def _range_lines(raw: Any, start: int, stop: int) -> list[bytes]:
    """The lines that start inside [start, stop) of a plain object."""
    position = 0
    if start > 0:
        raw.seek(start - 1)
        _finish_line(raw)  # the line under way at start belongs to the part before
        position = raw.tell()
    if position >= stop:
        return []
    data = raw.read(stop - position)
    if data and not data.endswith(b"\n"):
        rest = _finish_line(raw)
        if rest is None:
            cut = data.rfind(b"\n") + 1
            return [*lines_of(data[:cut]), OVERSIZED]
        data += rest
    return lines_of(data)


_warm = threading.local()


def _readers() -> Readers:
    """This worker thread's readers: their caches (what depends only on an endpoint) are
    pure, so the tasks a worker runs one after another share them."""
    readers: Readers | None = getattr(_warm, "readers", None)
    if readers is None:
        readers = _warm.readers = Readers()
    return readers


def replay_part(part: Part, options: AggregateOptions) -> Partial:
    """One task: read a part from storage and aggregate it (runs on a Dask worker)."""
    feeder = LineAggregator(options, _readers())
    aggregator = feeder.aggregator
    stats = ReadStats()
    if part.stop is None:
        with open_flow_stream(part.url) as stream:
            for first, lines in iter_line_batches(stream, stats, CHUNK_BYTES):
                feeder.feed(lines, first, stats)
        size = source_size(part.url)
    else:
        with _open(part.url) as raw:
            lines = _range_lines(raw, part.start, part.stop)
        for at in range(0, len(lines), 8192):
            feeder.feed(lines[at : at + 8192], at + 1, stats)
        size = part.stop - part.start
    examples, stats.malformed_examples = stats.malformed_examples, []
    truncated, stats.truncated = stats.truncated, ""
    return Partial(
        state=aggregator.state(),
        stats=stats,
        parts={(part.file, part.index): (stats.lines_read, examples, truncated)},
        flows=aggregator.total_flows,
        size=size,
    )


FAN_IN = 8
"""Partials combined by one reduction task: fewer copies of the merged state than pairs."""


def combine(partials: Sequence[Partial], options: AggregateOptions) -> Partial:
    """Several partials as one (runs on a Dask worker): the reduction's step."""
    aggregator = Aggregator(options)
    stats = ReadStats()
    parts: dict[tuple[int, int], tuple[int, list[tuple[int, str]], str]] = {}
    for partial in partials:
        aggregator.absorb(partial.state)
        merge_stats(stats, partial.stats)
        parts.update(partial.parts)
    return Partial(
        state=aggregator.state(),
        stats=stats,
        parts=parts,
        flows=sum(p.flows for p in partials),
        size=sum(p.size for p in partials),
    )


def progress_of(partial: Partial) -> tuple[int, int, int]:
    """(bytes, lines, flows) of a part: what the client needs to show progress."""
    return partial.size, partial.stats.lines_read, partial.flows


def plan_parts(files: Sequence[str], range_bytes: int) -> list[Part]:
    """The tasks for the inputs: gzip and small objects whole, larger plain ones in ranges.
    Only sizes (from the listing) and the first two bytes of each large object are read here."""
    parts = []
    for number, url in enumerate(files):
        if url == "-":
            raise EngineError("- (standard input) cannot be read by a Dask cluster; give files")
        size = source_size(url)
        if size <= range_bytes:  # one task whatever it holds: no need to look inside
            parts.append(Part(url, number, 0))
            continue
        with _open(url) as raw:
            gzipped = raw.read(2) == GZIP_MAGIC
        if gzipped:  # a gzip stream cannot be cut into ranges
            parts.append(Part(url, number, 0))
            continue
        for index, start in enumerate(range(0, size, range_bytes)):
            parts.append(Part(url, number, index, start, min(start + range_bytes, size)))
    return parts


def _connect(scheduler: str) -> tuple[Any, Any]:
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise MissingDask(
            "the dask engine needs the dask extra: pip install 'cpg[dask]'", field="engine"
        ) from None
    if scheduler.startswith(LOCAL):
        count = scheduler[len(LOCAL) :]
        if not count.isdigit() or int(count) < 1:
            raise EngineError(
                Setting("scheduler"),
                f" {scheduler}: say how many worker processes, e.g. local:4",
                field="scheduler",
            )
        cluster = LocalCluster(
            n_workers=int(count),
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address="127.0.0.1:0",  # never a fixed port another run may hold
            silence_logs=logging.ERROR,
        )
        return Client(cluster), cluster
    try:
        return Client(scheduler, timeout="10s"), None
    except (OSError, TimeoutError, ValueError) as exc:
        raise EngineError(
            f"cannot reach the Dask scheduler at {scheduler} ({exc}); check ",
            Setting("scheduler"),
            " (e.g. tcp://dask-scheduler:8786) or use local:N",
            field="scheduler",
        ) from None


def _same_cpg(client: Any, scheduler: str) -> None:
    """The workers must run this cpg: another version may aggregate differently."""
    mine = cpg_version()
    theirs = {str(v) for v in client.run(cpg_version).values()}
    if not theirs:
        raise EngineError(f"the Dask cluster at {scheduler} has no workers; start some")
    if theirs != {mine}:
        raise EngineError(
            f"the Dask workers at {scheduler} run cpg {', '.join(sorted(theirs))}, this is "
            f"cpg {mine}: give the workers the same cpg (the same image) as the client"
        )


def aggregate_on_dask(
    files: Sequence[str],
    options: AggregateOptions,
    stats: ReadStats,
    scheduler: str,
    *,
    cancel: threading.Event | None = None,
    watch: Reported | None = None,
    range_bytes: int | None = None,
) -> Aggregator:
    """Aggregate every flow of ``files`` on the cluster at ``scheduler`` (an address, or
    ``local:N`` for a LocalCluster of N worker processes)."""
    client, cluster = _connect(scheduler)
    try:
        _same_cpg(client, scheduler)
        parts = plan_parts(files, range_bytes or RANGE_BYTES)
        if watch is not None:
            watch.watcher.reading(sum(source_size(url) for url in files))
            watch.watcher.tasks(0, len(parts))
        leaves = [client.submit(replay_part, part, options, pure=False) for part in parts]
        counts = [client.submit(progress_of, leaf, pure=False) for leaf in leaves]
        level = leaves
        while len(level) > 1:  # a tree: each step combines up to FAN_IN partials on a worker
            level = [
                client.submit(combine, level[i : i + FAN_IN], options, pure=False)
                if len(level[i : i + FAN_IN]) > 1
                else level[i]
                for i in range(0, len(level), FAN_IN)
            ]
        from distributed import as_completed

        done = size = lines = 0
        for future in as_completed(counts):
            if cancel is not None and cancel.is_set():
                client.cancel([*leaves, *level])
                raise Cancelled("the run was cancelled")
            part_size, part_lines, _flows = future.result()
            done, size, lines = done + 1, size + part_size, lines + part_lines
            if watch is not None:
                watch.read(size, lines)
                watch.watcher.tasks(done, len(parts))
        final: Partial = level[0].result()
    except (OSError, TimeoutError) as exc:
        raise EngineError(f"the Dask cluster at {scheduler} failed: {exc}") from None
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
    aggregator = Aggregator(options)
    aggregator.absorb(final.state)
    merge_stats(stats, final.stats)
    _number_lines(files, final.parts, stats)
    return aggregator


def _number_lines(
    files: Sequence[str],
    parts: dict[tuple[int, int], tuple[int, list[tuple[int, str]], str]],
    stats: ReadStats,
) -> None:
    """Malformed lines numbered within their file (and named with it when there are several),
    and the first object that ended early: what a local run reports."""
    offsets: dict[int, int] = {}
    for file, index in sorted(parts):
        lines, examples, truncated = parts[(file, index)]
        offset = offsets.get(file, 0)
        offsets[file] = offset + lines
        label = describe_source(files[file]) if len(files) > 1 else None
        numbered = [(offset + line, why) for line, why in examples]
        merge_file_stats(stats, ReadStats(malformed_examples=numbered, truncated=truncated), label)


@attrs.frozen
class DaskEngine:
    """The workers of a Dask cluster read their objects and byte ranges straight from
    storage; only the combined partial comes back. ``jobs`` is for the write stage here."""

    scheduler: str
    part_bytes: int = RANGE_BYTES
    jobs: int = 1

    def aggregate(
        self,
        files: Sequence[str],
        options: AggregateOptions,
        stats: ReadStats,
        reported: Reported,
        cancel: object | None = None,
    ) -> tuple[Aggregator, bytes]:
        event = cancel if isinstance(cancel, threading.Event) else None
        aggregator = aggregate_on_dask(
            files,
            options,
            stats,
            self.scheduler,
            cancel=event,
            watch=reported,
            range_bytes=self.part_bytes,
        )
        for line, why in stats.malformed_examples:
            reported.malformed(line, why)
        unreadable = stats.lines_read - stats.blank_lines <= stats.malformed
        return aggregator, first_bytes(files) if unreadable else b""
