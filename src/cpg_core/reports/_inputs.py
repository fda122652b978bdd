"""What a review report is drawn from, read by the adapter that owns the files."""

from __future__ import annotations

from typing import Any

import attrs

from cpg_core.base import ClusterHealth, PolicyEvidence
from cpg_core.review import Availability, Plan


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
