"""The wall clock, read in one place: cpg_core reads none, and what a root or a run needs of
it (a live window anchored at now, a run's start) comes from here."""

from __future__ import annotations

from datetime import UTC, datetime


def utc_now() -> datetime:
    return datetime.now(UTC)


def rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def now_rfc3339() -> str:
    """Now, as the live window and a session's times spell it."""
    return rfc3339(utc_now())
