"""When and as what a run is recorded: its clock, its session id, its cluster-health window."""

from __future__ import annotations

import secrets
from datetime import UTC, datetime

from cpg_core import Aggregator, ClusterHealth
from cpg_core.reading import ReadStats
from cpg_io.clock import rfc3339 as rfc3339, utc_now as utc_now


def new_session_id(started: datetime) -> str:
    """``<UTC start>-<4 random hex>``: sortable, and unique across concurrent runs."""
    return f"{started.astimezone(UTC):%Y-%m-%dT%H:%M:%SZ}-{secrets.token_hex(2)}"


def run_health(
    aggregator: Aggregator, stats: ReadStats, started: datetime, ended: datetime
) -> ClusterHealth:
    return aggregator.health(
        started=rfc3339(started), ended=rfc3339(ended), lost_events=stats.lost_events
    )
