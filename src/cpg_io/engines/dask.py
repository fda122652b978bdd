"""Replay on a Dask cluster (``cpg replay --engine dask``): the workers read their files and
byte ranges straight from storage and aggregate them, and this process merges what they
gathered; its output stage is unchanged.

Each worker thread keeps one warm aggregator per run across the tasks it runs (an allow
entry's first flow takes the slow path once per worker, not once per part), and a task hands
back only a receipt. When every part is done, each worker hands over what it gathered,
labelled with the parts in it, and forgets it. A part is counted exactly once: a worker
thread that runs a part again (Dask computes lost results again) does not add it twice; a
worker that dies takes its parts with it, and those parts run again; a part two workers
both hold stops the run rather than count twice. Each round of reading gathers under
its own key, so a lost task Dask runs again after its round was collected is never mistaken
for a second reading. Line numbers of malformed lines are made
absolute here, from each part's line count, exactly as a local run numbers them.

With warm workers small parts cost little, so the default part size gives each worker
thread about 16 parts; the cycle collector is off while a part is read, as in a local
worker (the aggregate only grows and has no cycles). ``local:N`` starts a cluster of cpg's
own for one run and forks its workers from this process (ARCHITECTURE §D36): a spawned
worker imports dask and cpg again and its nanny takes longer to stop, which was most of
the second a local cluster added. Forking is safe here because the cluster is short-lived
and cpg's alone: the command's other threads at that moment (the input digests, Dask's own
loop) hold no lock a worker takes. A cluster at an address is never touched.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Sequence
from typing import Any

import attrs

from cpg_core import AggregateOptions, AggregateState, Aggregator, Setting
from cpg_core.reading import MAX_LINE_BYTES, OVERSIZED, LineAggregator, Readers, merge_stats
from cpg_io.engines.job import ReadJob
from cpg_io.engines.local import first_bytes
from cpg_io.engines.workers import CHUNK_BYTES, collector_paused, lines_of
from cpg_io.errors import Cancelled, EngineError, MissingDask
from cpg_io.json_documents import document_kind
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
PARTS_PER_THREAD = 16
"""Without --part-size, parts are made smaller (down to MIN_RANGE_BYTES) until each worker
thread gets about this many: a warm worker reads another part for little more than its
lines, and small last parts keep the workers busy until the end."""
MIN_RANGE_BYTES = 4 * 1024 * 1024
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
    """Several parts' mergeable result: what one worker thread gathered in a run."""

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


@attrs.frozen
class Receipt:
    """What a task hands back: the part it read and how much (for progress)."""

    part: tuple[int, int]
    size: int
    lines: int
    flows: int


@attrs.define
class _Gathering:
    """One run's warm state in one worker thread."""

    feeder: LineAggregator
    partial: Partial
    receipts: dict[tuple[int, int], Receipt] = attrs.Factory(dict)
    touched: float = 0.0
    lock: threading.Lock = attrs.Factory(threading.Lock)
    """Held while a part is read into it, and while it is handed over."""


_RUNS: dict[tuple[str, int], _Gathering] = {}
"""(run id, thread) -> what that worker thread gathered for the run, until collected."""
_RUNS_LOCK = threading.Lock()
_FORGET_AFTER = 6 * 3600.0
"""Seconds after which a run nobody collected (its client died) is dropped from a worker."""

_warm = threading.local()


def _readers() -> Readers:
    """This worker thread's readers: their caches (what depends only on an endpoint) are
    pure, so every run and task of a worker thread shares them."""
    readers: Readers | None = getattr(_warm, "readers", None)
    if readers is None:
        readers = _warm.readers = Readers()
    return readers


def _gathering(run: str, options: AggregateOptions) -> _Gathering:
    key = (run, threading.get_ident())
    now = time.monotonic()
    with _RUNS_LOCK:
        for stale in [k for k, g in _RUNS.items() if now - g.touched > _FORGET_AFTER]:
            del _RUNS[stale]
        found = _RUNS.get(key)
        if found is None:
            feeder = LineAggregator(options, _readers())
            partial = Partial(state=feeder.aggregator.state(), stats=ReadStats(), parts={})
            found = _RUNS[key] = _Gathering(feeder, partial)
        found.touched = now
        return found


def replay_part(part: Part, options: AggregateOptions, run: str) -> Receipt:
    """One task: read a part from storage into this worker thread's aggregator of ``run``
    (runs on a Dask worker). A part this thread already read is not read again."""
    gathering = _gathering(run, options)
    with gathering.lock:
        return _read_into(gathering, part)


def _read_into(gathering: _Gathering, part: Part) -> Receipt:
    key = (part.file, part.index)
    done = gathering.receipts.get(key)
    if done is not None:
        return done
    feeder = gathering.feeder
    before = feeder.aggregator.total_flows
    stats = ReadStats()
    with collector_paused():  # as in a local worker
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
    partial = gathering.partial
    merge_stats(partial.stats, stats)
    partial.parts[key] = (stats.lines_read, examples, truncated)
    flows = feeder.aggregator.total_flows - before
    partial.flows += flows
    partial.size += size
    receipt = gathering.receipts[key] = Receipt(key, size, stats.lines_read, flows)
    return receipt


def collect(run: str) -> list[Partial]:
    """What this worker's threads gathered for ``run``, handed over once and forgotten (runs
    on every worker through ``Client.run``)."""
    with _RUNS_LOCK:
        mine = [key for key in _RUNS if key[0] == run]
        gatherings = [_RUNS.pop(key) for key in mine]
    out = []
    for gathering in gatherings:
        with gathering.lock:  # a task still reading into it finishes first
            partial = gathering.partial
            # It crosses the network: samples go parsed (a third of the bytes of a line).
            partial.state = gathering.feeder.aggregator.hand_over(parse_samples=True)
        out.append(partial)
    return out


def forget(run: str) -> int:
    """Drop what this worker gathered for ``run`` and each of its rounds (what a cancelled or
    failed run, or a late task of a round already collected, left behind)."""
    with _RUNS_LOCK:
        mine = [key for key in _RUNS if key[0] == run or key[0].startswith(f"{run}.")]
        for key in mine:
            del _RUNS[key]
    return len(mine)


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
            head = raw.read(4096)
        if head[:2] == GZIP_MAGIC or document_kind(head):
            # a gzip stream, or a JSON array or pretty-printed records, cannot be cut into
            # ranges: one task reads it whole, in order
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
        import dask.config

        # The workers' own statistical profiler samples the task thread every 10 ms (and
        # takes the interpreter to do it): nobody looks at it in a cluster started for one run.
        # Its worker processes are forked from this one, which has dask and cpg imported
        # already: a spawned worker imports them again (~0.5 s of the run) and its nanny takes
        # longer to stop.
        settings = {
            "distributed.worker.profile.enabled": False,
            "distributed.worker.multiprocessing-method": "fork",
        }
        with dask.config.set(settings):
            cluster = LocalCluster(
                n_workers=int(count),
                threads_per_worker=1,
                processes=True,
                host="127.0.0.1",
                dashboard_address="127.0.0.1:0",  # never a fixed port another run may hold
                silence_logs=logging.CRITICAL,  # a heartbeat that races the close is noise
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


def _part_bytes(client: Any, files: Sequence[str]) -> int:
    """The range size when none was given: RANGE_BYTES, or less so that every worker thread
    of the cluster gets about PARTS_PER_THREAD parts."""
    threads = max(1, sum(int(n) for n in client.nthreads().values()))
    total = sum(source_size(url) for url in files)
    wanted = total // (threads * PARTS_PER_THREAD)
    return int(max(MIN_RANGE_BYTES, min(RANGE_BYTES, wanted)))


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
    run = uuid.uuid4().hex
    try:
        _same_cpg(client, scheduler)
        parts = plan_parts(files, range_bytes or _part_bytes(client, files))
        if watch is not None:
            watch.watcher.reading(sum(source_size(url) for url in files))
            watch.watcher.tasks(0, len(parts))
        partials = _read_parts(client, parts, options, run, cancel, watch)
    except (OSError, TimeoutError) as exc:
        raise EngineError(f"the Dask cluster at {scheduler} failed: {exc}") from None
    finally:
        try:
            client.run(forget, run, on_error="ignore")  # what a cancelled task left behind
        except (OSError, TimeoutError):
            pass  # the cluster is gone: so is what it held
        finally:
            client.close()
            if cluster is not None:
                cluster.close()
    aggregator = Aggregator(options)
    numbered: dict[tuple[int, int], tuple[int, list[tuple[int, str]], str]] = {}
    for partial in partials:
        aggregator.absorb(partial.state, own=True)  # unpickled here: nothing else holds it
        merge_stats(stats, partial.stats)
        numbered.update(partial.parts)
    _number_lines(files, numbered, stats)
    return aggregator


_ROUNDS = 3
"""Times the parts lost with dead workers are read again before the run gives up."""


def _read_parts(
    client: Any,
    parts: Sequence[Part],
    options: AggregateOptions,
    run: str,
    cancel: threading.Event | None,
    watch: Reported | None,
) -> list[Partial]:
    """Every part read exactly once, as the partials the workers gathered."""
    from distributed import as_completed

    wanted = {(part.file, part.index): part for part in parts}
    partials: list[Partial] = []
    held: set[tuple[int, int]] = set()
    counted: set[tuple[int, int]] = set()
    size = lines = 0
    todo = list(parts)
    for number in range(_ROUNDS):
        # Each round gathers under its own key: a task of an earlier round that Dask ran
        # again after that round was collected (its worker taken for dead) lands where no
        # later round looks, and is forgotten at the end; its part is read in this round.
        key = f"{run}.{number}"
        futures = [client.submit(replay_part, part, options, key, pure=False) for part in todo]
        for future in as_completed(futures):
            if cancel is not None and cancel.is_set():
                client.cancel(futures)
                raise Cancelled("the run was cancelled")
            receipt: Receipt = future.result()
            if receipt.part not in counted:
                counted.add(receipt.part)
                size, lines = size + receipt.size, lines + receipt.lines
                if watch is not None:
                    watch.read(size, lines)
                    watch.watcher.tasks(len(counted), len(parts))
        client.cancel(futures)  # released: a result lost from now on is not computed again
        # A worker that dies now takes its parts with it: they are read again below.
        for gathered in client.run(collect, key, on_error="ignore").values():
            for partial in gathered:
                twice = held & partial.parts.keys()
                if twice:
                    raise EngineError(
                        f"{len(twice)} part(s) of the input were read by two Dask workers "
                        "(a worker the scheduler took for dead came back); nothing was "
                        "written: run again"
                    )
                held.update(partial.parts)
                partials.append(partial)
        todo = [part for key, part in wanted.items() if key not in held]
        if not todo:
            return partials
        log.warning("%d part(s) were lost with a Dask worker: reading them again", len(todo))
    raise EngineError(
        f"{len(todo)} part(s) of the input were lost with Dask workers {_ROUNDS} times; "
        "check the cluster's workers (memory limits, restarts) and run again"
    )


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
    part_bytes: int | None = None
    """Bytes per range task (None: see PARTS_PER_THREAD)."""
    jobs: int = 1

    def aggregate(self, job: ReadJob) -> tuple[Aggregator, bytes]:
        stats = job.stats
        aggregator = aggregate_on_dask(
            job.files,
            job.options,
            stats,
            self.scheduler,
            cancel=job.cancel,
            watch=job.reported,
            range_bytes=self.part_bytes,
        )
        for line, why in stats.malformed_examples:
            job.reported.malformed(line, why)
        unreadable = stats.lines_read - stats.blank_lines <= stats.malformed
        return aggregator, first_bytes(job.files) if unreadable else b""
