"""Why a flow was denied and what would admit it (``cpg why``, ``cpg trace``, cpg-mcp's
``explain_flow`` and ``trace_flow``): the answer, the Hubble-style filters that pick the flows
of a capture, and flows described by hand."""

from typing import TYPE_CHECKING

from cpg_core.lazy import lazy_face

if TYPE_CHECKING:
    from cpg_core._flows.filters import VERDICTS, FlowFilter
    from cpg_core._flows.synthesis import note_pod, with_known_pod
    from cpg_core._review.behind import evidence_behind
    from cpg_core._review.verify import check_key
    from cpg_core._review.why import (
        RuleMiss,
        Why,
        explain_denial,
        merged_answers,
        traced_endpoint,
        traced_flows,
        why_names,
    )

_WHERE = {
    "FlowFilter": "cpg_core._flows.filters",
    "RuleMiss": "cpg_core._review.why",
    "VERDICTS": "cpg_core._flows.filters",
    "Why": "cpg_core._review.why",
    "check_key": "cpg_core._review.verify",
    "evidence_behind": "cpg_core._review.behind",
    "explain_denial": "cpg_core._review.why",
    "merged_answers": "cpg_core._review.why",
    "note_pod": "cpg_core._flows.synthesis",
    "traced_endpoint": "cpg_core._review.why",
    "traced_flows": "cpg_core._review.why",
    "why_names": "cpg_core._review.why",
    "with_known_pod": "cpg_core._flows.synthesis",
}
__getattr__ = lazy_face(__name__, _WHERE)

__all__ = [
    "VERDICTS",
    "FlowFilter",
    "RuleMiss",
    "Why",
    "check_key",
    "evidence_behind",
    "explain_denial",
    "merged_answers",
    "note_pod",
    "traced_endpoint",
    "traced_flows",
    "why_names",
    "with_known_pod",
]
