"""Why a flow was denied and what would admit it (``cpg why``, ``cpg trace``, cpg-mcp's
``explain_flow`` and ``trace_flow``): the answer, the Hubble-style filters that pick the flows
of a capture, and flows described by hand."""

from typing import TYPE_CHECKING

from cpg_core.lazy import lazy_face

if TYPE_CHECKING:
    from cpg_core.flows._filters import VERDICTS, FlowFilter
    from cpg_core.flows._synthesis import note_pod, with_known_pod
    from cpg_core.review._verify import check_key
    from cpg_core.review._why import (
        RuleMiss,
        Why,
        explain_denial,
        merged_answers,
        traced_endpoint,
        traced_flows,
        why_names,
    )

_WHERE = {
    "FlowFilter": "cpg_core.flows._filters",
    "RuleMiss": "cpg_core.review._why",
    "VERDICTS": "cpg_core.flows._filters",
    "Why": "cpg_core.review._why",
    "check_key": "cpg_core.review._verify",
    "explain_denial": "cpg_core.review._why",
    "merged_answers": "cpg_core.review._why",
    "note_pod": "cpg_core.flows._synthesis",
    "traced_endpoint": "cpg_core.review._why",
    "traced_flows": "cpg_core.review._why",
    "why_names": "cpg_core.review._why",
    "with_known_pod": "cpg_core.flows._synthesis",
}
__getattr__ = lazy_face(__name__, _WHERE)

__all__ = [
    "VERDICTS",
    "FlowFilter",
    "RuleMiss",
    "Why",
    "check_key",
    "explain_denial",
    "merged_answers",
    "note_pod",
    "traced_endpoint",
    "traced_flows",
    "why_names",
    "with_known_pod",
]
