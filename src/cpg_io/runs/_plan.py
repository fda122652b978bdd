"""Reading what ``cpg plan`` judges: the capture (every verdict), the proposed and current
policies, and the proposal's evidence. The plan itself is pure (``cpg_core.plan``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from cpg_core import CurrentSource, DecideOptions, Plan, PolicyEvidence, plan
from cpg_io.evidence_store import EvidenceStore
from cpg_io.sources import CaptureFlows, ReadStats


@attrs.frozen
class PlannedCapture:
    stats: ReadStats
    plan: Plan
    problems: list[str] = attrs.Factory(list)
    """Evidence files that could not be read (their rules get no confidence line)."""


def plan_capture(
    inputs: Sequence[str],
    proposal: Sequence[Mapping[str, Any]],
    current: Sequence[Mapping[str, Any]] | None,
    *,
    current_source: CurrentSource,
    options: DecideOptions,
    evidence: EvidenceStore | None = None,
    default_local_cluster: bool = True,
) -> PlannedCapture:
    """The plan of ``proposal`` over a capture; UnreadableInput when it holds no record."""
    capture = CaptureFlows(inputs)
    problems: list[str] = []
    found: dict[str, PolicyEvidence] = {}
    if evidence is not None:
        for namespace, _workload, doc in evidence.read_all(problems.append):
            found[f"{namespace}/{doc.policy.name}"] = doc
    result = plan(
        capture,
        proposal,
        current,
        current_source=current_source,
        options=options,
        evidence=found,
        default_local_cluster=default_local_cluster,
    )
    capture.check_readable()
    return PlannedCapture(stats=capture.stats, plan=result, problems=problems)
