"""JSON lines to flows: each line decoded and parsed on its own, so a bad line is counted with
its number and never stops a run. Pure: lines in, flows and counts out (reading the lines is
the caller's business)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

import attrs
import orjson

from cpg_core._base.errors import FlowParseError
from cpg_core._base.flow import Flow, LostEvents, OtherRecord
from cpg_core._flows.decide import Decision
from cpg_core._flows.numbers import QuickKey
from cpg_core._flows.parse import FlowParser
from cpg_core._flows.quickline import QuickReader
from cpg_core._flows.synthesis import Resolver
from cpg_core._synthesis.aggregate import AggregateOptions, Aggregator

MAX_LINE_BYTES = 16 * 1024 * 1024
MAX_REPORTED = 10


@attrs.define
class ReadStats:
    """What reading a capture met: lines read, blank and malformed lines (with the first
    few, by number), lost events and other records."""

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


OVERSIZED = b"\x00oversized"  # stands for a line too long to keep; never valid JSON


def parse_lines(
    lines: Iterable[bytes], first_line: int, stats: ReadStats, parser: FlowParser | None = None
) -> list[Flow]:
    """The flows of JSON lines numbered from ``first_line``; everything else is counted."""
    flows: list[Flow] = []
    feed_lines(lines, first_line, stats, parser or FlowParser(), flows.append)
    return flows


def feed_lines(
    lines: Iterable[str | bytes],
    first_line: int,
    stats: ReadStats,
    parser: FlowParser,
    sink: Callable[[Flow], object],
    known: Callable[[QuickKey, str, Any], bool] | None = None,
    context: Callable[[Decision, str], bool] | None = None,
    reader: QuickReader | None = None,
) -> None:
    """Parse JSON lines numbered from ``first_line`` and hand each flow to ``sink``.

    With ``known`` (:meth:`Aggregator.add_line`), ``context`` (:meth:`Aggregator.add_context`)
    and ``reader``, a line of the commonest shapes is offered to them first: by its quick key,
    with the line itself as the unparsed sample, or by its decision. Any other line goes to
    ``sink`` as its Flow: built by the reader from what it decoded when it can, else parsed
    (orjson and ``parser``). When few of the first lines of a batch decode the reader's way
    (another kind of capture), the rest of the batch does not try it."""
    parse = parser.parse
    loads = orjson.loads
    read = None
    flow_of: Callable[[bytes | str], Flow | None] = _no_flow
    add_line: Callable[[QuickKey, str, Any], bool] = _declined
    add_context: Callable[[Decision, str], bool] = _declined
    if reader is not None and known is not None and context is not None:
        read, flow_of, add_line, add_context = reader.read, reader.flow, known, context
    tried = taken = 0
    number = first_line - 1
    for line in lines:
        number += 1
        if len(line) > MAX_LINE_BYTES:  # the same limit whoever cut the lines
            _malformed(stats, number, f"line longer than {MAX_LINE_BYTES} bytes")
            continue
        if read is not None:
            tried += 1
            if tried == QUICK_PROBE_LINES and taken < QUICK_PROBE_LINES // 4:
                read = None
            else:
                found = read(line)
                if found is not None:
                    taken += 1
                    if type(found) is Flow:  # decoded, of another kind: its flow
                        sink(found)
                        continue
                    what, time = found  # type: ignore[misc]
                    if (
                        add_line(what, time, line)
                        if isinstance(what, tuple)
                        else add_context(what, time)
                    ):
                        continue
                    flow = flow_of(line)  # an entry's first flow, or a tie
                    if flow is not None:
                        sink(flow)
                        continue
        try:
            record = parse(loads(line))
        except orjson.JSONDecodeError as exc:
            recovered = _not_json(line, number, exc, stats, parser)
            if recovered is None:
                continue
            record = recovered
        except FlowParseError as exc:
            _malformed(stats, number, str(exc))
            continue
        if type(record) is Flow:
            sink(record)
        else:
            _count_record(record, stats)
    stats.lines_read += number - first_line + 1


def _count_record(record: object, stats: ReadStats) -> None:
    """A record that is no flow: counted."""
    if type(record) is LostEvents:
        stats.lost_events += record.count
    elif type(record) is OtherRecord:
        stats.other_records += 1


def _not_json(
    line: str | bytes, number: int, error: Exception, stats: ReadStats, parser: FlowParser
) -> Flow | LostEvents | OtherRecord | None:
    """A line that is no JSON: blank, too long, or a container log line around a flow (its
    record then); None when it is counted here."""
    if not line.strip():
        stats.blank_lines += 1
        return None
    if line == OVERSIZED:
        _malformed(stats, number, f"line longer than {MAX_LINE_BYTES} bytes")
        return None
    try:
        return parser.parse(orjson.loads(_container_log_payload(line)))
    except (orjson.JSONDecodeError, _NotContainerLog):
        _malformed(stats, number, f"not valid JSON ({error})")
    except FlowParseError as inner:
        _malformed(stats, number, str(inner))
    return None


def _declined(*_: object) -> bool:
    return False


def _no_flow(_: object) -> Flow | None:
    return None


QUICK_PROBE_LINES = 256
"""Lines of each batch after which the quick way is given up unless a quarter of them took it."""


def aggregate_lines(
    lines: Iterable[str | bytes],
    first_line: int,
    stats: ReadStats,
    parser: FlowParser,
    aggregator: Aggregator,
    reader: QuickReader | None = None,
) -> None:
    """Add the flows of JSON lines to ``aggregator``. With a ``reader``, a line that only
    counts towards an allow entry seen before is counted from its key, and parsed into a Flow
    later only if it is still one of the entry's samples when they are read."""
    if reader is not None:
        aggregator.read_quick_keys(reader.entry_key, flow_of_line)
    feed_lines(
        lines,
        first_line,
        stats,
        parser,
        aggregator.add,
        aggregator.add_line,
        aggregator.add_context,
        reader,
    )


class Readers:
    """A parser, a quick reader and a resolver that belong together. Their caches depend only
    on endpoints, so aggregators that follow one another (a Dask worker's tasks) may share
    them."""

    __slots__ = ("parser", "quick", "resolver")

    def __init__(self) -> None:
        self.parser = FlowParser()
        self.quick = QuickReader(self.parser)
        self.resolver = Resolver()


class LineAggregator:
    """The hot path in one call: JSON lines in, an :class:`Aggregator` of their flows out.
    Every engine (in-process, forked workers, Dask tasks) and :func:`generate` feed lines
    through this, so the assembly of parser, quick reader and aggregator is written once."""

    __slots__ = ("aggregator", "readers")

    def __init__(self, options: AggregateOptions, readers: Readers | None = None) -> None:
        self.readers = readers or Readers()
        self.aggregator = Aggregator(options, self.readers.resolver)

    def feed(self, lines: Iterable[str | bytes], first_line: int, stats: ReadStats) -> None:
        """Add the flows of ``lines`` (numbered from ``first_line``); bad lines are counted
        in ``stats`` with their numbers."""
        readers = self.readers
        aggregate_lines(lines, first_line, stats, readers.parser, self.aggregator, readers.quick)


_SAMPLE_PARSER = FlowParser()
_SAMPLE_READER = QuickReader(_SAMPLE_PARSER)


def flow_of_line(line: str | bytes) -> Flow:
    """The flow of a JSON line :meth:`QuickReader.read` gave a key for."""
    flow = _SAMPLE_READER.flow(line)
    if flow is not None:
        return flow
    record = _SAMPLE_PARSER.parse(orjson.loads(line))
    if type(record) is not Flow:
        raise FlowParseError(f"expected a flow record, got a {type(record).__name__} record")
    return record


class _NotContainerLog(Exception):
    pass


_CONTAINER_LOG = re.compile(rb"^\S+ (?:stdout|stderr) [FP] (?=\{)")


def _container_log_payload(line: str | bytes) -> bytes:
    """The JSON of a line a log shipper kept in the CRI container-log format
    (``2026-11-02T10:00:00.1Z stdout F {...}``), as Hubble's exporter lines often arrive
    through fluent-bit or Loki."""
    raw = line.encode() if isinstance(line, str) else line
    found = _CONTAINER_LOG.match(raw)
    if found is None:
        raise _NotContainerLog
    return raw[found.end() :]


def _malformed(stats: ReadStats, number: int, why: str) -> None:
    stats.malformed += 1
    if len(stats.malformed_examples) < MAX_REPORTED:
        stats.malformed_examples.append((number, why))


def merge_stats(total: ReadStats, part: ReadStats) -> None:
    total.lines_read += part.lines_read
    total.blank_lines += part.blank_lines
    total.malformed += part.malformed
    total.lost_events += part.lost_events
    total.other_records += part.other_records
    examples = sorted(total.malformed_examples + part.malformed_examples)
    total.malformed_examples = examples[:MAX_REPORTED]
