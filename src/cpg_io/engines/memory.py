"""An engine that reads captures from bytes in memory instead of files: the run layer's tests
(and a notebook) replay a capture without touching the disk, through the same line reader,
limits and counts as the file engines."""

from __future__ import annotations

import gzip
import io
from collections.abc import Mapping

import attrs

from cpg_core import Aggregator
from cpg_core.reading import LineAggregator, ReadStats
from cpg_io.engines.job import ReadJob
from cpg_io.errors import Cancelled, SourceError
from cpg_io.sources import GZIP_MAGIC, SNIFF_BYTES, iter_line_batches, merge_file_stats

_BATCH_BYTES = 1 << 20


@attrs.frozen
class InMemory:
    """``captures`` maps each input name a run is given to its bytes (plain or gzip)."""

    captures: Mapping[str, bytes]
    jobs: int = 1

    def aggregate(self, job: ReadJob) -> tuple[Aggregator, bytes]:
        feeder = LineAggregator(job.options)
        head = b""
        job.reported.watcher.reading(sum(len(self._bytes(name)) for name in job.files))
        for name in job.files:
            data = self._bytes(name)
            if data.startswith(GZIP_MAGIC):
                data = gzip.decompress(data)
            head = head or (data[:SNIFF_BYTES] if data.strip() else b"")
            part = ReadStats()
            for first, lines in iter_line_batches(io.BytesIO(data), part, _BATCH_BYTES):
                if job.cancel is not None and job.cancel.is_set():
                    raise Cancelled("the run was cancelled")
                feeder.feed(lines, first, part)
            told = name if job.several else None
            for line, why in part.malformed_examples:
                job.reported.malformed(line, why, told)
            merge_file_stats(job.stats, part, told)
        return feeder.aggregator, head

    def _bytes(self, name: str) -> bytes:
        try:
            return self.captures[name]
        except KeyError:
            raise SourceError(f"{name}: no such capture in memory") from None
