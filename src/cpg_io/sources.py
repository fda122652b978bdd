"""Flow sources over files: a path, ``-`` for stdin, gzip detected by its magic bytes.

Lines are read one at a time (memory stays bounded whatever the file size); a line that is
not a Hubble record is counted with its line number and never stops the run.
"""

from __future__ import annotations

import contextlib
import glob
import gzip
import io
import os
import re
import stat
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, BinaryIO

from cpg_core import Flow, FlowParser, ReadStats, Setting, feed_lines
from cpg_core.reading import (
    CAPTURE_HINT,
    MAX_LINE_BYTES,
    OVERSIZED,
    describe_unreadable,
    merge_stats,
    parse_lines,
    time_key,
)
from cpg_io.errors import Cancelled, SourceError, UnreadableInput
from cpg_io.json_documents import as_json_lines
from cpg_io.progress import ReviewTally
from cpg_io.remote import expand_url, is_url, open_raw, shown, size_of

if TYPE_CHECKING:
    from cpg_core.identities import IdentityBook

GZIP_MAGIC = b"\x1f\x8b"


SNIFF_BYTES = 4096


def check_readable(source: str, stats: ReadStats, head: bytes, max_malformed: float) -> None:
    """UnreadableInput when a non-empty input held no Hubble record at all (saying what it
    looks like instead), or when more than ``max_malformed`` percent of its lines are not
    Hubble records."""
    content = stats.lines_read - stats.blank_lines
    if content <= 0:
        return
    records = content - stats.malformed
    if records <= 0:
        raise UnreadableInput(
            f"{source}: not a single Hubble flow record in it: it looks like "
            f"{describe_unreadable(head)}; {CAPTURE_HINT}"
        )
    share = 100.0 * stats.malformed / content
    if share > max_malformed:
        raise UnreadableInput(
            f"{source}: {stats.malformed} of {content} lines ({share:.1f} %) are not Hubble "
            "records, more than ",
            Setting("max_malformed"),
            f" {max_malformed:g} %; nothing was written. To use the rest anyway, raise ",
            Setting("max_malformed"),
            f"; else {CAPTURE_HINT}",
        )


class CaptureFlows:
    """The flows of several inputs read one after the other (verify, plan), with their
    counts and the first bytes of each (for saying what an unreadable input looks like)."""

    def __init__(
        self,
        inputs: Sequence[str],
        cancel: threading.Event | None = None,
        keep: Callable[[Flow], bool] | None = None,
        identities: IdentityBook | None = None,
        tally: ReviewTally | None = None,
    ) -> None:
        self.files = expand_inputs(list(inputs))
        self.tally = tally
        """When given, it sees the counts while the capture is read, and the reading end."""
        self.keep = keep
        self.identities = identities if identities is not None and not identities.empty else None
        """When given, each flow's sides Hubble left without identity are filled in first."""
        self.resolved: Counter[str] = Counter()
        """What the identities filled in, by kind."""
        """When given, only the flows it keeps are yielded (the Hubble-style filters)."""
        self.stats = ReadStats()
        self._heads: list[bytes] = []
        self.cancel = cancel
        """Set, it stops the reading (Cancelled) at the next batch of lines."""

    def __iter__(self) -> Iterator[Flow]:
        parser = FlowParser()
        if self.tally is not None:
            self.tally.stats, self.tally.phase = self.stats, "reading"
        for path in self.files:
            with open_flow_stream(path) as stream:
                self._heads.append(peek(stream, SNIFF_BYTES))
                flows = read_records(stream, self.stats, parser, self.cancel)
                if self.identities is not None:
                    flows = self._resolving(flows, self.identities)
                yield from flows if self.keep is None else filter(self.keep, flows)
        if self.tally is not None:
            self.tally.phase = "judging"

    def _resolving(self, flows: Iterator[Flow], book: IdentityBook) -> Iterator[Flow]:
        for flow in flows:
            resolved, kinds = book.resolve(flow)
            if kinds:
                self.resolved.update(kinds)
            yield resolved

    def check_readable(self) -> None:
        """UnreadableInput when, read to the end, the inputs held no Hubble record."""
        head = next((h for h in self._heads if h.strip()), b"")
        label = (
            describe_source(self.files[0])
            if len(self.files) == 1
            else f"{len(self.files)} input files"
        )
        check_readable(label, self.stats, head, 100.0)


def describe_source(path: str) -> str:
    if path == "-":
        return "standard input"

    return shown(path) if is_url(path) else path


def merge_file_stats(total: ReadStats, part: ReadStats, label: str | None) -> None:
    """Add one input's counts to the run's. With several inputs, ``label`` names the input in
    its malformed lines and in how it ended early."""
    if label is not None:
        part.malformed_examples = [
            (line, f"{label}: {why}") for line, why in part.malformed_examples
        ]
    merge_stats(total, part)
    if part.truncated and not total.truncated:
        total.truncated = part.truncated if label is None else f"{label}: {part.truncated}"


def local_path(source: str) -> str:
    """The file system path of an input named by a path or a ``file://`` URL."""
    return source[len("file://") :] or "/" if source.startswith("file://") else source


def source_size(path: str) -> int:
    """The size of an input file or object (compressed, for gzip); SourceError naming a
    file that is not there (one missing among many is one line, not a traceback)."""
    if is_url(path):
        return size_of(path)
    try:
        return os.path.getsize(path)
    except FileNotFoundError:
        raise _no_such_file(path) from None
    except OSError as exc:
        raise SourceError(f"{path}: cannot open it ({exc.strerror or exc})") from None


def _no_such_file(path: str) -> SourceError:
    return SourceError(
        f"{path}: no such file; pass a capture written by 'hubble observe -o jsonpb', or - to "
        "read standard input"
    )


_GLOB_CHARS = frozenset("*?[")


def expand_inputs(inputs: Sequence[str]) -> list[str]:
    """The files to read for the inputs as given: a file, ``-`` (standard input, alone), a
    folder (every regular file directly inside it, by name: an exporter's rotated
    ``events.log*``) or a glob pattern. Each file once, in that order; SourceError naming an
    input that gives nothing."""
    if "-" in inputs and len(inputs) > 1:
        raise SourceError(
            "- (standard input) cannot be combined with files; give only -, or only files"
        )

    files: list[str] = []
    seen: set[str] = set()
    for given in inputs:
        found: list[str]
        if given == "-":
            found = ["-"]
        elif given.startswith("file://"):  # a local file by URL: expanded as a path is
            found = [f"file://{path}" for path in expand_inputs([given[7:] or "/"])]
        elif is_url(given):
            found = expand_url(given)
        elif os.path.isdir(given):
            found = sorted(
                os.path.join(given, name)
                for name in os.listdir(given)
                if not name.startswith(".") and os.path.isfile(os.path.join(given, name))
            )
            if not found:
                raise SourceError(f"{given}: no files in this folder; give the folder of captures")
        elif not os.path.lexists(given) and _GLOB_CHARS & set(given):
            found = sorted(path for path in glob.glob(given) if os.path.isfile(path))
            if not found:
                raise SourceError(f"{given}: matches no file; check the pattern")
        else:
            found = [given]  # a missing file is named when it is opened
        for path in found:
            key = path if path == "-" or is_url(path) else os.path.realpath(path)
            if key not in seen:
                seen.add(key)
                files.append(path)
    return files


@contextlib.contextmanager
def open_flow_stream(path: str) -> Iterator[BinaryIO]:
    """Open a capture for binary line reading, unwrapping gzip whatever the file is called.
    A URL is opened through its storage library (see cpg_io.remote)."""

    raw: BinaryIO
    if is_url(path):
        raw = open_raw(path)
        owned = True
    elif path == "-":
        if sys.stdin is None or getattr(sys.stdin, "buffer", None) is None:
            raise SourceError(
                "standard input is closed; pipe a capture into cpg (hubble observe -o jsonpb | "
                "cpg replay -) or give a file"
            )
        raw = sys.stdin.buffer
        owned = False
    else:
        try:
            raw = open(path, "rb")  # noqa: SIM115 - closed below
        except FileNotFoundError:
            raise _no_such_file(path) from None
        except IsADirectoryError:
            raise SourceError(f"{path}: is a directory; pass a capture file") from None
        except PermissionError:
            raise SourceError(f"{path}: permission denied; check the file's permissions") from None
        except OSError as exc:
            raise SourceError(f"{path}: cannot open it ({exc.strerror or exc})") from None
        owned = True
    try:
        buffered = raw if isinstance(raw, io.BufferedReader) else io.BufferedReader(raw)  # type: ignore[type-var]
        head = buffered.peek(2)[:2]
        stream: BinaryIO = gzip.GzipFile(fileobj=buffered) if head == GZIP_MAGIC else buffered  # type: ignore[assignment]
        yield as_json_lines(stream, peek(stream, SNIFF_BYTES)) or stream
    finally:
        if owned:
            raw.close()


def is_regular_file(stream: BinaryIO) -> bool:
    """Whether ``stream`` reads a regular file (which another process may open and seek)."""
    try:
        return stat.S_ISREG(os.fstat(stream.fileno()).st_mode)
    except (OSError, ValueError, io.UnsupportedOperation):
        return False


def input_size(stream: BinaryIO) -> tuple[int | None, Callable[[], int] | None]:
    """The size of the file under ``stream`` (compressed, for gzip) and a function giving
    how far into it reading got; (None, None) for a pipe or anything without a size."""
    raw = stream.fileobj if isinstance(stream, gzip.GzipFile) else stream
    if raw is None or not is_regular_file(raw):
        return None, None
    try:
        size = os.fstat(raw.fileno()).st_size
        raw.tell()
    except (OSError, ValueError, io.UnsupportedOperation):
        return None, None
    return size, raw.tell


def peek(stream: BinaryIO, size: int) -> bytes:
    """Up to ``size`` bytes from the start of ``stream`` without consuming them (for saying
    what an unreadable input looks like); b"" when they cannot be had."""
    try:
        head = stream.peek(size)  # type: ignore[attr-defined]
    except (AttributeError, OSError, EOFError, gzip.BadGzipFile):
        return b""
    return bytes(head[:size])


_TIME_FIELD = re.compile(rb'"time":\s*"([^"]{1,64})"')


def newest_time(files: Sequence[str]) -> str | None:
    """The newest flow time in the files, as a time key (None when no line has one): what a
    ``--since 2h`` counts back from. A quick scan for the ``time`` fields, without parsing."""
    newest = ""
    for path in files:
        if path == "-":
            raise SourceError(
                "a ",
                Setting("since"),
                "/",
                Setting("until"),
                " duration counts back from the newest flow, which standard input cannot be "
                "read twice to find; give a file, or an RFC 3339 time",
            )
        with open_flow_stream(path) as stream:
            for _first, block in iter_chunks(stream, ReadStats(), 4 * 1024 * 1024):
                for raw in set(_TIME_FIELD.findall(block)):
                    key = time_key(raw.decode("utf-8", "replace"))
                    if key > newest:
                        newest = key
    return newest or None


def is_gzip(stream: BinaryIO) -> bool:
    """Whether :func:`open_flow_stream` unwrapped gzip for this stream."""
    return isinstance(stream, gzip.GzipFile)


def read_records(
    stream: BinaryIO,
    stats: ReadStats,
    parser: FlowParser | None = None,
    cancel: threading.Event | None = None,
) -> Iterator[Flow]:
    """Yield the flows of a JSON-lines stream, updating ``stats`` as it goes; Cancelled at
    the next batch once ``cancel`` is set."""
    parser = parser or FlowParser()
    batch: list[bytes] = []
    first = 1
    for line in _lines(stream, stats):
        batch.append(line)
        if len(batch) >= 1024:
            if cancel is not None and cancel.is_set():
                raise Cancelled("the reading was cancelled")
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
            yield OVERSIZED
            continue
        yield line


def _read_block(stream: BinaryIO, size: int) -> tuple[bytes, BaseException | None]:
    """Up to ``size`` bytes, and the error that ended the input early, if one did. Read in
    pieces (``read1``) so that a truncated gzip loses only what it really lost, never the
    whole block it was decompressing."""
    read1 = getattr(stream, "read1", None) or stream.read
    pieces: list[bytes] = []
    have = 0
    while have < size:
        try:
            piece = read1(size - have)
        except (EOFError, OSError, gzip.BadGzipFile) as exc:
            return b"".join(pieces), exc
        if not piece:
            break
        pieces.append(piece)
        have += len(piece)
    return b"".join(pieces), None


def iter_chunks(stream: BinaryIO, stats: ReadStats, size: int) -> Iterator[tuple[int, bytes]]:
    """Blocks of whole lines, each with the number of its first line. When the input ends
    early (a truncated gzip), every complete line before that point is still yielded, and the
    cut-off line is reported in ``stats.truncated``."""
    number = 1
    rest = b""
    while True:
        block, error = _read_block(stream, size)
        if error is not None:
            block = rest + block
            cut = block.rfind(b"\n") + 1
            if cut:
                yield number, block[:cut]
                number += block.count(b"\n", 0, cut)
            lost = (
                f" (an incomplete line of {len(block) - cut} bytes dropped)" if block[cut:] else ""
            )
            stats.truncated = f"input ended early after line {number - 1}{lost}: {error}"
            return
        if not block:
            if rest:
                yield number, rest
            return
        cut = block.rfind(b"\n") + 1
        if cut == 0:
            block = rest + block
            if len(block) <= MAX_LINE_BYTES:
                rest = block
                continue
            cut = len(block)  # one oversized line: hand it on to be counted as malformed
            whole, rest = block, b""
        else:
            # One copy of the block: the carried-over line start and the whole lines.
            whole = b"".join((rest, memoryview(block)[:cut])) if rest else block[:cut]
            rest = block[cut:]
        yield number, whole
        number += whole.count(b"\n")


def iter_line_batches(
    stream: BinaryIO, stats: ReadStats, size: int
) -> Iterator[tuple[int, list[bytes]]]:
    """The lines of the input in batches of about ``size`` bytes, each with the number of its
    first line: :func:`iter_chunks` for reading in this process, without copying each block
    whole once more to cut it at a line end. A line longer than MAX_LINE_BYTES becomes one
    OVERSIZED line (its bytes are dropped as they come); a truncated input ends as
    :func:`iter_chunks` says."""
    number = 1
    rest = b""
    oversized = False  # inside a line too long to keep: drop bytes up to its end
    while True:
        block, error = _read_block(stream, size)
        if not block and error is None:
            if oversized or rest:
                yield number, [OVERSIZED if oversized else rest]
            return
        lines = block.split(b"\n")
        if oversized:
            if len(lines) == 1:
                lines = []  # still the same long line
            else:
                lines[0] = OVERSIZED
                oversized = False
        elif rest:
            lines[0] = rest + lines[0]
        rest = lines.pop() if lines else b""
        if len(rest) > MAX_LINE_BYTES:
            oversized, rest = True, b""
        if error is not None:
            if lines:
                yield number, lines
                number += len(lines)
            lost = f" (an incomplete line of {len(rest)} bytes dropped)" if rest else ""
            stats.truncated = f"input ended early after line {number - 1}{lost}: {error}"
            return
        if lines:
            yield number, lines
            number += len(lines)


__all__ = [
    "MAX_LINE_BYTES",
    "ReadStats",
    "SourceError",
    "describe_source",
    "feed_lines",
    "merge_stats",
    "open_flow_stream",
    "parse_lines",
    "read_records",
]
