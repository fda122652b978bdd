"""Shared rules: a rule many workloads need, written once in a policy that selects exactly
their pods (the write stage of replay and generate)."""

from cpg_core._base.names import SHARED_FOLDER
from cpg_core._base.rules import EGRESS, Rule
from cpg_core._review.availability import BASELINE_GAPS, BASELINE_NOTE
from cpg_core._synthesis.baseline import (
    KIND as BASELINE_KIND,
    BaselinePolicy,
    move_to_baseline,
    read_baseline,
    render_baseline,
    with_baseline_rules,
)
from cpg_core._synthesis.narrow import Exclusions, split_exclusions, with_exclusions
from cpg_core._synthesis.sharing import (
    SharedPolicy,
    Sharing,
    evidence_by_policy,
    joined_rules,
    read_shared,
    render_shared,
    share_rules,
    shared_evidence_plan,
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
