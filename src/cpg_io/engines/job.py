"""What an engine is asked to read, as one value: every engine takes the same job."""

from __future__ import annotations

import threading

import attrs

from cpg_core import AggregateOptions
from cpg_core.reading import ReadStats
from cpg_io.progress import Reported


@attrs.frozen
class ReadJob:
    """The files of one capture (read as one), how to aggregate their flows, the counts the
    reading adds to, where progress and malformed lines are told, and what stops it."""

    files: tuple[str, ...]
    options: AggregateOptions
    stats: ReadStats
    reported: Reported
    cancel: threading.Event | None = None

    @property
    def several(self) -> bool:
        """More than one file: what is told names the file."""
        return len(self.files) > 1
