"""The cycle collector during a review run. A review builds hundreds of thousands of small
acyclic objects (policy models, evidence documents, flow groups) that live until the run
ends; with Python's default thresholds the collector walks them again every few hundred
allocations, a fifth of a large plan's time. Runs that read in bulk raise the first
generation's threshold while they work (replay and live sessions freeze what they keep
instead); the last run to finish puts it back."""

from __future__ import annotations

import functools
import gc
import threading
from collections.abc import Callable
from typing import ParamSpec, TypeVar

BULK_THRESHOLD = 50_000
"""Allocations between two collections of the youngest generation while a run reads."""

_P = ParamSpec("_P")
_R = TypeVar("_R")
_lock = threading.Lock()
_running = 0
_saved: tuple[int, int, int] = gc.get_threshold()


def _enter() -> None:
    global _running, _saved
    with _lock:
        if _running == 0:
            _saved = gc.get_threshold()
            gc.set_threshold(max(BULK_THRESHOLD, _saved[0]), _saved[1], _saved[2])
        _running += 1


def _leave() -> None:
    global _running
    with _lock:
        _running -= 1
        if _running == 0:
            gc.set_threshold(*_saved)


def reads_in_bulk(run: Callable[_P, _R]) -> Callable[_P, _R]:
    """``run`` with the collector's first threshold raised while it works (runs of other
    threads share the raise; the last one out restores the threshold)."""

    @functools.wraps(run)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        _enter()
        try:
            return run(*args, **kwargs)
        finally:
            _leave()

    return wrapper
