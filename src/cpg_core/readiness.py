"""Knowing when a capture is enough (ARCHITECTURE §D59): how long and how wide a capture is,
what it shows of each workload (its span, flows, peers and learning curve), and whether the
workload's policy is ready to enforce or should keep learning, with the reason."""

from cpg_core._requests.run_request import readiness_rules
from cpg_core._review.evidence import rule_records
from cpg_core._review.readiness import (
    DEFAULT_MIN_FLOWS,
    DEFAULT_MIN_SPAN,
    DEFAULT_STABLE_FOR,
    ReadinessRules,
    WorkloadProfile,
    not_ready_first,
    readiness_summary,
    shadowed,
    workload_profile,
)
from cpg_core._synthesis.profile import (
    CaptureProfile,
    at_second,
    capture_profile,
    duration_text,
    sample_nodes,
    seconds_of,
    time_gaps,
)

__all__ = [
    "DEFAULT_MIN_FLOWS",
    "DEFAULT_MIN_SPAN",
    "DEFAULT_STABLE_FOR",
    "CaptureProfile",
    "ReadinessRules",
    "WorkloadProfile",
    "at_second",
    "capture_profile",
    "duration_text",
    "not_ready_first",
    "readiness_rules",
    "readiness_summary",
    "rule_records",
    "sample_nodes",
    "seconds_of",
    "shadowed",
    "time_gaps",
    "workload_profile",
]
