"""The whole of cpg in one pure call, for notebooks and other programs: the lines of a capture
in; the policies as YAML, their evidence and the cluster-health report out. No file is read or
written and no clock is read: pass ``now`` to stamp the session."""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from cpg_core._base.documents import (
    ZERO_TIME,
    ClusterHealth,
    PolicyEvidence,
    SessionInfo,
    SessionSource,
)
from cpg_core._requests.requests import CaptureRequest
from cpg_core._review.evidence import plan_evidence
from cpg_core._synthesis.aggregate import Aggregator, PolicyPlan
from cpg_core._synthesis.declarations import Declarations
from cpg_core._synthesis.lines import LineAggregator, ReadStats
from cpg_core._synthesis.render import render_policy


@attrs.frozen(slots=True)
class Generated:
    """What one capture yields. Keys are ``namespace/workload``, as in the output folder."""

    policies: dict[str, str]
    """The CiliumNetworkPolicy YAML of each workload."""
    evidence: dict[str, PolicyEvidence]
    """Why each rule exists: counts, first/last seen and sample flows per allow entry."""
    health: ClusterHealth
    """Drops no policy fixes, findings and lost events."""
    plans: tuple[PolicyPlan, ...]
    stats: ReadStats
    """Lines read, malformed lines (with their numbers), lost events."""
    aggregator: Aggregator = attrs.field(repr=False)
    """Every count, for reports."""


def generate(
    lines: Iterable[str | bytes],
    request: CaptureRequest | None = None,
    *,
    now: str = ZERO_TIME,
    session_id: str = "cpg-core",
    source: str = "",
    cpg_version: str = "",
    declarations: Declarations | None = None,
) -> Generated:
    """Policies, evidence and cluster health from the JSON lines of ``hubble observe -o
    jsonpb`` (``{"flow": ...}`` or bare flows; malformed lines are counted in ``stats``).
    ``declarations``: what the cluster's objects declare (``cpg_core.declarations``), kept
    open as replay --declarations keeps it."""
    request = request or CaptureRequest()
    options = request.aggregate_options()
    if declarations is not None:
        options = attrs.evolve(options, declarations=declarations)
    feeder = LineAggregator(options)
    aggregator = feeder.aggregator
    stats = ReadStats()
    feeder.feed(lines, 1, stats)
    session = SessionInfo(
        id=session_id,
        started_at=now,
        ended_at=now,
        cpg_version=cpg_version,
        source=SessionSource(type="replay", file=source),
        flows_ingested=aggregator.total_flows,
        flows_unhandled=aggregator.total_flows - aggregator.rule_flows,
    )
    plans = tuple(aggregator.plans())
    return Generated(
        policies={
            f"{p.namespace}/{p.workload}": render_policy(
                p.name, p.namespace, p.target.selector, p.rules
            )
            for p in plans
        },
        evidence={
            f"{p.namespace}/{p.workload}": plan_evidence(
                p, session, max_samples=request.max_samples
            )
            for p in plans
        },
        health=aggregator.health(started=now, ended=now, lost_events=stats.lost_events),
        plans=plans,
        stats=stats,
        aggregator=aggregator,
    )
