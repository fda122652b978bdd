"""Shared rules: a rule many workloads need, written once in a policy that selects exactly
their pods (the write stage of replay and generate)."""

from cpg_core._names import SHARED_FOLDER
from cpg_core._rules import Rule
from cpg_core._sharing import (
    SharedPolicy,
    Sharing,
    read_shared,
    render_shared,
    share_rules,
    shared_evidence_plan,
)

__all__ = [
    "SHARED_FOLDER",
    "Rule",
    "SharedPolicy",
    "Sharing",
    "read_shared",
    "render_shared",
    "share_rules",
    "shared_evidence_plan",
]
