"""What a review report is drawn from, read by the adapter that owns the files."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

from cpg_core._base.documents import ClusterHealth, PolicyEvidence
from cpg_core._review.availability import Availability
from cpg_core._review.plan_documents import Plan
from cpg_core._review.readiness import (
    ReadinessRules,
    WorkloadProfile,
    not_ready_first,
    workload_profile,
)
from cpg_core._synthesis.profile import CaptureProfile


def is_shared_name(name: str) -> bool:
    """A shared policy's name (its evidence is its members' flows for its rule)."""
    return name.startswith("cpg-shared-") or name.startswith("cpg-baseline-")


@attrs.frozen
class ReviewInputs:
    """A policy folder as a report sees it: the policies, their evidence and the cluster
    health, and a plan when one was given."""

    policies: list[dict[str, Any]]
    evidence: dict[str, PolicyEvidence]
    health: ClusterHealth | None
    plan: Plan | None
    problems: list[str]
    """Evidence files that could not be read (the report goes on without them)."""
    texts: dict[str, str] = attrs.Factory(dict)
    """``namespace/name`` of each policy -> the text of its file, comments and all."""
    declared: list[Availability] = attrs.Factory(list)
    """The dependencies the cluster's objects declare that the policies deny (CPG045)."""
    readiness: ReadinessRules = attrs.Factory(ReadinessRules)
    """When a workload is ready to enforce (§D59)."""

    def profiles(self) -> list[WorkloadProfile]:
        """Each policy's workload as its evidence shows it, those to keep learning first
        (shared policies' members are judged as their own)."""
        names = {
            f"{(p.get('metadata') or {}).get('namespace', '')}/{(p.get('metadata') or {}).get('name', '')}"
            for p in self.policies
        }
        docs = [
            doc
            for name, doc in sorted(self.evidence.items())
            if name in names and doc.policy.namespace and not is_shared_name(doc.policy.name)
        ]
        seen = evidence_capture(docs)
        found = [
            workload_profile(
                doc.policy.namespace, doc.policy.workload, doc.rules, self.readiness, seen
            )
            for doc in docs
        ]
        return not_ready_first(found)


_LEARNED = frozenset({"forwarded", "redirected"})


def evidence_capture(docs: Sequence[PolicyEvidence]) -> CaptureProfile:
    """What the evidence of a folder says of the captures behind it: the protocols and
    directions of its rules, and whether they were learned from traffic that works (then one
    protocol, or one direction, is all the captures held)."""
    protocols: dict[str, int] = {}
    directions: set[str] = set()
    learned = False
    for doc in docs:
        for rule in doc.rules:
            if not rule.flow_count:
                continue
            family = "ICMP" if rule.protocol.startswith("ICMP") else rule.protocol
            protocols[family] = protocols.get(family, 0) + rule.flow_count
            directions.add(rule.direction)
            learned = learned or bool(_LEARNED & rule.classes.keys())
    return CaptureProfile(
        first="",
        last="",
        span_seconds=0.0,
        flows=sum(protocols.values()),
        protocols=dict(sorted(protocols.items())),
        directions=tuple(sorted(directions)),
        learned=learned,
    )
