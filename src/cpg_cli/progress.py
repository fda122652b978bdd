"""Progress on a terminal, drawn by rich on stderr: how far a replay has read (percent of the
bytes, flows/s, time left) and what ``generate`` is doing. Nothing is drawn when stderr is not
a terminal or with ``--quiet``; warnings are printed above the line as they happen."""

from __future__ import annotations

import logging
import sys
import time
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from rich.console import Console
from rich.live import Live
from rich.progress import (
    BarColumn,
    Progress,
    ProgressColumn,
    Task,
    TextColumn,
    TimeRemainingColumn,
)
from rich.text import Text

from cpg_core.text import clean_text

if TYPE_CHECKING:  # a replay's progress must not load the live client (grpc)
    from cpg_io.runs import LiveCapture, ShadowCapture

log = logging.getLogger("cpg")

REFRESHES_PER_SECOND = 4
SHOWN_AFTER = 1.0
"""Seconds a review command runs before its progress line appears."""


def on_terminal(quiet: bool) -> bool:
    return not quiet and sys.stderr.isatty()


def _console() -> Console:
    # highlight off: rich would colour numbers and paths inside capture-derived text
    return Console(stderr=True, highlight=False)


class _Percent(ProgressColumn):
    def render(self, task: Task) -> Text:
        return Text("" if task.total is None else f"{task.percentage:5.1f}%")


class _Flows(ProgressColumn):
    def render(self, task: Task) -> Text:
        lines = int(task.fields.get("lines", 0))
        elapsed = task.elapsed or 0.0
        rate = lines / elapsed if elapsed > 0 else 0.0
        return Text(f"{lines:,} flows  {rate:,.0f} flows/s")


class _OnTerminal:
    """Something drawn live on stderr while a ``with`` block runs; the cursor comes back
    whatever happens in it."""

    _drawing: Progress | Live | None = None

    def __enter__(self) -> Self:
        if self._drawing is not None:
            self._drawing.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        if self._drawing is not None:
            self._drawing.stop()


class ReplayProgress(_OnTerminal):
    """The :class:`cpg_io.progress.ReplayWatcher` of ``cpg replay``: malformed lines are
    logged as they are found; on a terminal a progress line is drawn under them."""

    def __init__(self, source: str, *, show: bool) -> None:
        self.source = source
        self._progress: Progress | None = None
        self._task: Any = None
        self._drawn = False
        if show:
            self._progress = Progress(
                TextColumn("{task.description}"),
                BarColumn(bar_width=24),
                _Percent(),
                _Flows(),
                TextColumn("ETA"),
                TimeRemainingColumn(),
                console=_console(),
                transient=True,
                refresh_per_second=REFRESHES_PER_SECOND,
            )
        self._drawing = self._progress

    def reading(self, total_bytes: int | None) -> None:
        if self._progress is not None:
            self._task = self._progress.add_task(
                f"cpg: reading {clean_text(self.source)}", total=total_bytes, lines=0
            )

    def read(self, position: int, lines: int) -> None:
        if self._progress is not None and self._task is not None:
            # the first news is drawn at once; then rich redraws a few times a second
            self._progress.update(
                self._task, completed=position, lines=lines, refresh=not self._drawn
            )
            self._drawn = True

    def malformed(self, line: int, why: str, source: str | None = None) -> None:
        log.warning("%s:%d: skipped malformed line: %s", source or self.source, line, why)

    def tasks(self, done: int, total: int) -> None:
        if self._progress is not None and self._task is not None:
            self._progress.update(  # drawn at once: a task is news, and they are few
                self._task,
                description=f"cpg: reading {clean_text(self.source)} on Dask, {done}/{total} tasks",
                refresh=True,
            )

    def writing(self, policies: int) -> None:
        if self._progress is not None and self._task is not None:
            task = self._progress.tasks[0]
            self._progress.update(
                self._task,
                description=f"cpg: writing the policies of {policies} workloads…",
                completed=task.total if task.total is not None else task.completed,
            )
            self._progress.stop_task(self._task)  # flows/s is the reading rate


class _LiveLine:
    """``generate``'s status line, rendered from the capture's counters at each refresh."""

    def __init__(self, capture: LiveCapture) -> None:
        self.capture = capture

    def __rich__(self) -> Text:
        capture = self.capture
        progress = capture.progress
        elapsed = max(1.0, time.monotonic() - progress.started)
        totals = capture.totals
        text = (
            f"cpg: {progress.flows:,} flows ({progress.flows / elapsed:,.0f}/s), "
            f"{totals.candidates:,} candidates, {progress.policies_written:,} policies written, "
            f"{totals.infra_drops:,} infra drops"
        )
        if progress.flushing:
            text += f"; flushing {progress.flushing:,} policies…"
        return Text(text)


class GenerateProgress(_OnTerminal):
    """The status line of ``cpg generate`` on a terminal, and the message when the last
    flush starts (which can take seconds with many policies)."""

    def __init__(self, capture: LiveCapture, *, show: bool) -> None:
        self._console = _console() if show else None
        self._drawing = (
            Live(
                _LiveLine(capture),
                console=self._console,
                transient=True,
                refresh_per_second=REFRESHES_PER_SECOND,
            )
            if show
            else None
        )
        self.interrupted = False

    def final_flush(self, policies: int) -> None:
        if self._console is None or not policies:
            return
        abort = "Ctrl+C again to abort" if self.interrupted else "Ctrl+C to abort"
        self._console.print(f"cpg: flushing {policies:,} policies… ({abort})")


class _ShadowLine:
    """``shadow``'s status line: what was received, and the plan as of the last flush."""

    def __init__(self, capture: ShadowCapture) -> None:
        self.capture = capture

    def __rich__(self) -> Text:
        capture = self.capture
        progress = capture.progress
        elapsed = max(1.0, time.monotonic() - progress.started)
        text = f"cpg shadow: {progress.flows:,} flows ({progress.flows / elapsed:,.0f}/s)"
        last = capture.last
        if last is not None:
            plan = last.plan
            text += (
                f", {plan.forwarded_flows:,} forwarded checked, "
                f"{len(plan.would_break):,} kinds would break ({plan.would_break_flows:,} flows), "
                f"fixes {plan.fixed:,}/{plan.candidates:,}"
            )
        return Text(text)


class ShadowProgress(_OnTerminal):
    """The status line of ``cpg shadow`` on a terminal."""

    def __init__(self, capture: ShadowCapture, *, show: bool) -> None:
        self._drawing = (
            Live(
                _ShadowLine(capture),
                console=_console(),
                transient=True,
                refresh_per_second=REFRESHES_PER_SECOND,
            )
            if show
            else None
        )


class ReviewProgress(_OnTerminal):
    """The progress line of ``why``, ``verify`` and ``plan`` on a terminal: the lines read
    of the capture, then the kinds of flow judged, with the time so far. It reads the run's
    :class:`cpg_io.progress.ReviewTally` when it redraws; nothing is drawn off a terminal."""

    def __init__(self, what: str, *, show: bool) -> None:
        from cpg_io.progress import ReviewTally

        self.what = what
        self.tally = ReviewTally()
        self._began = time.monotonic()
        if show:
            self._drawing = Live(
                get_renderable=self.line,
                console=_console(),
                transient=True,
                refresh_per_second=REFRESHES_PER_SECOND,
            )

    def line(self) -> Text:
        """The line as it stands now."""
        tally = self.tally
        seconds = time.monotonic() - self._began
        if seconds < SHOWN_AFTER:
            return Text("")  # a quick answer needs no progress line
        if tally.phase == "reading":
            lines = tally.stats.lines_read if tally.stats is not None else 0
            doing = f"reading the capture: {lines:,} lines"
        elif tally.total:
            doing = f"{self.what}: {tally.done:,} of {tally.total:,} kinds of flow"
        else:
            doing = f"{self.what}…"
        return Text(f"cpg: {doing} ({seconds:.0f} s)")
