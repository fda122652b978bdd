"""Where a replay reads and aggregates its capture, chosen once, as an HTTP client chooses a
transport: in this process, in forked worker processes, on a Dask cluster, or (for tests)
from bytes in memory. Every engine gives the same aggregate for the same capture; the run
layer neither knows nor cares which one ran."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from cpg_core import Aggregator, EngineChoice
from cpg_io.engines.job import ReadJob
from cpg_io.engines.local import Forked, InProcess
from cpg_io.engines.memory import InMemory
from cpg_io.engines.workers import default_jobs


class Engine(Protocol):
    """Reads the capture's files and aggregates their flows."""

    @property
    def jobs(self) -> int:
        """Processes the write stage may fork for rendering (1: none)."""

    def aggregate(self, job: ReadJob) -> tuple[Aggregator, bytes]:
        """The aggregate of every flow in the job's files (read as one capture, their counts
        added to its ``stats``) and the first bytes of the first non-empty file (to say what
        an unreadable input looks like). The job's ``cancel`` stops it."""


def choose_engine(choice: EngineChoice) -> Engine:
    """The engine a request asked for; jobs default to one per CPU."""
    jobs = choice.jobs or default_jobs()
    if choice.kind == "dask":
        from cpg_io.engines.dask import DaskEngine

        return DaskEngine(choice.scheduler or f"local:{jobs}", choice.part_bytes, jobs)
    return InProcess() if jobs <= 1 else Forked(jobs)


def in_memory(captures: Mapping[str, bytes]) -> Engine:
    """An engine that reads named captures from memory (tests, notebooks)."""
    return InMemory(captures)


__all__ = ["Engine", "Forked", "InMemory", "InProcess", "ReadJob", "choose_engine", "in_memory"]
