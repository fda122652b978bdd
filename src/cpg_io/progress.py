"""What a replay tells whoever watches it while it runs: how far it has read, the malformed
lines as they are found, and when it starts writing. The CLI draws a progress line from it;
everything else passes :data:`SILENT`."""

from __future__ import annotations

from typing import Protocol

import attrs

from cpg_core import ReadStats
from cpg_core.reading import MAX_REPORTED


class ReplayWatcher(Protocol):
    def reading(self, total_bytes: int | None) -> None:
        """Reading starts; ``total_bytes`` is None when the size is unknown (a pipe)."""

    def read(self, position: int, lines: int) -> None:
        """``position`` bytes of the input and ``lines`` lines were read so far."""

    def malformed(self, line: int, why: str, source: str | None = None) -> None:
        """A line that is not a Hubble record (each reported line once); ``source`` names
        the file when a run reads several."""

    def writing(self, policies: int) -> None:
        """Reading is done; ``policies`` policies are being merged and written."""

    def tasks(self, done: int, total: int) -> None:
        """On a cluster (--engine dask): ``done`` of ``total`` reading tasks finished."""


class _Silent:
    def reading(self, total_bytes: int | None) -> None:
        pass

    def read(self, position: int, lines: int) -> None:
        pass

    def malformed(self, line: int, why: str, source: str | None = None) -> None:
        pass

    def writing(self, policies: int) -> None:
        pass

    def tasks(self, done: int, total: int) -> None:
        pass


SILENT: ReplayWatcher = _Silent()


class Reported:
    """Hands each malformed line to the watcher once, whichever path found it first, and no
    more of them than a report lists."""

    def __init__(self, watcher: ReplayWatcher) -> None:
        self.watcher = watcher
        self._seen: set[tuple[str | None, int]] = set()

    def malformed(self, line: int, why: str, source: str | None = None) -> None:
        if (source, line) not in self._seen and len(self._seen) < MAX_REPORTED:
            self._seen.add((source, line))
            self.watcher.malformed(line, why, source)

    def read(self, position: int, lines: int) -> None:
        self.watcher.read(position, lines)


@attrs.define
class ReviewTally:
    """How far a review command (why, verify, plan) has got: the run only sets numbers, and
    whoever draws a progress line reads them when it redraws."""

    phase: str = "reading"
    """``reading`` the capture, then ``judging`` what was read."""
    stats: ReadStats | None = None
    """The capture's counts while it is read (lines so far)."""
    done: int = 0
    total: int = 0
    """Kinds of flow judged so far, of ``total`` (0: not counted)."""
