"""The collector's threshold while review runs read in bulk: raised while one runs, put
back by the last one out, whatever ends them."""

from __future__ import annotations

import gc
import threading

import pytest

from cpg_io.runs._heap import BULK_THRESHOLD, reads_in_bulk


def test_a_run_raises_the_threshold_and_puts_it_back_even_when_it_fails() -> None:
    before = gc.get_threshold()
    seen: list[int] = []

    @reads_in_bulk
    def run(fail: bool) -> int:
        seen.append(gc.get_threshold()[0])
        if fail:
            raise ValueError("boom")
        return 7

    assert run(False) == 7
    with pytest.raises(ValueError, match="boom"):
        run(True)
    assert seen == [max(BULK_THRESHOLD, before[0])] * 2
    assert gc.get_threshold() == before


def test_overlapping_runs_restore_the_threshold_only_when_the_last_one_ends() -> None:
    before = gc.get_threshold()
    first_inside, release_first = threading.Event(), threading.Event()
    during: list[int] = []

    @reads_in_bulk
    def slow() -> None:
        first_inside.set()
        release_first.wait(timeout=30)

    @reads_in_bulk
    def quick() -> None:
        during.append(gc.get_threshold()[0])

    worker = threading.Thread(target=slow)
    worker.start()
    assert first_inside.wait(timeout=30)
    quick()  # ends while slow still runs: the threshold stays raised
    assert gc.get_threshold()[0] == max(BULK_THRESHOLD, before[0])
    release_first.set()
    worker.join(timeout=30)
    assert during == [max(BULK_THRESHOLD, before[0])]
    assert gc.get_threshold() == before
