"""Replay on every core: the main process cuts the input into blocks of whole lines, worker
processes parse and aggregate them, and the partial results are merged. Aggregation does not
depend on flow order, so the result is the same as a single-process run."""

from __future__ import annotations

import contextlib
import ctypes
import gc
import itertools
import multiprocessing
import os
import queue
import signal
import threading
import traceback
from collections.abc import Callable, Iterator, Sequence
from typing import Any, BinaryIO, TypeVar

from cpg_core import AggregateOptions, AggregateState, Aggregator
from cpg_core.reading import LineAggregator
from cpg_io.errors import Cancelled
from cpg_io.progress import Reported
from cpg_io.remote import is_url
from cpg_io.sources import (
    ReadStats,
    SourceError,
    input_size,
    iter_chunks,
    iter_line_batches,
    merge_stats,
    open_flow_stream,
    source_size,
)

T = TypeVar("T")
R = TypeVar("R")

CHUNK_BYTES = 4 * 1024 * 1024
QUEUE_DEPTH = 4  # blocks in flight per worker: bounds memory whatever the input size
PARALLEL_AFTER_CHUNKS = 4  # smaller inputs are cheaper to do in-process


def default_jobs() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def _checked(
    chunks: Iterator[tuple[int, bytes]],
    cancel: threading.Event | None,
    watch: Reported | None = None,
    position: Callable[[], int] | None = None,
) -> Iterator[tuple[int, bytes]]:
    done = 0
    for first, block in chunks:
        if cancel is not None and cancel.is_set():
            raise Cancelled("the run was cancelled")
        if watch is not None:
            done += len(block)
            watch.read(position() if position is not None else done, first - 1 + block.count(b"\n"))
        yield first, block


def die_with_parent(parent: int | None = None) -> None:
    """In a worker: be killed when the parent dies (kill -9 included), and leave Ctrl+C to
    the parent, which stops the workers itself. ``parent`` is the pid the parent had before
    the fork: a parent that died between the fork and this call is noticed too."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # Started with SIGINT blocked (see sigint_blocked): a Ctrl+C that came meanwhile is
    # dropped now that it is ignored, never raised inside the fork's own bookkeeping.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    expected = parent if parent is not None else os.getppid()
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != expected:  # the parent died before the request took hold
        os._exit(1)


_PR_SET_PDEATHSIG = 1


@contextlib.contextmanager
def sigint_blocked() -> Iterator[None]:
    """Start workers inside this: a child is born with SIGINT blocked and unblocks it only
    once it ignores it (die_with_parent), so a Ctrl+C during a fork never prints a child's
    traceback. The parent gets a Ctrl+C that came meanwhile when the block ends."""
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def _started(
    context: Any, target: Callable[..., None], each: Sequence[tuple[Any, ...]]
) -> list[Any]:
    """One daemon worker process per argument tuple, started with SIGINT blocked."""
    workers = [context.Process(target=target, args=args, daemon=True) for args in each]
    with sigint_blocked():
        for worker in workers:
            worker.start()
    return workers


def _stop(workers: Sequence[Any], queues: Sequence[Any], failed: bool) -> None:
    """End the workers: at once when the run failed or was interrupted (nothing waits for a
    queue that no one reads any more), else after they finished."""
    for pipe in queues:
        pipe.cancel_join_thread()
    if failed:
        for worker in workers:
            worker.terminate()
    for worker in workers:
        worker.join(timeout=5)
        if worker.is_alive():
            worker.kill()
            worker.join(timeout=5)


def _next_reply(outbox: Any, cancel: threading.Event | None) -> tuple[Any, Any, Any]:
    """The next message of the workers; Cancelled as soon as ``cancel`` is set."""
    while True:
        if cancel is not None and cancel.is_set():
            raise Cancelled("the run was cancelled")
        try:
            message: tuple[Any, Any, Any] = outbox.get(timeout=0.2)
        except queue.Empty:
            continue
        return message


def lines_of(block: bytes) -> list[bytes]:
    lines = block.split(b"\n")
    if lines and not lines[-1]:
        lines.pop()
    return lines


def _checked_batches(
    batches: Iterator[tuple[int, list[bytes]]],
    cancel: threading.Event | None,
    watch: Reported | None = None,
    position: Callable[[], int] | None = None,
) -> Iterator[tuple[int, list[bytes]]]:
    done = 0
    for first, lines in batches:
        if cancel is not None and cancel.is_set():
            raise Cancelled("the run was cancelled")
        if watch is not None:
            if position is None:
                done += sum(map(len, lines)) + len(lines)
            watch.read(position() if position is not None else done, first - 1 + len(lines))
        yield first, lines


def _batches(blocks: Iterator[tuple[int, bytes]]) -> Iterator[tuple[int, list[bytes]]]:
    for first, block in blocks:
        yield first, lines_of(block)


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """The cycle collector off while lines are aggregated: the hot loop makes no reference
    cycles, and each pass over the growing aggregate would cost more the further the run is.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _consume(
    batches: Iterator[tuple[int, list[bytes]]],
    feeder: LineAggregator,
    stats: ReadStats,
    on_malformed: Callable[[int, str], object] | None = None,
) -> None:
    told = 0
    with collector_paused():
        for first, lines in batches:
            feeder.feed(lines, first, stats)
            if on_malformed is not None and len(stats.malformed_examples) > told:
                for line, why in stats.malformed_examples[told:]:
                    on_malformed(line, why)
                told = len(stats.malformed_examples)


def _worker(options: AggregateOptions, inbox: Any, outbox: Any, parent: int) -> None:
    die_with_parent(parent)
    try:
        feeder = LineAggregator(options)
        stats = ReadStats()

        def tell(line: int, why: str) -> None:
            outbox.put(("malformed", line, why))

        _consume(_batches(iter(inbox.get, None)), feeder, stats, tell)
        outbox.put(("ok", feeder.aggregator.hand_over(), stats))
    except BaseException:  # report, never hang the parent
        outbox.put(("error", traceback.format_exc(), None))


def aggregate_stream(
    stream: BinaryIO,
    options: AggregateOptions,
    stats: ReadStats,
    jobs: int,
    chunk_bytes: int = CHUNK_BYTES,
    cancel: threading.Event | None = None,
    watch: Reported | None = None,
    position: Callable[[], int] | None = None,
) -> Aggregator:
    """Aggregate every flow of ``stream``; with ``jobs`` > 1 and a large input, in workers.
    Setting ``cancel`` stops it between blocks (Cancelled). ``watch`` hears how far reading
    got (``position()`` bytes, when given) and each malformed line as it is found."""
    feeder = LineAggregator(options)
    aggregator = feeder.aggregator
    on_malformed = watch.malformed if watch else None
    if jobs <= 1:
        local = ReadStats()
        batches = iter_line_batches(stream, stats, chunk_bytes)
        _consume(_checked_batches(batches, cancel, watch, position), feeder, local, on_malformed)
        merge_stats(stats, local)
        return aggregator
    chunks = _checked(iter_chunks(stream, stats, chunk_bytes), cancel, watch, position)
    head: list[tuple[int, bytes]] = []
    for chunk in chunks:
        head.append(chunk)
        if len(head) >= PARALLEL_AFTER_CHUNKS:
            break
    if len(head) < PARALLEL_AFTER_CHUNKS:
        local = ReadStats()
        _consume(_batches(_chain(head, chunks)), feeder, local, on_malformed)
        merge_stats(stats, local)
        return aggregator

    context: Any = multiprocessing.get_context("fork" if hasattr(os, "fork") else "spawn")
    outbox = context.Queue()
    inboxes = [context.Queue(QUEUE_DEPTH) for _ in range(jobs)]
    workers = _started(
        context, _worker, [(options, inbox, outbox, os.getpid()) for inbox in inboxes]
    )
    failed = True
    finished = 0

    def take(message: tuple[Any, Any, Any]) -> None:
        nonlocal finished
        status, payload, part = message
        if status == "malformed":
            if watch is not None:
                watch.malformed(payload, part)
            return
        if status != "ok":
            raise RuntimeError(f"a replay worker failed:\n{payload}")
        assert isinstance(payload, AggregateState) and isinstance(part, ReadStats)
        aggregator.absorb(payload, own=True)  # unpickled here: nothing else holds it
        merge_stats(stats, part)
        finished += 1

    try:
        for index, chunk in enumerate(_chain(head, chunks)):
            inboxes[index % jobs].put(chunk)
            while True:  # what the workers said so far: malformed lines, or a failure
                try:
                    take(outbox.get_nowait())
                except queue.Empty:
                    break
        for inbox in inboxes:
            inbox.put(None)
        while finished < len(workers):
            take(outbox.get())
        failed = False
    finally:
        _stop(workers, [*inboxes, outbox], failed)
    return aggregator


def _chain(
    head: list[tuple[int, bytes]], rest: Iterator[tuple[int, bytes]]
) -> Iterator[tuple[int, bytes]]:
    yield from head
    yield from rest


# --- a plain file on disk: workers read their own byte ranges ----------------------------


def line_ranges(path: str, chunk_bytes: int) -> list[tuple[int, int]]:
    """Byte ranges of roughly ``chunk_bytes`` that start and end on line boundaries."""
    size = os.path.getsize(path)
    bounds = [0]
    with open(path, "rb") as handle:
        while bounds[-1] + chunk_bytes < size:
            handle.seek(bounds[-1] + chunk_bytes)
            position = handle.tell()
            while True:
                block = handle.read(65536)
                if not block:
                    position = size
                    break
                cut = block.find(b"\n")
                if cut >= 0:
                    position += cut + 1
                    break
                position += len(block)
            if position >= size:
                break
            bounds.append(position)
    bounds.append(size)
    return list(itertools.pairwise(bounds))


ChunkReport = tuple[int, int, list[tuple[int, str]]]
"""(chunk index, lines in the chunk, malformed examples numbered within the chunk)."""


class _LineNumbers:
    """Turns per-range reports, arriving in any order, into absolute line numbers as soon as
    every range before one is known: malformed lines are told while the run goes on."""

    def __init__(self, watch: Reported | None) -> None:
        self.watch = watch
        self.reports: dict[int, ChunkReport] = {}
        self.next_index = 0
        self.first_line = 1
        self.examples: list[tuple[int, str]] = []

    def add(self, report: ChunkReport) -> None:
        self.reports[report[0]] = report
        while self.next_index in self.reports:
            _index, count, found = self.reports[self.next_index]
            for line, why in found:
                number = self.first_line + line - 1
                self.examples.append((number, why))
                if self.watch is not None:
                    self.watch.malformed(number, why)
            self.first_line += count
            self.next_index += 1


def _range_worker(
    path: str,
    ranges: list[tuple[int, tuple[int, int]]],
    options: AggregateOptions,
    outbox: Any,
    parent: int,
) -> None:
    die_with_parent(parent)
    try:
        feeder = LineAggregator(options)
        total = ReadStats()
        gc.disable()  # see _consume
        with open(path, "rb") as handle:
            for index, (start, stop) in ranges:
                handle.seek(start)
                lines = lines_of(handle.read(stop - start))
                chunk = ReadStats()
                feeder.feed(lines, 1, chunk)
                outbox.put(("chunk", (index, len(lines), chunk.malformed_examples), stop - start))
                chunk.malformed_examples = []
                merge_stats(total, chunk)
        outbox.put(("ok", feeder.aggregator.hand_over(), total))
    except BaseException:
        outbox.put(("error", traceback.format_exc(), None))


def aggregate_file(
    path: str,
    options: AggregateOptions,
    stats: ReadStats,
    jobs: int,
    chunk_bytes: int = CHUNK_BYTES,
    cancel: threading.Event | None = None,
    watch: Reported | None = None,
) -> Aggregator | None:
    """Aggregate a plain (uncompressed) file in ``jobs`` processes that each read their own
    ranges: no data crosses a pipe. None when the file is too small to be worth it."""
    ranges = line_ranges(path, chunk_bytes)
    if jobs <= 1 or len(ranges) < PARALLEL_AFTER_CHUNKS:
        return None
    context: Any = multiprocessing.get_context("fork" if hasattr(os, "fork") else "spawn")
    outbox = context.Queue()
    indexed = list(enumerate(ranges))
    workers = _started(
        context,
        _range_worker,
        [(path, indexed[w::jobs], options, outbox, os.getpid()) for w in range(jobs)],
    )
    aggregator = Aggregator(options)
    numbers = _LineNumbers(watch)
    position = lines = 0
    finished = 0
    failed = True
    try:
        while finished < len(workers):
            status, payload, extra = _next_reply(outbox, cancel)
            if status == "chunk":
                numbers.add(payload)
                position += extra
                lines += payload[1]
                if watch is not None:
                    watch.read(position, lines)
                continue
            if status != "ok":
                raise RuntimeError(f"a replay worker failed:\n{payload}")
            aggregator.absorb(payload, own=True)  # unpickled here: nothing else holds it
            merge_stats(stats, extra)
            finished += 1
        failed = False
    finally:
        _stop(workers, [outbox], failed)
    merge_stats(stats, ReadStats(malformed_examples=numbers.examples))
    return aggregator


# --- several files: each read whole by one worker -----------------------------------------


def _files_worker(
    paths: Sequence[str], options: AggregateOptions, inbox: Any, outbox: Any, parent: int
) -> None:
    die_with_parent(parent)
    try:
        feeder = LineAggregator(options)
        for index in iter(inbox.get, None):  # the next file no worker has taken yet
            path = paths[index]
            stats = ReadStats()
            with open_flow_stream(path) as stream:
                _size, position = input_size(stream)
                batches = iter_line_batches(stream, stats, CHUNK_BYTES)
                _consume(_told(batches, outbox, position), feeder, stats)
            outbox.put(("file", index, stats))
        outbox.put(("ok", feeder.aggregator.hand_over(), None))
    except SourceError as exc:
        outbox.put(("source", str(exc), None))
    except BaseException:
        outbox.put(("error", traceback.format_exc(), None))


def _told(
    batches: Iterator[tuple[int, list[bytes]]], outbox: Any, position: Callable[[], int] | None
) -> Iterator[tuple[int, list[bytes]]]:
    """The batches, telling the parent how many bytes (of the file, compressed for gzip) and
    lines each one moved the reading on."""
    done = 0
    for first, lines in batches:
        now = position() if position is not None else done + sum(map(len, lines)) + len(lines)
        outbox.put(("read", now - done, len(lines)))
        done = now
        yield first, lines


def aggregate_files(
    paths: Sequence[str],
    options: AggregateOptions,
    jobs: int,
    cancel: threading.Event | None = None,
    watch: Reported | None = None,
) -> tuple[Aggregator, list[ReadStats]]:
    """Aggregate several files in up to ``jobs`` worker processes, each file read whole (and
    decompressed) by one worker: the rotated files of an exporter. The same result as one
    process reading their concatenation; the stats of each file, in order."""
    workers_n = max(1, min(jobs, len(paths)))
    context: Any = multiprocessing.get_context("fork" if hasattr(os, "fork") else "spawn")
    inbox, outbox = context.Queue(), context.Queue()
    # The biggest files first (by their size once decompressed), each to whichever worker is
    # free: the work evens out whatever mix of sizes and compression.
    for index in sorted(range(len(paths)), key=lambda i: -_content_size(paths[i])):
        inbox.put(index)
    for _ in range(workers_n):
        inbox.put(None)
    workers = _started(
        context,
        _files_worker,
        [(list(paths), options, inbox, outbox, os.getpid()) for _ in range(workers_n)],
    )
    aggregator = Aggregator(options)
    per_file: list[ReadStats | None] = [None] * len(paths)
    position = lines = finished = 0
    failed = True
    try:
        while finished < len(workers):
            status, payload, extra = _next_reply(outbox, cancel)
            if status == "read":
                position += payload
                lines += extra
                if watch is not None:
                    watch.read(position, lines)
            elif status == "file":
                per_file[payload] = extra
                if watch is not None:
                    for line, why in extra.malformed_examples:
                        watch.malformed(line, why, paths[payload])
            elif status == "ok":
                aggregator.absorb(payload, own=True)  # unpickled here: nothing else holds it
                finished += 1
            elif status == "source":
                raise SourceError(payload)
            else:
                raise RuntimeError(f"a replay worker failed:\n{payload}")
        failed = False
    finally:
        _stop(workers, [inbox, outbox], failed)
    return aggregator, [stats or ReadStats() for stats in per_file]


def _content_size(path: str) -> int:
    """A file's size, for gzip the size of its content (the ISIZE trailer, mod 4 GiB)."""
    if is_url(path):
        return source_size(path)
    size = os.path.getsize(path)
    try:
        with open(path, "rb") as handle:
            if handle.read(2) == b"\x1f\x8b" and size >= 18:
                handle.seek(-4, os.SEEK_END)
                return max(size, int.from_bytes(handle.read(4), "little"))
    except OSError:
        pass
    return size


# --- fan out the output stage --------------------------------------------------------------

_FORKED: tuple[Callable[[Any], Any], Sequence[Any]] | None = None


def _run_forked(indices: list[int]) -> list[Any]:
    assert _FORKED is not None
    func, items = _FORKED
    gc.disable()
    return [func(items[i]) for i in indices]


FORK_MIN_ITEMS = 64  # fewer items are cheaper to do in-process


def map_forked(func: Callable[[T], R], items: Sequence[T], jobs: int) -> list[R]:
    """``[func(item) for item in items]`` in ``jobs`` forked processes that inherit ``items``
    (nothing is pickled on the way in; results come back pickled). Inline when forking is
    not worth it or not possible."""
    global _FORKED
    if jobs <= 1 or len(items) < FORK_MIN_ITEMS or not hasattr(os, "fork"):
        return [func(item) for item in items]
    groups = [list(range(w, len(items), jobs)) for w in range(jobs)]
    _FORKED = (func, items)
    try:
        with sigint_blocked():
            pool = multiprocessing.get_context("fork").Pool(
                jobs, initializer=die_with_parent, initargs=(os.getpid(),)
            )
        with pool:
            parts = pool.map(_run_forked, groups)
    finally:
        _FORKED = None
    out: list[Any] = [None] * len(items)
    for group, part in zip(groups, parts, strict=True):
        for index, value in zip(group, part, strict=True):
            out[index] = value
    return out
