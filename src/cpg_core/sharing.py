"""Shared rules: a rule many workloads need, written once in a policy that selects exactly
their pods (the write stage of replay and generate)."""

from cpg_core.base import EGRESS, SHARED_FOLDER, Rule
from cpg_core.review import BASELINE_GAPS, BASELINE_NOTE
from cpg_core.synthesis import KIND as BASELINE_KIND
from cpg_core.synthesis import (
    BaselinePolicy,
    Exclusions,
    SharedPolicy,
    Sharing,
    evidence_by_policy,
    joined_rules,
    move_to_baseline,
    read_baseline,
    read_shared,
    render_baseline,
    render_shared,
    share_rules,
    shared_evidence_plan,
    split_exclusions,
    with_baseline_rules,
    with_exclusions,
)

__all__ = [
    "BASELINE_GAPS",
    "BASELINE_KIND",
    "BASELINE_NOTE",
    "EGRESS",
    "SHARED_FOLDER",
    "BaselinePolicy",
    "Exclusions",
    "Rule",
    "SharedPolicy",
    "Sharing",
    "evidence_by_policy",
    "joined_rules",
    "move_to_baseline",
    "read_baseline",
    "read_shared",
    "render_baseline",
    "render_shared",
    "share_rules",
    "shared_evidence_plan",
    "split_exclusions",
    "with_baseline_rules",
    "with_exclusions",
]
