"""Flow sources over files: a path, ``-`` for stdin, gzip detected by its magic bytes.

Lines are read one at a time (memory stays bounded whatever the file size); a line that is
not a Hubble record is counted with its line number and never stops the run.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import BinaryIO

import attrs
import orjson

from cpg_core.errors import FlowParseError
from cpg_core.flow import Flow, LostEvents, OtherRecord
from cpg_core.parse import FlowParser

GZIP_MAGIC = b"\x1f\x8b"
MAX_LINE_BYTES = 16 * 1024 * 1024
MAX_REPORTED = 10


class SourceError(Exception):
    """The input could not be read; the message names it and says what to do."""


@attrs.define
class ReadStats:
    lines_read: int = 0
    blank_lines: int = 0
    malformed: int = 0
    malformed_examples: list[tuple[int, str]] = attrs.Factory(list)
    """The first few malformed lines: (line number, what is wrong)."""
    lost_events: int = 0
    other_records: int = 0
    truncated: str = ""
    """Why reading stopped early, or "" when the input was read to its end."""

    @property
    def malformed_lines(self) -> list[int]:
        return [line for line, _ in self.malformed_examples]


def describe_source(path: str) -> str:
    return "standard input" if path == "-" else path


@contextlib.contextmanager
def open_flow_stream(path: str) -> Iterator[BinaryIO]:
    """Open a capture for binary line reading, unwrapping gzip whatever the file is called."""
    if path == "-":
        raw: BinaryIO = sys.stdin.buffer
        owned = False
    else:
        try:
            raw = open(path, "rb")  # noqa: SIM115 - closed below
        except FileNotFoundError:
            raise SourceError(
                f"{path}: no such file; pass a capture written by "
                "'hubble observe -o jsonpb', or - to read standard input"
            ) from None
        except IsADirectoryError:
            raise SourceError(f"{path}: is a directory; pass a capture file") from None
        except PermissionError:
            raise SourceError(f"{path}: permission denied; check the file's permissions") from None
        owned = True
    try:
        buffered = raw if isinstance(raw, io.BufferedReader) else io.BufferedReader(raw)  # type: ignore[type-var]
        head = buffered.peek(2)[:2]
        stream: BinaryIO = gzip.GzipFile(fileobj=buffered) if head == GZIP_MAGIC else buffered  # type: ignore[assignment]
        yield stream
    finally:
        if owned:
            raw.close()


def is_gzip(stream: BinaryIO) -> bool:
    """Whether :func:`open_flow_stream` unwrapped gzip for this stream."""
    return isinstance(stream, gzip.GzipFile)


def read_records(
    stream: BinaryIO, stats: ReadStats, parser: FlowParser | None = None
) -> Iterator[Flow]:
    """Yield the flows of a JSON-lines stream, updating ``stats`` as it goes."""
    parser = parser or FlowParser()
    batch: list[bytes] = []
    first = 1
    for line in _lines(stream, stats):
        batch.append(line)
        if len(batch) >= 1024:
            yield from parse_lines(batch, first, stats, parser)
            first += len(batch)
            batch = []
    yield from parse_lines(batch, first, stats, parser)


def _lines(stream: BinaryIO, stats: ReadStats) -> Iterator[bytes]:
    readline = stream.readline
    number = 0
    while True:
        try:
            line = readline(MAX_LINE_BYTES + 1)
        except (EOFError, OSError, gzip.BadGzipFile) as exc:  # truncated or corrupt gzip
            stats.truncated = f"input ended early after line {number}: {exc}"
            return
        if not line:
            return
        number += 1
        if len(line) > MAX_LINE_BYTES and not line.endswith(b"\n"):
            while line and not line.endswith(b"\n"):  # skip the rest of the oversized line
                line = readline(MAX_LINE_BYTES)
            yield _OVERSIZED
            continue
        yield line


_OVERSIZED = b"\x00oversized"  # stands for a line too long to keep; never valid JSON


def parse_lines(
    lines: Iterable[bytes], first_line: int, stats: ReadStats, parser: FlowParser | None = None
) -> list[Flow]:
    """The flows of JSON lines numbered from ``first_line``; everything else is counted."""
    flows: list[Flow] = []
    feed_lines(lines, first_line, stats, parser or FlowParser(), flows.append)
    return flows


def feed_lines(
    lines: Iterable[bytes],
    first_line: int,
    stats: ReadStats,
    parser: FlowParser,
    sink: Callable[[Flow], object],
) -> None:
    """Parse JSON lines numbered from ``first_line`` and hand each flow to ``sink``."""
    parse = parser.parse
    loads = orjson.loads
    number = first_line - 1
    for line in lines:
        number += 1
        try:
            record = parse(loads(line))
        except orjson.JSONDecodeError as exc:
            if not line.strip():
                stats.blank_lines += 1
            elif line == _OVERSIZED or len(line) > MAX_LINE_BYTES:
                _malformed(stats, number, f"line longer than {MAX_LINE_BYTES} bytes")
            else:
                _malformed(stats, number, f"not valid JSON ({exc})")
            continue
        except FlowParseError as exc:
            _malformed(stats, number, str(exc))
            continue
        if type(record) is Flow:
            sink(record)
        elif type(record) is LostEvents:
            stats.lost_events += record.count
        elif type(record) is OtherRecord:
            stats.other_records += 1
    stats.lines_read += number - first_line + 1


def iter_chunks(stream: BinaryIO, stats: ReadStats, size: int) -> Iterator[tuple[int, bytes]]:
    """Blocks of whole lines, each with the number of its first line."""
    number = 1
    rest = b""
    while True:
        try:
            block = stream.read(size)
        except (EOFError, OSError, gzip.BadGzipFile) as exc:
            stats.truncated = f"input ended early after line {number - 1}: {exc}"
            block = b""
        if not block:
            if rest:
                yield number, rest
            return
        block = rest + block
        cut = block.rfind(b"\n") + 1
        if cut == 0 and len(block) <= MAX_LINE_BYTES:
            rest = block
            continue
        if cut == 0:
            cut = len(block)  # one oversized line: hand it on to be counted as malformed
        yield number, block[:cut]
        number += block.count(b"\n", 0, cut)
        rest = block[cut:]


def merge_stats(total: ReadStats, part: ReadStats) -> None:
    total.lines_read += part.lines_read
    total.blank_lines += part.blank_lines
    total.malformed += part.malformed
    total.lost_events += part.lost_events
    total.other_records += part.other_records
    examples = sorted(total.malformed_examples + part.malformed_examples)
    total.malformed_examples = examples[:MAX_REPORTED]


def _malformed(stats: ReadStats, number: int, why: str) -> None:
    stats.malformed += 1
    if len(stats.malformed_examples) < MAX_REPORTED:
        stats.malformed_examples.append((number, why))
